"""Decoding the encoder-decoder: greedy and batched beam search, both with the KV cache.

Beam search (Wu et al. 2016 length penalty, as in Vaswani et al. 2017: beam 4, alpha 0.6):
every source sentence keeps `beam_size` live hypotheses; at each step each extends by every token,
and the 2K best extensions of the sentence are ranked by their summed log-probability. An extension
ending in EOS among the K best is a finished hypothesis, scored by log p / lp(length) with
lp = ((5 + length) / 6)^alpha (length counts the EOS); the K best that do not end in EOS live on, and
the cache rows of their parents are gathered to follow them. A sentence is done once it holds K
finished hypotheses (fairseq's rule); at its length limit, `max_len_a * source length + max_len_b`
tokens (the paper: source length + 50), EOS is the only extension allowed. The best finished
hypothesis by normalised score is returned. With beam_size 1 this is greedy decoding.

The outputs are token ids without the start token and without EOS.
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.errors import ConfigError
from lmforge.model.generation import generate


def length_penalty(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


def length_limits(attention_mask: torch.Tensor, max_len_a: float, max_len_b: int, cap: int) -> list[int]:
    """Most target tokens (EOS included) each source row may get: a * |source| + b, at most `cap`."""
    return [min(int(max_len_a * n) + max_len_b, cap) for n in attention_mask.sum(-1).tolist()]


def _strip(row: list[int], eos: int, limit: int) -> list[int]:
    """Generated ids up to EOS; a row without EOS within its limit ends as beam search would end it,
    with EOS as its `limit`-th token."""
    row = row[:limit]
    return row[: row.index(eos)] if eos in row else row[: limit - 1]


@torch.no_grad()
def greedy(
    model: nn.Module,
    input_ids: torch.Tensor,  # (B, S) source, right-padded
    attention_mask: torch.Tensor,  # (B, S)
    *,
    bos: int,
    eos: int,
    pad: int,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
) -> list[list[int]]:
    """Argmax decoding through `lmforge.model.generation.generate`, cut at each row's length limit."""
    limits = length_limits(attention_mask, max_len_a, max_len_b, model.config.max_seq_len)
    out = generate(
        model,
        input_ids,
        attention_mask=attention_mask,
        max_new_tokens=max(limits),
        temperature=0.0,
        eos_token_id=eos,
        pad_token_id=pad,
        decoder_start_token_id=bos,
    )
    return [_strip(row[1:], eos, limit) for row, limit in zip(out.tolist(), limits)]


@torch.no_grad()
def beam_search(
    model: nn.Module,
    input_ids: torch.Tensor,  # (B, S) source, right-padded
    attention_mask: torch.Tensor,  # (B, S)
    *,
    bos: int,
    eos: int,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
) -> list[list[int]]:
    """The best hypothesis of each source row (see the module docstring)."""
    if beam_size < 1:
        raise ConfigError(f"beam_size: got {beam_size}, expected an integer >= 1")
    if alpha < 0:
        raise ConfigError(f"length_penalty: got {alpha}, expected a number >= 0")
    B, K, device = input_ids.shape[0], beam_size, input_ids.device
    limits = length_limits(attention_mask, max_len_a, max_len_b, model.config.max_seq_len)
    memory = model.encode(input_ids, attention_mask).last_hidden_state.repeat_interleave(K, dim=0)
    memory_mask = attention_mask.repeat_interleave(K, dim=0)
    cache = model.init_cache(B * K, max(limits), memory.shape[1], device=device, dtype=memory.dtype)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live hypothesis (the start token) until the first step fans out
    history = torch.empty((B * K, 0), dtype=torch.long, device=device)
    last = torch.full((B * K, 1), bos, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    done = [False] * B
    offsets = (torch.arange(B, device=device) * K)[:, None]  # row of each sentence's first beam
    for step in range(max(limits)):
        logits = model(None, memory_mask, last, memory=memory, cache=cache).logits[:, -1]
        logp = torch.log_softmax(logits.float(), dim=-1).view(B, K, -1)
        V = logp.shape[-1]
        at_limit = torch.tensor([step + 1 >= n for n in limits], device=device)
        if at_limit.any():  # only EOS may follow: the hypothesis has reached its length limit
            forced = torch.full_like(logp, float("-inf"))
            forced[..., eos] = logp[..., eos]
            logp = torch.where(at_limit[:, None, None], forced, logp)
        candidates = (scores[:, :, None] + logp).view(B, K * V)
        top_scores, top_index = candidates.topk(min(2 * K, K * V), dim=-1)  # (B, 2K), best first
        parent, token = top_index // V, top_index % V
        ends = (token == eos) & torch.isfinite(top_scores)
        for b, rank in ends[:, :K].nonzero().tolist():  # EOS among the K best: a finished hypothesis
            if not done[b]:
                tokens = history[b * K + parent[b, rank]].tolist()
                score = top_scores[b, rank].item() / length_penalty(step + 1, alpha)
                finished[b].append((score, tokens))
        for b in range(B):
            done[b] = done[b] or len(finished[b]) >= K or step + 1 >= limits[b]
        if all(done):
            break
        # The K best extensions that do not end in EOS live on (EOS ranks pushed behind all others).
        rank = torch.arange(top_scores.shape[1], device=device).expand_as(top_scores)
        keep = torch.where(ends | ~torch.isfinite(top_scores), rank + 2 * K, rank).argsort(dim=-1)[:, :K]
        scores = top_scores.gather(1, keep)
        scores = torch.where(torch.gather(ends, 1, keep), float("-inf"), scores)
        rows = (offsets + parent.gather(1, keep)).view(-1)  # (B*K,) the parent row of each new beam
        last = token.gather(1, keep).view(-1, 1)
        history = torch.cat([history[rows], last], dim=1)
        for layer in cache:  # follow the parents; the cross-attention memory is the same for every beam
            layer.self_attn.k = layer.self_attn.k[rows]
            layer.self_attn.v = layer.self_attn.v[rows]
    return [max(hyps, key=lambda h: h[0])[1] if hyps else [] for hyps in finished]


def translate_batch(
    model: nn.Module, input_ids, attention_mask, *, bos, eos, pad, beam_size, alpha, max_len_a, max_len_b
):
    """Greedy for beam_size 1 (the cheaper loop), else beam search."""
    if beam_size == 1:
        return greedy(
            model,
            input_ids,
            attention_mask,
            bos=bos,
            eos=eos,
            pad=pad,
            max_len_a=max_len_a,
            max_len_b=max_len_b,
        )
    return beam_search(
        model,
        input_ids,
        attention_mask,
        bos=bos,
        eos=eos,
        beam_size=beam_size,
        alpha=alpha,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
    )
