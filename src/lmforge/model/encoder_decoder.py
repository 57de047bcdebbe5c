"""Encoder-decoder Transformer: the 2017 translation model (Vaswani et al.) and T5 (Raffel et al. 2020).

    source -> Embeddings -> encoder stack (bidirectional) ------------------ memory
    target -> Embeddings -> decoder stack (causal self-attn + cross-attn to memory) -> LMHead -> logits

Source and target share one vocabulary and one token-embedding matrix (both papers do); with
`tie_embeddings` the output projection shares it too.
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.model.components.embeddings import Embeddings, LMHead
from lmforge.model.components.kv_cache import KVCache, LayerCache, cache_length
from lmforge.model.config import Family, ModelConfig
from lmforge.model.init import init_weights
from lmforge.model.output import ModelOutput
from lmforge.model.stack import StackOutput, TransformerStack, positions_for


class EncoderDecoder(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.family is not Family.encoder_decoder:
            raise ValueError(f"EncoderDecoder needs family=encoder_decoder, got {config.family.value}")
        self.config = config
        self.encoder_embeddings = Embeddings(config)
        self.decoder_embeddings = Embeddings(config)
        self.decoder_embeddings.tok = self.encoder_embeddings.tok  # one shared vocabulary
        self.encoder = TransformerStack(config, config.encoder_layers, causal=False)
        self.decoder = TransformerStack(config, config.n_layers, causal=True, cross_attention=True)
        self.head = LMHead(config, self.encoder_embeddings.tok)
        init_weights(self, config)

    def encode(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **outputs: bool
    ) -> StackOutput:
        positions = positions_for(attention_mask, 0, input_ids.shape[1], input_ids.device)
        x = self.encoder_embeddings(input_ids, positions)
        return self.encoder(x, positions, attention_mask, **outputs)

    def forward(
        self,
        input_ids: torch.Tensor | None,  # (B, Ts) source; may be None when `memory` is given
        attention_mask: torch.Tensor | None = None,  # (B, Ts)
        decoder_input_ids: torch.Tensor | None = None,  # (B, Tt) target, shifted right
        decoder_attention_mask: torch.Tensor | None = None,  # (B, past + Tt)
        *,
        memory: torch.Tensor | None = None,  # (B, Ts, d_model) a precomputed encoder output
        cache: list[LayerCache] | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> ModelOutput:
        if decoder_input_ids is None:
            raise ValueError("decoder_input_ids is required (the target shifted right)")
        if memory is None:
            memory = self.encode(input_ids, attention_mask).last_hidden_state
        out = self._decode(
            memory,
            attention_mask,
            decoder_input_ids,
            decoder_attention_mask,
            cache=cache,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        return ModelOutput(
            logits=self.head(out.last_hidden_state),
            last_hidden_state=out.last_hidden_state,
            hidden_states=out.hidden_states,
            attentions=out.attentions,
            encoder_last_hidden_state=memory,
        )

    def features(
        self,
        input_ids: torch.Tensor,  # (B, Ts) source
        attention_mask: torch.Tensor | None,  # (B, Ts)
        decoder_input_ids: torch.Tensor,  # (B, Tt) target, shifted right
        decoder_attention_mask: torch.Tensor | None = None,  # (B, Tt)
    ) -> torch.Tensor:
        """The decoder's last hidden states (B, Tt, d_model), without the vocabulary projection."""
        memory = self.encode(input_ids, attention_mask).last_hidden_state
        return self._decode(
            memory, attention_mask, decoder_input_ids, decoder_attention_mask
        ).last_hidden_state

    def _decode(self, memory, memory_valid, decoder_input_ids, decoder_attention_mask, **outputs):
        T = decoder_input_ids.shape[1]
        cache = outputs.get("cache")
        positions = positions_for(decoder_attention_mask, cache_length(cache), T, decoder_input_ids.device)
        x = self.decoder_embeddings(decoder_input_ids, positions[:, -T:])
        return self.decoder(
            x, positions, decoder_attention_mask, memory=memory, memory_valid=memory_valid, **outputs
        )

    def init_cache(
        self, batch: int, max_len: int, memory_len: int, *, device=None, dtype=None
    ) -> list[LayerCache]:
        c = self.config
        self_size = (batch, c.kv_heads, min(max_len, c.max_seq_len), c.head_size)
        cross_size = (batch, c.kv_heads, memory_len, c.head_size)
        return [
            LayerCache(
                KVCache(*self_size, device=device, dtype=dtype),
                KVCache(*cross_size, device=device, dtype=dtype),
            )
            for _ in range(c.n_layers)
        ]
