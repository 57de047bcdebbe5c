"""Packing and sentence-pair datasets, checked against synthetic token ids whose values encode position.

Token ids increase by one along the whole corpus (10, 11, 12, ...), so "consecutive in the text"
is simply "each id is one more than the previous", and an id identifies its document.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lmforge.data.datasets import Draws, PackedDataset, SentencePairDataset, sentence_chunks
from lmforge.errors import ConfigError, DataError

BOS, EOS, CLS, SEP = 5, 1, 2, 3


def synthetic_documents(n_docs: int = 40, seed: int = 0) -> list[list[list[int]]]:
    rng = np.random.default_rng(seed)
    next_id, docs = 10, []
    for _ in range(n_docs):
        doc = []
        for _ in range(rng.integers(1, 9)):  # some single-sentence documents too
            length = int(rng.integers(2, 7))
            doc.append(list(range(next_id, next_id + length)))
            next_id += length
        docs.append(doc)
    return docs


def reference_stream(docs, bos=None, eos=None) -> list[int]:
    out = []
    for doc in docs:
        out += (
            ([bos] if bos is not None else [])
            + [t for s in doc for t in s]
            + ([eos] if eos is not None else [])
        )
    return out


@pytest.mark.parametrize(("bos", "eos"), [(None, EOS), (BOS, EOS), (BOS, None), (None, None)])
def test_stream_ranges_match_the_packed_reference(make_encoded, bos, eos):
    docs = synthetic_documents(7)
    docs.insert(3, [[]])  # an empty document: only its bos / eos are in the stream
    reference = reference_stream(docs, bos, eos)
    ds = PackedDataset(make_encoded(docs), block_size=4, eos_id=eos, bos_id=bos)
    assert ds.stream(0, len(reference)).tolist() == reference
    rng = np.random.default_rng(0)
    for begin, length in zip(rng.integers(0, len(reference), 200), rng.integers(1, 20, 200)):
        end = min(int(begin + length), len(reference))
        assert ds.stream(int(begin), end).tolist() == reference[begin:end], (begin, end)


@pytest.mark.parametrize("block_size", [1, 3, 7, 16, 64])
@pytest.mark.parametrize(("bos", "eos"), [(None, EOS), (BOS, EOS), (None, None)])
def test_every_block_is_the_reference_cut(make_encoded, block_size, bos, eos):
    docs = synthetic_documents(30, seed=block_size)
    reference = reference_stream(docs, bos, eos)
    ds = PackedDataset(make_encoded(docs), block_size=block_size, eos_id=eos, bos_id=bos)
    assert len(ds) == len(reference) // block_size
    cut = [reference[i * block_size : (i + 1) * block_size] for i in range(len(ds))]
    assert [ds[i]["input_ids"].tolist() for i in range(len(ds))] == cut


def test_blocks_hold_no_copy_of_the_split(make_encoded):
    """The dataset keeps the split and one offset per document, not a stream per token."""
    docs = synthetic_documents(40)
    split = make_encoded(docs)
    ds = PackedDataset(split, block_size=16, eos_id=EOS)
    arrays = [v for v in vars(ds).values() if isinstance(v, (np.ndarray, torch.Tensor))]
    assert max(len(a) for a in arrays) == len(docs) + 1 < split.n_tokens
    assert ds.split.tokens is split.tokens


def test_packed_blocks_are_full_and_put_eos_between_documents(make_encoded):
    docs = synthetic_documents()
    ds = PackedDataset(make_encoded(docs), block_size=16, eos_id=EOS)
    stream = reference_stream(docs, eos=EOS)
    assert len(ds) == len(stream) // 16
    blocks = [ds[i] for i in range(len(ds))]
    assert all(b["input_ids"].shape == (16,) and b["input_ids"].dtype == torch.long for b in blocks)
    assert [b["index"] for b in blocks] == list(range(len(ds)))
    assert torch.cat([b["input_ids"] for b in blocks]).tolist() == stream[: len(ds) * 16]
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_packed_blocks_wrapped_in_cls_sep_keep_block_size(make_encoded):
    docs = synthetic_documents()
    ds = PackedDataset(make_encoded(docs), block_size=12, eos_id=SEP, cls_id=CLS, sep_id=SEP)
    body = reference_stream(docs, eos=SEP)
    for i in (0, 1, len(ds) - 1):
        ids = ds[i]["input_ids"].tolist()
        assert len(ids) == 12 and ids[0] == CLS and ids[-1] == SEP
        assert ids[1:-1] == body[i * 10 : (i + 1) * 10]


def reference_boundaries(docs, bos=None, eos=None) -> tuple[list[int], list[int]]:
    """Stream positions where each document starts (its bos) and where each sentence starts (a
    document's first sentence at the document's start)."""
    doc_starts, sentence_starts, at = [], [], 0
    for doc in docs:
        doc_starts.append(at)
        sentence_starts.append(at)
        at += bos is not None
        for sentence in doc:
            sentence_starts.append(at)
            at += len(sentence)
        at += eos is not None
    return doc_starts, sorted(set(sentence_starts))


@pytest.mark.parametrize("block_size", [3, 7, 16])
@pytest.mark.parametrize(("bos", "eos"), [(None, EOS), (BOS, EOS), (BOS, None), (None, None)])
def test_sentence_aligned_blocks_start_at_the_first_sentence_at_or_after_the_grid(
    make_encoded, block_size, bos, eos
):
    docs = synthetic_documents(30, seed=block_size)
    docs.insert(5, [[]])  # an empty document starts a block too (its bos / eos)
    reference = reference_stream(docs, bos, eos)
    _, starts = reference_boundaries(docs, bos, eos)
    begins = []
    for k in range(len(reference) // block_size):
        later = [b for b in starts if b >= k * block_size]
        if not later or later[0] + block_size > len(reference):
            break
        begins.append(later[0])
    ds = PackedDataset(make_encoded(docs), block_size, eos_id=eos, bos_id=bos, start="sentence")
    assert len(ds) == len(begins) and len(ds) >= len(reference) // block_size - 2
    assert [ds[i]["input_ids"].tolist() for i in range(len(ds))] == [
        reference[b : b + block_size] for b in begins
    ]


@pytest.mark.parametrize(("bos", "eos"), [(None, EOS), (BOS, EOS)])
def test_document_aligned_blocks_are_each_documents_opening(make_encoded, bos, eos):
    docs = synthetic_documents(30)
    reference = reference_stream(docs, bos, eos)
    doc_starts, _ = reference_boundaries(docs, bos, eos)
    fits = [b for b in doc_starts if b + 40 <= len(reference)]
    ds = PackedDataset(make_encoded(docs), 40, eos_id=eos, bos_id=bos, start="document")
    assert len(ds) == len(fits) < len(docs)  # the last documents' openings run past the stream
    assert [ds[i]["input_ids"].tolist() for i in range(len(ds))] == [reference[b : b + 40] for b in fits]
    if bos is not None:
        assert all(ds[i]["input_ids"][0] == bos for i in range(len(ds)))


def test_aligned_blocks_keep_cls_and_sep(make_encoded):
    docs = synthetic_documents()
    ds = PackedDataset(make_encoded(docs), 12, eos_id=SEP, cls_id=CLS, sep_id=SEP, start="sentence")
    _, starts = reference_boundaries(docs, eos=SEP)
    body = reference_stream(docs, eos=SEP)
    for i in (0, 1, len(ds) - 1):
        ids = ds[i]["input_ids"].tolist()
        b = next(b for b in starts if b >= i * 10)
        assert ids == [CLS, *body[b : b + 10], SEP]


def test_packed_errors(make_encoded):
    split = make_encoded([[[10, 11, 12]]])
    with pytest.raises(DataError, match="fewer than one block"):
        PackedDataset(split, block_size=8)
    with pytest.raises(ConfigError, match="block_size=2"):
        PackedDataset(split, block_size=2, cls_id=CLS, sep_id=SEP)
    with pytest.raises(ConfigError, match="got 'paragraph', expected one of any, sentence, document"):
        PackedDataset(split, block_size=2, start="paragraph")


def document_of(docs) -> dict[int, int]:
    return {t: d for d, doc in enumerate(docs) for s in doc for t in s}


def segments(item) -> tuple[list[int], list[int]]:
    ids, types = item["input_ids"].tolist(), item["token_type_ids"].tolist()
    first_sep = ids.index(SEP)
    assert ids[0] == CLS and ids[-1] == SEP
    assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    return ids[1:first_sep], ids[first_sep + 1 : -1]


def test_nsp_pairs_are_real_continuations_or_other_documents(make_encoded):
    docs = synthetic_documents()
    ds = SentencePairDataset(make_encoded(docs), max_len=20, cls_id=CLS, sep_id=SEP, seed=3)
    doc_of = document_of(docs)
    labels = []
    for draw in range(8):
        for i in range(len(ds)):
            item = ds.item(i, draw)
            a, b = segments(item)
            assert len(item["input_ids"]) <= 20 and a and b and item["index"] == i
            assert a == list(range(a[0], a[0] + len(a)))  # A is contiguous text
            if item["nsp_label"] == 1:
                assert b[0] == a[-1] + 1 and b == list(range(b[0], b[0] + len(b)))  # B continues A
                assert doc_of[a[0]] == doc_of[b[-1]]
            else:
                assert doc_of[b[0]] != doc_of[a[0]]
            labels.append(item["nsp_label"])
    n, p = len(labels), sum(labels) / len(labels)
    assert abs(p - 0.5) < 4 * math.sqrt(0.25 / n), (n, p)


def test_nsp_is_deterministic_by_seed_index_and_draw(make_encoded):
    split = make_encoded(synthetic_documents())

    def draws(seed, draw):
        ds = SentencePairDataset(split, max_len=20, cls_id=CLS, sep_id=SEP, seed=seed)
        return [
            (ds.item(i, draw)["input_ids"].tolist(), ds.item(i, draw)["nsp_label"]) for i in range(len(ds))
        ]

    assert draws(0, 0) == draws(0, 0)
    assert draws(0, 0) != draws(1, 0)
    assert draws(0, 0) != draws(0, 1)


def test_static_draws_are_fixed_copies_and_dynamic_draws_follow_the_epoch(make_encoded):
    """BERT: `dupe_factor` instances per example, each its own pair, the same every epoch.
    RoBERTa-style dynamic: one instance per example, redrawn every epoch."""
    base = SentencePairDataset(
        make_encoded(synthetic_documents()), max_len=20, cls_id=CLS, sep_id=SEP, seed=3
    )
    n = len(base)
    static = Draws(base, copies=3, dynamic=False)
    assert len(static) == 3 * n
    for k in (0, n + 1, 2 * n + 2):
        assert static[(0, k)]["draw"] == k // n and static[(0, k)]["index"] == k % n
        assert static[(0, k)]["input_ids"].tolist() == static[(7, k)]["input_ids"].tolist()  # any epoch
    copies = [static[(0, c * n + 1)]["input_ids"].tolist() for c in range(3)]
    pairs = [[static[(0, c * n + i)]["input_ids"].tolist() for i in range(n)] for c in range(3)]
    assert len({str(p) for p in pairs}) == 3 and copies[0] == base.item(1, 0)["input_ids"].tolist()
    dynamic = Draws(base, copies=1, dynamic=True)
    assert len(dynamic) == n and dynamic[(2, 1)]["draw"] == 2
    epochs = [[dynamic[(e, i)]["input_ids"].tolist() for i in range(n)] for e in range(3)]
    assert epochs[0] != epochs[1] != epochs[2] and epochs[1] == pairs[1]


def test_single_segment_mode(make_encoded):
    docs = synthetic_documents()
    ds = SentencePairDataset(make_encoded(docs), max_len=12, cls_id=CLS, sep_id=SEP, nsp=False)
    covered = set()
    for i in range(len(ds)):
        item = ds[i]
        ids = item["input_ids"].tolist()
        assert item["nsp_label"] == -1 and ids[0] == CLS and ids[-1] == SEP and len(ids) <= 12
        assert item["token_type_ids"].sum() == 0
        assert ids[1:-1] == list(range(ids[1], ids[1] + len(ids) - 2))
        covered.add(document_of(docs)[ids[1]])
    assert covered == set(range(len(docs)))  # single-sentence documents are used too


def reference_chunks(docs, target: int, min_sentences: int) -> list[tuple[int, int]]:
    """(first, end) sentence indices of the chunks, from the documents as Python lists."""
    chunks, base = [], 0
    for doc in docs:
        lengths, start, tokens, mine = [len(s) for s in doc], 0, 0, []
        if len(doc) >= min_sentences:
            for i, n in enumerate(lengths):
                tokens += n
                if i + 1 - start >= min_sentences and tokens >= target:
                    mine.append([start, i + 1])
                    start, tokens = i + 1, 0
            if start < len(doc):
                if len(doc) - start < min_sentences and mine:
                    mine[-1][1] = len(doc)
                else:
                    mine.append([start, len(doc)])
        chunks += [(base + a, base + b) for a, b in mine]
        base += len(doc)
    return chunks


@pytest.mark.parametrize(("target", "min_sentences"), [(1, 1), (9, 2), (17, 2), (40, 1)])
def test_sentence_chunks_match_the_reference(make_encoded, target, min_sentences):
    docs = synthetic_documents(60, seed=4)
    docs.insert(5, [[]])  # an empty document yields no chunk
    got = sentence_chunks(make_encoded(docs), target, min_sentences)
    assert got.dtype == np.int64 and got.shape[1] == 2
    assert [tuple(row) for row in got.tolist()] == reference_chunks(docs, target, min_sentences)


def test_nsp_needs_two_documents(make_encoded):
    with pytest.raises(DataError, match="NSP needs at least 2"):
        SentencePairDataset(make_encoded([[[10, 11], [12, 13]]]), max_len=10, cls_id=CLS, sep_id=SEP)


def test_a_split_pickles_as_its_location(make_encoded):
    """A spawned DataLoader worker or DDP process gets the split's folder, not a copy of its tokens."""
    import pickle

    split = make_encoded(synthetic_documents(400))
    assert len(pickle.dumps(split)) < 1_000 < split.tokens.nbytes
    ds = PackedDataset(split, block_size=16, eos_id=EOS)
    copy = pickle.loads(pickle.dumps(ds))
    assert [copy[i]["input_ids"].tolist() for i in range(len(ds))] == [
        ds[i]["input_ids"].tolist() for i in range(len(ds))
    ]
