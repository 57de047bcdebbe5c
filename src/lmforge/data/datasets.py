"""Torch datasets over an `EncodedSplit`.

`PackedDataset`: contiguous fixed-length blocks for causal LM (GPT-2, Radford et al., 2019), RoBERTa
"full-sentences" MLM (Liu et al., 2019) and T5 span corruption (Raffel et al., 2020):

    stream = [bos] doc_0 [eos] [bos] doc_1 [eos] ...        (bos / eos only when given)
    block  = [cls] stream[k*n : (k+1)*n] [sep]               n = block_size - (#cls + #sep)

    Training blocks may instead start at a boundary (`start`): with "sentence", block k is
    stream[b : b+n] where b is the first sentence start at or after k*n (a document's first sentence
    starts at its [bos]), so no block opens mid-sentence and consecutive blocks overlap by less than a
    sentence; with "document", block j is the first n stream positions of document j (running on
    into the next documents when it is shorter), one block per document: the speedrun's batches
    aligned to document starts.

`Draws`: which random draw (static copy or epoch) an example's corruption uses on each visit.

`SentencePairDataset`: BERT next-sentence-prediction pairs from real text (Devlin et al., 2019):

    [CLS] A [SEP] B [SEP]     type ids 0 ... 0 1 ... 1
    A = one or more consecutive sentences of a document; B = the sentences that really follow A
    (nsp_label 1) or sentences from another document (nsp_label 0), each with probability 1/2.
"""

from __future__ import annotations

from array import array

import numpy as np
import torch
from torch.utils.data import Dataset

from lmforge.data.encoded import EncodedSplit
from lmforge.errors import ConfigError, DataError


class PackedDataset(Dataset):
    """Fixed-length blocks cut from the packed token stream; the last partial block is dropped.

    The stream is never built: a block is assembled on request from the split's token file
    (`EncodedSplit.read`) and its document offsets (n_documents + 1 integers), so memory does not
    grow with the corpus. Stream position `p` lies in document `j` where `starts[j] <= p < starts[j + 1]`, with
    `starts[j] = token_offset[j] + j * (#bos + #eos)`: [bos] tokens [eos] of each document in turn.

    Item: {"input_ids": LongTensor(block_size), "index": int}.
    """

    STARTS = ("any", "sentence", "document")

    def __init__(
        self,
        split: EncodedSplit,
        block_size: int,
        eos_id: int | None = None,
        bos_id: int | None = None,
        cls_id: int | None = None,
        sep_id: int | None = None,
        start: str = "any",
    ) -> None:
        if start not in self.STARTS:
            raise ConfigError(f"block start: got {start!r}, expected one of {', '.join(self.STARTS)}")
        self.head = np.asarray([] if cls_id is None else [cls_id], dtype=np.int64)
        self.tail = np.asarray([] if sep_id is None else [sep_id], dtype=np.int64)
        self.content = block_size - len(self.head) - len(self.tail)  # stream tokens per block
        if self.content < 1:
            raise ConfigError(
                f"block_size={block_size} leaves no room for tokens besides [CLS]/[SEP]; expected more"
            )
        self.block_size, self.split = block_size, split
        self.bos, self.eos = bos_id, eos_id
        self.lead = int(bos_id is not None)
        self.doc_offsets = split.document_token_offsets()
        per_doc = self.lead + int(eos_id is not None)
        self.starts = self.doc_offsets + per_doc * np.arange(len(self.doc_offsets))
        self.start, stream_length = start, int(self.starts[-1])
        if start == "document":  # documents whose block fits before the stream ends
            self.n_blocks = int(np.searchsorted(self.starts, stream_length - self.content, side="right"))
        else:
            self.n_blocks = stream_length // self.content
            while (
                start == "sentence"
                and self.n_blocks
                and self.begin(self.n_blocks - 1) + self.content > stream_length
            ):
                self.n_blocks -= 1  # a block moved forward past the stream's end
        if self.n_blocks == 0:
            raise DataError(
                f"split {split.split} packs to {stream_length} tokens, fewer than one block of "
                f"{self.content}; expected a smaller block_size or more data"
            )

    def __len__(self) -> int:
        return self.n_blocks

    def begin(self, index: int) -> int:
        """Stream position where block `index` starts."""
        if self.start == "document":
            return int(self.starts[index])
        at = index * self.content
        if self.start == "any":
            return at
        doc = int(np.searchsorted(self.starts, at, side="right")) - 1
        if at == self.starts[doc]:
            return at
        sentences = self.split.sentence_range(doc)
        offsets = self.split.sentence_offsets_at(sentences.start, sentences.stop)  # its sentences' starts
        token = (
            int(self.doc_offsets[doc]) + at - int(self.starts[doc]) - self.lead
        )  # first token at or after `at`
        k = int(np.searchsorted(offsets, token, side="left"))
        if k == len(offsets):  # no sentence of this document starts there: the next document's [bos]
            return int(self.starts[doc + 1])
        return int(self.starts[doc]) + self.lead + int(offsets[k] - self.doc_offsets[doc])

    def stream(self, begin: int, end: int) -> np.ndarray:
        """Stream positions [begin, end) as int64: the documents' tokens with their bos / eos."""
        pieces = []
        doc = int(np.searchsorted(self.starts, begin, side="right")) - 1
        while begin < end:
            first, length = int(self.starts[doc]), int(self.doc_offsets[doc + 1] - self.doc_offsets[doc])
            lo, hi = begin - first, min(end, int(self.starts[doc + 1])) - first  # within this document
            if lo == 0 and self.lead:
                pieces.append(np.asarray([self.bos], dtype=np.int64))
            t0, t1 = max(lo - self.lead, 0), min(hi - self.lead, length)  # its tokens in [lo, hi)
            if t1 > t0:
                offset = int(self.doc_offsets[doc])
                pieces.append(self.split.read(offset + t0, offset + t1).astype(np.int64))
            if self.eos is not None and hi == self.lead + length + 1:
                pieces.append(np.asarray([self.eos], dtype=np.int64))
            begin, doc = first + hi, doc + 1
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor | int]:
        if not 0 <= index < self.n_blocks:
            raise IndexError(f"block {index} out of range for {self.n_blocks} blocks")
        first = self.begin(index)
        body = self.stream(first, first + self.content)
        return {"input_ids": torch.from_numpy(np.concatenate([self.head, body, self.tail])), "index": index}


