"""Batched autoregressive generation with a KV cache: greedy, temperature, top-k and top-p sampling.

Decoder prompts of different lengths are left-padded (attention_mask 0 on the left); positions count
real tokens only, so padding changes nothing. A row stops at `eos_token_id`; later tokens are
`pad_token_id`. `temperature=0` is greedy decoding.
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.config import Family
from lmforge.errors import ConfigError


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
        tokens = torch.full((B, 1), decoder_start_token_id, dtype=torch.long, device=device)
        token_mask = None
        cache = (
            model.init_cache(B, 1 + max_new_tokens, memory.shape[1], device=device, dtype=memory.dtype)
            if use_cache
            else None
        )

        def step(new_tokens: torch.Tensor) -> torch.Tensor:
            ids = new_tokens if use_cache else tokens
            return model(None, attention_mask, ids, memory=memory, cache=cache).logits[:, -1]
    else:
        tokens = input_ids
        token_mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        dtype = next(model.parameters()).dtype
        cache = (
            model.init_cache(B, tokens.shape[1] + max_new_tokens, device=device, dtype=dtype)
            if use_cache
            else None
        )

        def step(new_tokens: torch.Tensor) -> torch.Tensor:
            ids = new_tokens if use_cache else tokens
            return model(ids, token_mask, cache=cache).logits[:, -1]

    finished = torch.zeros(B, dtype=torch.bool, device=device)
    new_tokens = tokens
    for _ in range(max_new_tokens):
        next_token = sample_next(step(new_tokens), temperature, top_k, top_p, generator)
        next_token = next_token.masked_fill(finished, pad_token_id)
        if eos_token_id is not None:
            finished |= next_token == eos_token_id
        new_tokens = next_token[:, None]
        tokens = torch.cat([tokens, new_tokens], dim=1)
        if token_mask is not None:
            token_mask = torch.cat([token_mask, torch.ones_like(new_tokens)], dim=1)
        if finished.all():
            break
    return tokens
