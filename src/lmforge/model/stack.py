"""A stack of blocks with its final norm; builds masks and position biases once per forward pass.

Encoders, decoders and the two halves of an encoder-decoder are all this class with different
`causal` / `cross_attention` settings. Positions are per sequence (B, T): with left padding they
count real tokens only, so batched generation places every prompt at the same positions it would
have alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from lmforge.model.components.block import Block
from lmforge.model.components.kv_cache import LayerCache, cache_length
from lmforge.model.components.masks import padding_mask, self_attention_mask, with_bias
from lmforge.model.components.norms import build_norm
from lmforge.model.components.positions import RelativePositionBias, Rotary, alibi_bias, alibi_slopes
from lmforge.model.config import ModelConfig, Position


def positions_for(key_valid: torch.Tensor | None, past: int, length: int, device) -> torch.Tensor:
    """Positions of all keys (B or 1, past + length): 0, 1, ... over real tokens.

    A pad gets the position of the last real token before it (0 for left padding before the first
    one); masks keep pads out of attention, so their positions only need to be valid indices.
    """
    key_valid = _unless_all_valid(key_valid)
    if key_valid is None:
        return torch.arange(past + length, device=device)[None]
    return (key_valid.long().cumsum(-1) - 1).clamp(min=0)


def _unless_all_valid(valid: torch.Tensor | None) -> torch.Tensor | None:
    """None when no position is padding, so no mask is built and SDPA takes its unmasked or causal
    fast path (as HF does for all-ones masks). Kept under `torch.compile`, where the check would
    split the graph."""
    if valid is None or torch.compiler.is_compiling() or not bool(valid.all()):
        return valid
    return None


@dataclass
class StackOutput:
    last_hidden_state: torch.Tensor  # (B, T, d_model), after the final norm
    hidden_states: list[torch.Tensor] | None  # embeddings, then each layer's output (before the final norm)
    attentions: list[torch.Tensor] | None  # each layer's self-attention probabilities (B, H, Tq, Tk)


class TransformerStack(nn.Module):
    def __init__(self, config: ModelConfig, n_layers: int, *, causal: bool, cross_attention: bool = False):
        super().__init__()
        self.config = config
        self.causal = causal
        self.layers = nn.ModuleList(
            Block(config, cross_attention, config.value_table(i) is not None) for i in range(n_layers)
        )
        self.final_norm = build_norm(config) if config.final_norm else None
        self.rotary = (
            Rotary(config.head_size, config.max_seq_len, config.rope_base)
            if config.position is Position.rope
            else None
        )
        self.relative = (
            RelativePositionBias(
                config.n_heads,
                config.relative_buckets,
                config.relative_max_distance,
                bidirectional=not causal,
            )
            if config.position is Position.relative
            else None
        )
        if config.position is Position.alibi:
            self.register_buffer("alibi_slopes", alibi_slopes(config.n_heads), persistent=False)
        else:
            self.alibi_slopes = None

    def forward(
        self,
        x: torch.Tensor,  # (B, T, d_model) embedded inputs
        positions: torch.Tensor,  # (B or 1, past + T) from `positions_for`
        key_valid: torch.Tensor | None = None,  # (B, past + T) False at padding
        *,
        memory: torch.Tensor | None = None,  # (B, Tm, d_model) encoder output, for cross-attention
        memory_valid: torch.Tensor | None = None,  # (B, Tm)
        cache: list[LayerCache] | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        value_embeddings: list[torch.Tensor] | None = None,  # (B, T, kv width) per table, `ValueEmbeddings`
    ) -> StackOutput:
        T = x.shape[1]
        x0 = x if self.config.embedding_skip else None
        past = cache_length(cache)
        key_valid, memory_valid = _unless_all_valid(key_valid), _unless_all_valid(memory_valid)
        if past + T > self.config.max_seq_len:
            raise ValueError(f"sequence of {past + T} tokens exceeds max_seq_len={self.config.max_seq_len}")
        q_pos, k_pos = positions[:, past:], positions
        rope = self.rotary(q_pos) if self.rotary is not None else None
        masks, is_causal = self._masks(q_pos, k_pos, key_valid, past, T)
        memory_mask = padding_mask(memory_valid)

        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for i, layer in enumerate(self.layers):
            table = self.config.value_table(i)
            x, weights = layer(
                x,
                masks[self.config.is_local(i)],
                rope=rope,
                is_causal=is_causal,
                memory=memory,
                memory_mask=memory_mask,
                cache=cache[i] if cache else None,
                need_weights=output_attentions,
                x0=x0,
                value_embedding=value_embeddings[table] if value_embeddings and table is not None else None,
            )
            if hidden_states is not None:
                hidden_states.append(x)
            if attentions is not None:
                attentions.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return StackOutput(x, hidden_states, attentions)

    def _masks(self, q_pos, k_pos, key_valid, past, T) -> tuple[dict[bool, torch.Tensor | None], bool]:
        """Masks for local (sliding-window) and global layers, keyed by `is_local`; plus the causal fast path."""
        bias = None
        if self.alibi_slopes is not None:
            bias = alibi_bias(self.alibi_slopes, q_pos, k_pos)
        elif self.relative is not None:
            bias = self.relative(q_pos, k_pos)
        windowed = self.config.sliding_window is not None
        if bias is None and key_valid is None and not windowed:
            if past == 0:
                return {False: None, True: None}, self.causal  # SDPA builds the causal mask itself
            if T == 1:
                return {False: None, True: None}, False  # one new query after the cache sees every key
        device = k_pos.device
        q_idx = torch.arange(past, past + T, device=device)
        k_idx = torch.arange(past + T, device=device)
        masks = {}
        for local in {self.config.is_local(i) for i in range(len(self.layers))}:
            window = self.config.sliding_window if local else None
            allowed = self_attention_mask(
                q_idx, k_idx, causal=self.causal, window=window, key_valid=key_valid
            )
            masks[local] = with_bias(allowed, bias)
        return masks, False