def sentence_chunks(split: EncodedSplit, target: int, min_sentences: int) -> np.ndarray:
    """(first sentence, end sentence) of each chunk of consecutive sentences of one document, as an
    (n, 2) int64 array: 16 bytes a chunk, the sentence offsets read one document at a time.

    A chunk closes once it holds at least `min_sentences` sentences and `target` tokens; a short
    remainder at the end of a document joins the previous chunk. Documents with fewer than
    `min_sentences` sentences yield no chunk.
    """
    out = array("q")
    documents = np.asarray(split.document_offsets)
    for doc in range(split.n_documents):
        first, stop = int(documents[doc]), int(documents[doc + 1])
        if stop - first < min_sentences:
            continue
        lengths = np.diff(split.sentence_offsets_at(first, stop + 1)).tolist()
        start, tokens, first_of_doc = first, 0, len(out)
        for i in range(first, stop):
            tokens += lengths[i - first]
            if i + 1 - start >= min_sentences and tokens >= target:
                out.extend((start, i + 1))
                start, tokens = i + 1, 0
        if start == stop:
            continue
        if stop - start < min_sentences and len(out) > first_of_doc:
            out[-1] = stop  # too few sentences left: extend the last chunk
        else:
            out.extend((start, stop))
    return np.frombuffer(out, dtype=np.int64).reshape(-1, 2) if out else np.zeros((0, 2), dtype=np.int64)


