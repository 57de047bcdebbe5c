"""Single-stack language models: the encoder (BERT, bidirectional) and the decoder (GPT, causal).

input_ids -> Embeddings -> TransformerStack (causal iff family == decoder) -> LMHead -> logits

With `value_embeddings` the input ids also select rows of the value-embedding tables, which the stack
hands to the self-attention of the layers that read them.
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.model.components.embeddings import Embeddings, LMHead, ValueEmbeddings
from lmforge.model.components.kv_cache import KVCache, LayerCache, cache_length
from lmforge.model.config import Family, ModelConfig
from lmforge.model.init import init_weights
from lmforge.model.output import ModelOutput
from lmforge.model.stack import TransformerStack, positions_for


class TransformerLM(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.family is Family.encoder_decoder:
            raise ValueError("TransformerLM builds encoder or decoder families; use EncoderDecoder")
        self.config = config
        self.embeddings = Embeddings(config)
        self.value_embeddings = ValueEmbeddings(config) if config.value_embeddings else None
        self.stack = TransformerStack(config, config.n_layers, causal=config.family is Family.decoder)
        self.head = LMHead(config, self.embeddings.tok)
        init_weights(self, config)

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T)
        attention_mask: torch.Tensor | None = None,  # (B, past + T), 1 for real tokens
        token_type_ids: torch.Tensor | None = None,  # (B, T) segment ids
        *,
        cache: list[LayerCache] | None = None,
        predict_mask: torch.Tensor | None = None,  # (B, T) bool: logits only here (sparse MLM)
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> ModelOutput:
        if cache is not None and self.config.family is not Family.decoder:
            raise ValueError("a KV cache needs causal attention; this model is an encoder")
        out = self._stack(
            input_ids, attention_mask, token_type_ids, cache, output_hidden_states, output_attentions
        )
        return ModelOutput(
            logits=self.head(out.last_hidden_state, predict_mask),
            last_hidden_state=out.last_hidden_state,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
        )

    def features(
        self,
        input_ids: torch.Tensor,  # (B, T)
        attention_mask: torch.Tensor | None = None,  # (B, T), 1 for real tokens
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Last hidden states (B, T, d_model), without the vocabulary projection: what task heads read."""
        return self._stack(input_ids, attention_mask, token_type_ids, None, False, False).last_hidden_state

    def _stack(self, input_ids, attention_mask, token_type_ids, cache, hidden_states, attentions):
        T = input_ids.shape[1]
        positions = positions_for(attention_mask, cache_length(cache), T, input_ids.device)
        x = self.embeddings(input_ids, positions[:, -T:], token_type_ids)
        return self.stack(
            x,
            positions,
            attention_mask,
            cache=cache,
            output_hidden_states=hidden_states,
            output_attentions=attentions,
            value_embeddings=self.value_embeddings(input_ids) if self.value_embeddings is not None else None,
        )

    def init_cache(self, batch: int, max_len: int, *, device=None, dtype=None) -> list[LayerCache]:
        c = self.config
        size = (batch, c.kv_heads, min(max_len, c.max_seq_len), c.head_size)
        return [LayerCache(KVCache(*size, device=device, dtype=dtype)) for _ in range(c.n_layers)]
