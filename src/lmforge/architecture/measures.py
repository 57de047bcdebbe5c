"""What the architecture experiments measure on a trained decoder.

- `token_losses` (lmforge.interpret.induction) on test windows longer than the training length
  shows whether a position scheme extrapolates (Press et al. 2022).
- `kv_cache_bytes_per_token`: the bytes the model's KV cache allocates per cached token of one
  sequence, read off the cache tensors `init_cache` builds (2 x layers x kv_heads x head_dim x 4 bytes).
- `decode_seconds`: wall time of greedy decoding with or without the KV cache.
- `train_step_seconds`: one forward and backward pass of the causal-LM loss on a batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lmforge.model import generate


def kv_cache_bytes_per_token(model: nn.Module, length: int) -> float:
    """Bytes of keys and values the model caches per token of one sequence, from its allocated cache."""
    cache = model.init_cache(1, length)
    total = sum(layer.self_attn.k.nbytes + layer.self_attn.v.nbytes for layer in cache)
    return total / cache[0].self_attn.max_len


def decode_seconds(model: nn.Module, prompts: torch.Tensor, new_tokens: int, use_cache: bool) -> float:
    """Wall seconds to continue `prompts` (B, T) greedily by `new_tokens` tokens (no early stop)."""
    start = time.perf_counter()
    generate(model, prompts, max_new_tokens=new_tokens, temperature=0.0, use_cache=use_cache)
    return time.perf_counter() - start


def train_step_seconds(model: nn.Module, ids: torch.Tensor) -> float:
    """Wall seconds of one forward and backward pass of the next-token loss on `ids` (B, T)."""
    model.train()
    start = time.perf_counter()
    logits = model(ids).logits[:, :-1]
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).backward()
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    model.eval()
    return seconds


def interleaved_medians(jobs: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Each job's median wall time over `repeats` rounds, the jobs run in turn within a round, so a
    host that drifts slows every job alike."""
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(repeats):
        for name, job in jobs.items():
            times[name].append(job())
    return {name: sorted(values)[len(values) // 2] for name, values in times.items()}