class SentencePairDataset(Dataset):
    """BERT inputs from real text: NSP pairs (nsp=True) or single segments of whole sentences.

    Item: {"input_ids": LongTensor(L), "token_type_ids": LongTensor(L), "nsp_label": int, "index": int},
    L <= max_len; nsp_label is -1 when nsp=False. The pair of `item(index, draw)` depends only on
    (seed, draw, index); `Draws` decides what `draw` is (an instance copy or the epoch).
    """

    def __init__(
        self, split: EncodedSplit, max_len: int, cls_id: int, sep_id: int, nsp: bool = True, seed: int = 0
    ) -> None:
        if max_len < 5:
            raise ConfigError(f"max_len={max_len}; expected >= 5 to fit [CLS] A [SEP] B [SEP]")
        self.split, self.max_len, self.cls_id, self.sep_id = split, max_len, cls_id, sep_id
        self.nsp, self.seed = nsp, seed
        self.budget = max_len - (3 if nsp else 2)  # tokens left for A (+ B) after the specials
        self.chunks = sentence_chunks(split, self.budget, min_sentences=2 if nsp else 1)
        if len(self.chunks) == 0:
            raise DataError(f"split {split.split} has no document with enough sentences for sentence pairs")
        if nsp and split.n_documents < 2:
            raise DataError(f"split {split.split} has {split.n_documents} document; NSP needs at least 2")

    def __len__(self) -> int:
        return len(self.chunks)

    def _tokens(self, first: int, end: int) -> np.ndarray:
        """The tokens of sentences [first, end), read from the files (not through their memory maps)."""
        begin, stop = self.split.sentence_offsets_at(first, end + 1)[[0, -1]]
        return self.split.read(int(begin), int(stop)).astype(np.int64)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor | int]:
        return self.item(index, 0)

    def item(self, index: int, draw: int) -> dict[str, torch.Tensor | int]:
        first, end = (int(v) for v in self.chunks[index])
        doc = int(np.searchsorted(self.split.document_offsets, first, side="right")) - 1
        if not self.nsp:
            a = self._tokens(first, end)[: self.budget]
            return self._item([self.cls_id, *a, self.sep_id], len(a) + 2, -1, index)
        rng = np.random.default_rng([self.seed, draw, index])
        a_end = int(rng.integers(first + 1, end))  # A = first..a_end-1, at least one sentence each side
        is_next = bool(rng.random() < 0.5)
        a = self._tokens(first, a_end)
        b = self._tokens(a_end, end) if is_next else self._random_segment(rng, doc, self.budget - len(a))
        a, b = self._truncate(a, b)
        ids = [self.cls_id, *a, self.sep_id, *b, self.sep_id]
        return self._item(ids, len(a) + 2, int(is_next), index)

    def _random_segment(self, rng: np.random.Generator, doc: int, target: int) -> np.ndarray:
        """Consecutive sentences from a random other document, about `target` tokens long."""
        other = int(rng.integers(self.split.n_documents - 1))
        other += other >= doc  # uniform over documents != doc
        sents = self.split.sentence_range(other)
        start = int(rng.integers(sents.start, sents.stop)) if len(sents) else sents.start
        end = start
        offsets = self.split.sentence_offsets_at(sents.start, sents.stop + 1)  # of that document
        while end < sents.stop and (
            end == start or offsets[end - sents.start] - offsets[start - sents.start] < target
        ):
            end += 1
        return self._tokens(start, end)

    def _truncate(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Trim the longer segment until both fit: A from its front, B from its back.

        Trimming away from the A|B boundary keeps a real continuation contiguous in the text.
        """
        n_a, n_b, budget = len(a), len(b), self.budget
        if n_a + n_b > budget:
            half_a, half_b = (budget + 1) // 2, budget // 2  # both long: split the budget evenly
            if n_a <= half_a:
                n_b = budget - n_a
            elif n_b <= half_b:
                n_a = budget - n_b
            else:
                n_a, n_b = half_a, half_b
        return a[len(a) - n_a :], b[:n_b]

    def _item(self, ids: list[int], n_first: int, label: int, index: int) -> dict[str, torch.Tensor | int]:
        input_ids = torch.tensor(ids, dtype=torch.long)
        token_type_ids = torch.zeros_like(input_ids)
        token_type_ids[n_first:] = 1
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "nsp_label": label, "index": index}


class Draws(Dataset):
    """The training view of a dataset: visits `(epoch, k)` -> (example, draw) for the corruption.

    Static corruption (BERT's `create_pretraining_data`): the data holds `copies` instances of every
    example, copy c drawn once with `draw = c` (its NSP pair and its mask), the same in every epoch.
    Dynamic corruption (RoBERTa): one instance per example, drawn afresh each epoch (`draw = epoch`).
    A plain int key is the visit of epoch 0. Items get `index` (the example) and `draw`.
    """

    def __init__(self, base: Dataset, copies: int = 1, dynamic: bool = True) -> None:
        if copies < 1 or (dynamic and copies != 1):
            raise ConfigError(f"copies={copies}: expected 1 with dynamic corruption, >= 1 with static")
        self.base, self.copies, self.dynamic = base, copies, dynamic
        self.n = len(base)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self.n * self.copies

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, torch.Tensor | int]:
        epoch, k = key if isinstance(key, tuple) else (0, key)
        index, copy = k % self.n, k // self.n
        draw = epoch if self.dynamic else copy
        item = dict(self.base.item(index, draw) if hasattr(self.base, "item") else self.base[index])
        item.update(index=index, draw=draw)
        return item
