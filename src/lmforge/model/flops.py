"""FLOPs of a forward pass counted from the shapes of a `ModelConfig` (matrix multiplies only).

One multiply-add is 2 FLOPs. Counted: every projection (q, k, v, output; the MLP's two or three
matrices; cross-attention's q/output on the decoder tokens and k/v on the encoder tokens), the two
attention products QK^T and AV over the full Tq x Tk square (causal masking is not subtracted, the
convention of PaLM's MFU and nanoGPT's `estimate_mfu`), the MLM head's dense transform and the
vocabulary projection for the positions that are projected. Not counted: norms, softmax, activations,
embedding lookups, which are a few percent at these widths. A training step is forward + backward,
3x the forward (the backward computes the gradients of both inputs and weights of each product).
"""

from __future__ import annotations

from lmforge.model.config import Family, ModelConfig


def attention_flops(c: ModelConfig, batch: int, q_len: int, k_len: int) -> int:
    """One attention sublayer: projections, QK^T, AV and the output projection."""
    q_width, kv_width = c.n_heads * c.head_size, c.kv_heads * c.head_size
    projections = 2 * batch * (q_len * c.d_model * q_width * 2 + k_len * c.d_model * kv_width * 2)
    products = 2 * 2 * batch * c.n_heads * q_len * k_len * c.head_size
    return projections + products


def mlp_flops(c: ModelConfig, tokens: int) -> int:
    if not c.mlp:  # attention-only layers
        return 0
    matrices = 3 if c.activation.value in ("swiglu", "geglu") else 2
    return 2 * tokens * c.d_model * c.d_ff * matrices


def head_flops(c: ModelConfig, projected: int) -> int:
    transform = 2 * projected * c.d_model * c.d_model if c.head_transform else 0
    return transform + 2 * projected * c.d_model * c.vocab_size


def forward_flops(
    c: ModelConfig,
    batch: int,
    seq_len: int,
    *,
    decoder_len: int | None = None,  # encoder_decoder: target length (seq_len is the source's)
    projected: int | None = None,  # positions projected onto the vocabulary (sparse MLM); None -> all
) -> int:
    """FLOPs of one forward pass over a (batch, seq_len) input."""
    if c.family is Family.encoder_decoder:
        if decoder_len is None:
            raise ValueError("forward_flops: an encoder_decoder model needs decoder_len")
        n_enc = c.n_encoder_layers or c.n_layers
        enc = n_enc * (attention_flops(c, batch, seq_len, seq_len) + mlp_flops(c, batch * seq_len))
        dec_layer = (
            attention_flops(c, batch, decoder_len, decoder_len)
            + attention_flops(c, batch, decoder_len, seq_len)  # cross-attention
            + mlp_flops(c, batch * decoder_len)
        )
        out_tokens = batch * decoder_len
        return enc + c.n_layers * dec_layer + head_flops(c, out_tokens if projected is None else projected)
    layer = attention_flops(c, batch, seq_len, seq_len) + mlp_flops(c, batch * seq_len)
    return c.n_layers * layer + head_flops(c, batch * seq_len if projected is None else projected)


def training_flops(c: ModelConfig, batch: int, seq_len: int, **kwargs: int | None) -> int:
    """Forward + backward: 3x `forward_flops` (same keyword arguments)."""
    return 3 * forward_flops(c, batch, seq_len, **kwargs)
