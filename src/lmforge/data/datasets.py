"""Torch datasets over an `EncodedSplit`.

`PackedDataset`: contiguous fixed-length blocks for causal LM (GPT-2, Radford et al., 2019), RoBERTa
"full-sentences" MLM (Liu et al., 2019) and T5 span corruption (Raffel et al., 2020):

    stream = [bos] doc_0 [eos] [bos] doc_1 [eos] ...        (bos / eos only when given)
    block  = [cls] stream[k*n : (k+1)*n] [sep]               n = block_size - (#cls + #sep)

`Draws`: which random draw (static copy or epoch) an example's corruption uses on each visit.

`SentencePairDataset`: BERT next-sentence-prediction pairs from real text (Devlin et al., 2019):

    [CLS] A [SEP] B [SEP]     type ids 0 ... 0 1 ... 1
    A = one or more consecutive sentences of a document; B = the sentences that really follow A
    (nsp_label 1) or sentences from another document (nsp_label 0), each with probability 1/2.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from lmforge.data.encoded import EncodedSplit
from lmforge.errors import ConfigError, DataError


def pack_stream(split: EncodedSplit, eos_id: int | None = None, bos_id: int | None = None) -> np.ndarray:
    """All documents concatenated as int64, each preceded by `bos_id` / followed by `eos_id` if given."""
    doc_offsets = split.document_token_offsets()
    doc_lengths = np.diff(doc_offsets)
    n_docs = len(doc_lengths)
    lead, extra = int(bos_id is not None), int(bos_id is not None) + int(eos_id is not None)
    stream = np.empty(split.n_tokens + extra * n_docs, dtype=np.int64)
    doc_of_token = np.repeat(np.arange(n_docs), doc_lengths)
    stream[np.arange(split.n_tokens) + extra * doc_of_token + lead] = split.tokens
    starts = doc_offsets[:-1] + extra * np.arange(n_docs)  # where each document's bos would go
    if bos_id is not None:
        stream[starts] = bos_id
    if eos_id is not None:
        stream[starts + lead + doc_lengths] = eos_id
    return stream


class PackedDataset(Dataset):
    """Fixed-length blocks cut from the packed token stream; the last partial block is dropped.

    Item: {"input_ids": LongTensor(block_size), "index": int}.
    """

    def __init__(
        self,
        split: EncodedSplit,
        block_size: int,
        eos_id: int | None = None,
        bos_id: int | None = None,
        cls_id: int | None = None,
        sep_id: int | None = None,
    ) -> None:
        self.head = torch.tensor([] if cls_id is None else [cls_id], dtype=torch.long)
        self.tail = torch.tensor([] if sep_id is None else [sep_id], dtype=torch.long)
        self.content = block_size - len(self.head) - len(self.tail)  # stream tokens per block
        if self.content < 1:
            raise ConfigError(
                f"block_size={block_size} leaves no room for tokens besides [CLS]/[SEP]; expected more"
            )
        self.block_size = block_size
        self.stream = torch.from_numpy(pack_stream(split, eos_id=eos_id, bos_id=bos_id))
        self.n_blocks = len(self.stream) // self.content
        if self.n_blocks == 0:
            raise DataError(
                f"split {split.split} packs to {len(self.stream)} tokens, fewer than one block of "
                f"{self.content}; expected a smaller block_size or more data"
            )

    def __len__(self) -> int:
        return self.n_blocks

    def __getitem__(self, index: int) -> dict[str, torch.Tensor | int]:
        if not 0 <= index < self.n_blocks:
            raise IndexError(f"block {index} out of range for {self.n_blocks} blocks")
        body = self.stream[index * self.content : (index + 1) * self.content]
        return {"input_ids": torch.cat([self.head, body, self.tail]), "index": index}


def sentence_chunks(split: EncodedSplit, target: int, min_sentences: int) -> list[tuple[int, int, int]]:
    """(document, first sentence, end sentence) chunks of consecutive sentences.

    A chunk closes once it holds at least `min_sentences` sentences and `target` tokens; a short
    remainder at the end of a document joins the previous chunk. Documents with fewer than
    `min_sentences` sentences yield no chunk.
    """
    lengths = np.diff(split.sentence_offsets)
    chunks: list[tuple[int, int, int]] = []
    for doc in range(split.n_documents):
        sents = split.sentence_range(doc)
        if len(sents) < min_sentences:
            continue
        start, tokens, first_of_doc = sents.start, 0, len(chunks)
        for i in sents:
            tokens += int(lengths[i])
            if i + 1 - start >= min_sentences and tokens >= target:
                chunks.append((doc, start, i + 1))
                start, tokens = i + 1, 0
        if start == sents.stop:
            continue
        if sents.stop - start < min_sentences and len(chunks) > first_of_doc:
            chunks[-1] = (doc, chunks[-1][1], sents.stop)  # too few sentences left: extend the last chunk
        else:
            chunks.append((doc, start, sents.stop))
    return chunks


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
        if not self.chunks:
            raise DataError(f"split {split.split} has no document with enough sentences for sentence pairs")
        if nsp and split.n_documents < 2:
            raise DataError(f"split {split.split} has {split.n_documents} document; NSP needs at least 2")

    def __len__(self) -> int:
        return len(self.chunks)

    def _tokens(self, first: int, end: int) -> np.ndarray:
        offsets = self.split.sentence_offsets
        return np.asarray(self.split.tokens[offsets[first] : offsets[end]], dtype=np.int64)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor | int]:
        return self.item(index, 0)

    def item(self, index: int, draw: int) -> dict[str, torch.Tensor | int]:
        doc, first, end = self.chunks[index]
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
        offsets = self.split.sentence_offsets
        while end < sents.stop and (end == start or offsets[end] - offsets[start] < target):
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
