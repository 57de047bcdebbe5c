"""FLOPs from shapes: a hand count for one small model, and 6ND in the large-model limit."""

from __future__ import annotations

import pytest

from lmforge.model import build_model
from lmforge.model.config import ModelConfig
from lmforge.model.flops import forward_flops, training_flops
from lmforge.model.params import count_parameters


def test_a_tiny_decoder_matches_a_hand_count():
    c = ModelConfig(vocab_size=10, d_model=4, n_layers=1, n_heads=2, d_ff=8, max_seq_len=8)
    # batch 1, 3 tokens; one multiply-add = 2 FLOPs
    q_k_v_out = 2 * 3 * 4 * 4 * 4  # four 4x4 projections of 3 tokens
    scores_and_mix = 2 * 2 * 2 * 3 * 3 * 2  # QK^T and AV: 2 products x 2 heads x 3 x 3 x head_dim 2
    mlp = 2 * 3 * (4 * 8 + 8 * 4)
    head = 2 * 3 * 4 * 10
    assert forward_flops(c, 1, 3) == q_k_v_out + scores_and_mix + mlp + head == 1152
    assert training_flops(c, 1, 3) == 3 * 1152
    assert forward_flops(c, 1, 3, projected=1) == 1152 - 2 * 2 * 4 * 10  # sparse head: 1 of 3 positions


def test_gqa_gated_mlp_cross_attention_and_mlm_transform_are_counted():
    gqa = ModelConfig(
        vocab_size=10, d_model=8, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=8, activation="swiglu"
    )
    mha = ModelConfig(vocab_size=10, d_model=8, n_layers=1, n_heads=4, d_ff=8, activation="swiglu")
    assert forward_flops(mha, 1, 1) - forward_flops(gqa, 1, 1) == 2 * 2 * 8 * 4  # k, v: 8 -> 4 outputs
    t5 = ModelConfig(family="encoder_decoder", vocab_size=10, d_model=8, n_layers=1, n_heads=2, d_ff=8)
    with pytest.raises(ValueError, match="decoder_len"):
        forward_flops(t5, 1, 5)
    # decoder self-attention (2 tokens) + cross-attention (2 queries over 5 keys) + encoder (5 tokens)
    enc = 2 * 5 * 8 * 8 * 4 + 4 * 2 * 5 * 5 * 4 + 2 * 5 * 8 * 8 * 2
    self_attn = 2 * 2 * 8 * 8 * 4 + 4 * 2 * 2 * 2 * 4
    cross = 2 * (2 * 8 * 8 * 2 + 5 * 8 * 8 * 2) + 4 * 2 * 2 * 5 * 4
    dec = self_attn + cross + 2 * 2 * 8 * 8 * 2 + 2 * 2 * 8 * 10
    assert forward_flops(t5, 1, 5, decoder_len=2) == enc + dec
    bert = ModelConfig(
        family="encoder", vocab_size=10, d_model=8, n_layers=1, n_heads=2, d_ff=8, head_transform=True
    )
    plain = ModelConfig(family="encoder", vocab_size=10, d_model=8, n_layers=1, n_heads=2, d_ff=8)
    assert forward_flops(bert, 1, 3) - forward_flops(plain, 1, 3) == 2 * 3 * 8 * 8


def test_training_flops_approach_6nd_for_a_large_model():
    # Kaplan et al. 2020: C ~ 6 N D with N the non-embedding parameters plus the unembedding matmul's
    # d_model x vocab (counted once here: the tied table is a lookup at the input).
    c = ModelConfig(
        vocab_size=32000, d_model=2048, n_layers=8, n_heads=16, d_ff=8192, max_seq_len=128, bias=False
    )
    params = count_parameters(build_model(c))
    matmul_params = params["non_embedding"] + c.d_model * c.vocab_size
    tokens = 4 * 64
    ratio = training_flops(c, 4, 64) / (6 * matmul_params * tokens)
    assert ratio == pytest.approx(1.0, abs=0.02)  # attention's T^2 term: T / (6 d_model) of the total


def test_an_attention_only_model_has_no_mlp_parameters_or_flops():
    values = dict(vocab_size=10, d_model=4, n_layers=1, n_heads=2, d_ff=8, max_seq_len=8)
    full, attention_only = ModelConfig(**values), ModelConfig(**values, mlp=False)
    mlp = 2 * 3 * (4 * 8 + 8 * 4)  # the hand count's MLP term above
    assert forward_flops(full, 1, 3) - forward_flops(attention_only, 1, 3) == mlp
    params = (
        count_parameters(build_model(full))["total"] - count_parameters(build_model(attention_only))["total"]
    )
    assert params == (4 * 8 + 8) + (8 * 4 + 4) + 2 * 4  # fc_in, fc_out (with biases) and the MLP's norm
