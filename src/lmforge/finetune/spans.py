"""Between words, sub-word tokens and characters: label alignment for tagging, answer spans for QA.

- Tagging (BERT's recipe, Devlin et al. 2018, 5.3): a word's label goes on its first sub-word; the
  other sub-words and the special tokens get IGNORE_INDEX, so loss and token accuracy count words.
- Extractive QA (SQuAD): the answer's character span becomes the first and last token of the context
  whose character offsets cover it; at prediction time the best (start, end) pair with
  start <= end < start + max_answer_tokens inside the context is mapped back to characters, so the
  answer is a verbatim slice of the context.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lmforge.objectives.masking import IGNORE_INDEX


def align_word_labels(word_ids: Sequence[int | None], labels: Sequence[int]) -> list[int]:
    """Per-token labels from per-word labels: first sub-word of each word labelled, the rest ignored."""
    out, previous = [], None
    for word in word_ids:
        out.append(IGNORE_INDEX if word is None or word == previous else labels[word])
        previous = word
    return out


def answer_token_span(
    offsets: Sequence[tuple[int, int]],
    in_context: Sequence[bool],
    start_char: int,
    end_char: int,
) -> tuple[int, int] | None:
    """(first, last) context token covering characters [start_char, end_char), or None when the
    answer lies (partly) outside the tokens kept, e.g. after truncation."""
    tokens = [i for i, inside in enumerate(in_context) if inside and offsets[i][1] > offsets[i][0]]
    first = next((i for i in tokens if offsets[i][0] <= start_char < offsets[i][1]), None)
    last = next((i for i in reversed(tokens) if offsets[i][0] < end_char <= offsets[i][1]), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def best_spans(
    start_logits: torch.Tensor,  # (B, T)
    end_logits: torch.Tensor,  # (B, T)
    allowed: torch.Tensor,  # (B, T) bool: context tokens
    max_answer_tokens: int,
) -> list[tuple[int, int]]:
    """Per example the (start, end) maximising start + end logits over allowed, ordered, short spans."""
    T = start_logits.shape[1]
    scores = start_logits[:, :, None] + end_logits[:, None, :]  # (B, T, T): [b, s, e]
    s, e = torch.arange(T)[:, None], torch.arange(T)[None, :]
    valid = (e >= s) & (e < s + max_answer_tokens)  # (T, T)
    valid = valid[None] & allowed[:, :, None] & allowed[:, None, :]
    flat = scores.masked_fill(~valid, float("-inf")).flatten(1).argmax(-1)  # (B,)
    return [(int(i) // T, int(i) % T) for i in flat]


def span_text(context: str, offsets: Sequence[tuple[int, int]], start: int, end: int) -> str:
    """The characters of `context` that tokens start..end cover."""
    return context[offsets[start][0] : offsets[end][1]]
