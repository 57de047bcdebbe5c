"""T5 span corruption: drop random spans, mark each with a sentinel, and predict the dropped spans.

Raffel et al. 2020, section 3.1.4 and 3.3.4 (noise density 0.15, mean span length 3). The noise mask
follows `random_spans_noise_mask` of the T5 code base exactly:

    num_noise = round(L * density), clipped to [1, L - 1]
    num_spans = max(round(num_noise / mean_span_length), 1)
    noise tokens are cut into num_spans non-empty spans, non-noise tokens likewise, uniformly at random;
    the sequence alternates  keep_0 noise_0 keep_1 noise_1 ... keep_{n-1} noise_{n-1}

Inputs keep the non-noise tokens and replace each noise span by one sentinel, in order; targets list
each sentinel followed by the span it replaced. Both end in EOS:

    tokens   a b c d e f g h         (noise: c d, g)
    inputs   a b <X0> e f <X1> h </s>
    targets  <X0> c d <X1> g </s>

`restore_spans` inverts this, which the round-trip test relies on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from lmforge.errors import ConfigError, DataError


def noise_span_counts(length: int, noise_density: float, mean_span_length: float) -> tuple[int, int]:
    """`(num_noise_tokens, num_noise_spans)` for a sequence of `length` tokens, as T5 computes them."""
    # Python round() rounds half to even, exactly as the T5 code (which calls the same round()).
    length = max(length, 2)  # T5 computes the mask for at least 2 tokens and truncates afterwards
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_spans = max(round(num_noise / mean_span_length), 1)
    return num_noise, num_spans


def _random_segmentation(num_items: int, num_segments: int, generator: torch.Generator) -> Tensor:
    """Lengths `(num_segments,)` of a uniformly random split of `num_items` into non-empty segments."""
    # Segment starts: 0 plus num_segments - 1 distinct positions among 1 .. num_items - 1.
    starts = torch.randperm(num_items - 1, generator=generator)[: num_segments - 1] + 1
    is_start = torch.zeros(num_items, dtype=torch.long)
    is_start[starts] = 1
    segment_id = torch.cumsum(is_start, 0)  # (num_items,) in 0 .. num_segments - 1
    return torch.bincount(segment_id, minlength=num_segments)


def random_spans_noise_mask(
    length: int, noise_density: float, mean_span_length: float, generator: torch.Generator
) -> Tensor:
    """Bool `(length,)`: True on the tokens to drop; always starts with kept tokens, ends with noise."""
    if not 0.0 < noise_density < 1.0:
        raise ConfigError(f"noise_density={noise_density}: expected a fraction in (0, 1)")
    if mean_span_length < 1.0:
        raise ConfigError(f"mean_span_length={mean_span_length}: expected a mean span length >= 1")
    padded_length = max(length, 2)
    num_noise, num_spans = noise_span_counts(length, noise_density, mean_span_length)
    num_keep = padded_length - num_noise
    if num_keep < num_spans:
        raise ConfigError(
            f"length={length}: too short for {num_spans} noise spans at density {noise_density}; "
            "expected longer sequences or a larger mean_span_length"
        )
    noise_lengths = _random_segmentation(num_noise, num_spans, generator)  # (n,)
    keep_lengths = _random_segmentation(num_keep, num_spans, generator)  # (n,)
    interleaved = torch.stack([keep_lengths, noise_lengths], dim=1).reshape(-1)  # (2n,) keep, noise, ...
    span_starts = torch.cumsum(interleaved, 0)[:-1]  # (2n - 1,)
    is_span_start = torch.zeros(padded_length, dtype=torch.long)
    is_span_start[span_starts] = 1
    span_number = torch.cumsum(is_span_start, 0)  # (L,) 0 for keep_0, 1 for noise_0, ...
    return (span_number % 2 == 1)[:length]


def corrupt_spans(
    tokens: Tensor, noise_mask: Tensor, sentinel_ids: Tensor, eos_id: int
) -> tuple[Tensor, Tensor]:
    """`(inputs, targets)` from tokens `(L,)` and noise mask `(L,)`; sentinel k marks the k-th span."""
    previous_noise = torch.cat([noise_mask.new_zeros(1), noise_mask[:-1]])
    span_start = noise_mask & ~previous_noise  # (L,) first token of each noise span
    num_spans = int(span_start.sum())
    if num_spans > len(sentinel_ids):
        raise ConfigError(
            f"{num_spans} noise spans: expected at most {len(sentinel_ids)} (one sentinel per span)"
        )
    span_index = (torch.cumsum(span_start.long(), 0) - 1).clamp(min=0)  # (L,)
    sentinels = sentinel_ids.to(tokens.dtype)[span_index]  # (L,) sentinel of the span a position is in
    # Two slots per position, read row-major: [sentinel if a span starts here, the token itself].
    slots = torch.stack([sentinels, tokens], dim=1)  # (L, 2)
    eos = tokens.new_tensor([eos_id])
    inputs = torch.cat([slots[torch.stack([span_start, ~noise_mask], dim=1)], eos])
    targets = torch.cat([slots[torch.stack([span_start, noise_mask], dim=1)], eos])
    return inputs, targets


def restore_spans(
    inputs: Tensor, targets: Tensor, sentinel_ids: Sequence[int] | Tensor, eos_id: int
) -> Tensor:
    """Rebuild the original tokens from `corrupt_spans` output (assumes tokens contain no sentinel ids)."""
    if len(inputs) == 0 or int(inputs[-1]) != eos_id or len(targets) == 0 or int(targets[-1]) != eos_id:
        raise DataError(f"inputs/targets: expected both to end with eos_id={eos_id}")
    inputs, targets = inputs[:-1], targets[:-1]
    sentinel_ids = torch.as_tensor(sentinel_ids, dtype=inputs.dtype)
    span_of: dict[int, Tensor] = {}
    target_starts = torch.nonzero(torch.isin(targets, sentinel_ids)).squeeze(1).tolist()
    for start, end in zip(target_starts, target_starts[1:] + [len(targets)]):
        span_of[int(targets[start])] = targets[start + 1 : end]
    pieces = []
    for token in inputs:
        token_id = int(token)
        if token_id in span_of:
            pieces.append(span_of[token_id])
        else:
            pieces.append(token.reshape(1))
    return torch.cat(pieces) if pieces else inputs


class SpanCorruptor:
    """Span corruption with its settings bound once; picklable. Call it on one example `(L,)`."""

    def __init__(
        self,
        sentinel_ids: Sequence[int],
        eos_id: int,
        noise_density: float = 0.15,
        mean_span_length: float = 3.0,
    ) -> None:
        if len(sentinel_ids) == 0:
            raise ConfigError("sentinel_ids=[]: expected the tokenizer's sentinel ids (<extra_id_0>, ...)")
        self.sentinel_ids = torch.tensor(list(sentinel_ids), dtype=torch.long)  # (S,)
        self.eos_id = int(eos_id)
        self.noise_density = float(noise_density)
        self.mean_span_length = float(mean_span_length)

    def __call__(self, tokens: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        noise_mask = random_spans_noise_mask(
            len(tokens), self.noise_density, self.mean_span_length, generator
        )
        return corrupt_spans(tokens, noise_mask, self.sentinel_ids, self.eos_id)
