"""Batched autoregressive generation with a KV cache: greedy, temperature, top-k and top-p sampling.

Decoder prompts of different lengths are left-padded (attention_mask 0 on the left); positions count
real tokens only, so padding changes nothing. A row stops at `eos_token_id`; later tokens are
`pad_token_id`. `temperature=0` is greedy decoding.
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.errors import ConfigError
from lmforge.model.config import Family


def check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if temperature < 0:
        raise ConfigError(f"temperature: got {temperature}, expected a number >= 0 (0 means greedy)")
    if top_k is not None and top_k < 1:
        raise ConfigError(f"top_k: got {top_k}, expected null or an integer >= 1")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ConfigError(f"top_p: got {top_p}, expected null or a probability in (0, 1]")


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Set to -inf every logit outside the top-k and outside the smallest set with probability >= top_p."""
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        probs = sorted_logits.softmax(-1)
        # Drop a token when the tokens ranked above it already reach top_p (the first always stays).
        drop = (probs.cumsum(-1) - probs) >= top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def sample_next(
    logits: torch.Tensor,  # (B, V) at the last position
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    if temperature == 0:
        return logits.argmax(-1)
    logits = filter_logits(logits.float() / temperature, top_k, top_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(
    model: nn.Module,
    input_ids: torch.Tensor,  # (B, T) prompt (decoder) or source (encoder-decoder)
    *,
    attention_mask: torch.Tensor | None = None,  # (B, T)
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int = 0,
    decoder_start_token_id: int | None = None,  # encoder-decoder: the first target token
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Decoder: returns (B, T + new) prompt and continuation. Encoder-decoder: (B, 1 + new) target."""
    check_sampling(temperature, top_k, top_p)
    config = model.config
    B, device = input_ids.shape[0], input_ids.device
    if config.family is Family.encoder:
        raise ConfigError(
            "generate: got an encoder (bidirectional) model, expected a decoder or encoder_decoder"
        )

    if config.family is Family.encoder_decoder:
        if decoder_start_token_id is None:
            raise ConfigError("generate: decoder_start_token_id is required for an encoder_decoder model")
        memory = model.encode(input_ids, attention_mask).last_hidden_state
        start = torch.full((B, 1), decoder_start_token_id, dtype=torch.long, device=device)
        tokens, token_mask = _buffers(start, None, max_new_tokens, pad_token_id)
        cache = (
            model.init_cache(B, 1 + max_new_tokens, memory.shape[1], device=device, dtype=memory.dtype)
            if use_cache
            else None
        )

        def step(ids: torch.Tensor, _mask: torch.Tensor | None) -> torch.Tensor:
            return model(None, attention_mask, ids, memory=memory, cache=cache).logits[:, -1]
    else:
        tokens, token_mask = _buffers(input_ids, attention_mask, max_new_tokens, pad_token_id)
        dtype = next(model.parameters()).dtype
        cache = (
            model.init_cache(B, input_ids.shape[1] + max_new_tokens, device=device, dtype=dtype)
            if use_cache
            else None
        )

        def step(ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
            return model(ids, mask, cache=cache).logits[:, -1]

    # Tokens and mask live in buffers sized for the longest output: each step writes one column.
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    done, length = 0, tokens.shape[1] - max_new_tokens  # tokens[:, done:length] are not yet in the cache
    for _ in range(max_new_tokens):
        ids = tokens[:, done:length] if use_cache else tokens[:, :length]
        logits = step(ids, None if token_mask is None else token_mask[:, :length])
        next_token = sample_next(logits, temperature, top_k, top_p, generator)
        next_token = next_token.masked_fill(finished, pad_token_id)
        if eos_token_id is not None:
            finished |= next_token == eos_token_id
        tokens[:, length] = next_token
        done, length = length, length + 1
        if eos_token_id is not None and finished.all():
            break
    return tokens[:, :length]


def _buffers(
    prefix: torch.Tensor, prefix_mask: torch.Tensor | None, new: int, pad_token_id: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T + new) token buffer starting with `prefix`, and its attention mask (None without one)."""
    B, T = prefix.shape
    tokens = prefix.new_full((B, T + new), pad_token_id)
    tokens[:, :T] = prefix
    if prefix_mask is None:
        return tokens, None
    mask = prefix_mask.new_ones((B, T + new))
    mask[:, :T] = prefix_mask
    return tokens, mask
