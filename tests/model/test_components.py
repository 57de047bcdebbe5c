"""Each component against a tiny reference computation: attention, positions, norms."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers import tiny
from lmforge.model import build_model
from lmforge.model.components.attention import Attention, apply_rope
from lmforge.model.components.mlp import MLP
from lmforge.model.components.norms import RMSNorm
from lmforge.model.components.positions import (
    RelativePositionBias,
    Rotary,
    alibi_slopes,
    sinusoidal_table,
)


def _textbook(x, attn, mask=None, scale=None):
    """softmax(QK^T * scale + mask) V, scale 1/sqrt(d) by default, with per-head projections by hand."""
    B, T, _ = x.shape
    H, D = attn.n_heads, attn.head_dim
    q = (x @ attn.q_proj.weight.T + attn.q_proj.bias).view(B, T, H, D).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T + attn.k_proj.bias).view(B, T, H, D).transpose(1, 2)
    v = (x @ attn.v_proj.weight.T + attn.v_proj.bias).view(B, T, H, D).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) * (scale or 1 / math.sqrt(D))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, -1) @ v
    return out.transpose(1, 2).reshape(B, T, H * D) @ attn.out_proj.weight.T + attn.out_proj.bias


def test_attention_equals_textbook_softmax():
    torch.manual_seed(0)
    attn = Attention(tiny())
    x = torch.randn(2, 7, 32)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    for mask, is_causal in [(None, False), (None, True), (causal, False)]:
        expected = _textbook(x, attn, causal if is_causal else mask)
        for need_weights in (False, True):
            out, weights = attn(x, mask, is_causal=is_causal, need_weights=need_weights)
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 7))


def test_attention_scale_replaces_one_over_sqrt_d():
    torch.manual_seed(0)
    attn = Attention(tiny(attention_scale=1.0))  # T5: no 1/sqrt(d) in the scores
    x = torch.randn(2, 7, 32)
    expected = _textbook(x, attn, torch.ones(7, 7, dtype=torch.bool).tril(), scale=1.0)
    for need_weights in (False, True):
        out, _ = attn(x, is_causal=True, need_weights=need_weights)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_gelu_tanh_and_gated_mlps_equal_their_formulas():
    torch.manual_seed(0)
    x = torch.randn(3, 32)

    def gelu_tanh(z):  # GPT-2's gelu_new: 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))
        return 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))

    mlp = MLP(tiny(activation="gelu_tanh"))
    torch.testing.assert_close(mlp(x), mlp.fc_out(gelu_tanh(mlp.fc_in(x))), atol=1e-6, rtol=1e-5)
    assert not torch.allclose(mlp(x), mlp.fc_out(F.gelu(mlp.fc_in(x))), atol=1e-6)  # not the exact GELU
    mlp = MLP(tiny(activation="geglu"))  # T5 v1.1: gelu_tanh on the gate branch times the linear branch
    expected = mlp.fc_out(gelu_tanh(mlp.fc_gate(x)) * mlp.fc_in(x))
    torch.testing.assert_close(mlp(x), expected, atol=1e-6, rtol=1e-5)


def test_scale_output_multiplies_the_hidden_state_before_the_tied_projection():
    torch.manual_seed(0)
    model = build_model(tiny(scale_output=True))
    ids = torch.randint(0, 61, (2, 5))
    out = model(ids)
    expected = out.last_hidden_state * 32**-0.5 @ model.embeddings.tok.weight.T
    torch.testing.assert_close(out.logits, expected, atol=1e-5, rtol=1e-5)


def test_gqa_with_as_many_kv_heads_as_heads_is_mha():
    torch.manual_seed(0)
    mha = Attention(tiny())
    gqa = Attention(tiny(n_kv_heads=4))
    gqa.load_state_dict(mha.state_dict())
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(gqa(x, is_causal=True)[0], mha(x, is_causal=True)[0])


def test_gqa_and_mqa_equal_mha_with_repeated_kv_weights():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 32)
    for n_kv in (2, 1):  # GQA, MQA
        grouped = Attention(tiny(n_kv_heads=n_kv))
        mha = Attention(tiny())
        state = grouped.state_dict()
        group = 4 // n_kv
        for name in ("k_proj", "v_proj"):  # repeat each K/V head for the query heads of its group
            w = state[f"{name}.weight"].view(n_kv, 8, 32).repeat_interleave(group, 0).reshape(32, 32)
            b = state[f"{name}.bias"].view(n_kv, 8).repeat_interleave(group, 0).reshape(32)
            state[f"{name}.weight"], state[f"{name}.bias"] = w, b
        mha.load_state_dict(state)
        assert grouped.k_proj.weight.shape == (n_kv * 8, 32)
        for need_weights in (False, True):
            torch.testing.assert_close(
                grouped(x, is_causal=True, need_weights=need_weights)[0],
                mha(x, is_causal=True)[0],
                atol=1e-5,
                rtol=1e-5,
            )


def test_sinusoidal_table_matches_formula():
    table = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-5)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-5)


def test_rmsnorm_is_x_over_rms_times_gain():
    torch.manual_seed(0)
    norm = RMSNorm(8, eps=1e-6)
    norm.weight.data = torch.randn(8)
    x = torch.randn(3, 8)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), expected)


def test_alibi_slopes_are_the_papers_geometric_sequence():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0 ** -(2 * (i + 1)) for i in range(4)]))
    # 12 heads: the 8-head sequence, then every other slope of the 16-head sequence.
    expected = [2.0 ** -(i + 1) for i in range(8)] + [2.0 ** -(0.5 * (2 * i + 1)) for i in range(4)]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected))


def test_rope_score_depends_only_on_relative_position():
    torch.manual_seed(0)
    rotary = Rotary(head_dim=16, max_positions=64)
    q, k = torch.randn(16), torch.randn(16)

    def score(m: int, n: int) -> float:
        cos, sin = rotary(torch.tensor([[m, n]]))
        x = torch.stack([q, k])[None, None]  # (1, 1, 2, D)
        rq, rk = apply_rope(x, cos, sin)[0, 0]
        return (rq @ rk).item()

    for offset in (0, 3, 17):
        assert math.isclose(score(5, 2), score(5 + offset, 2 + offset), rel_tol=1e-4, abs_tol=1e-5)
    assert not math.isclose(score(5, 2), score(5, 4), rel_tol=1e-3)
    cos, sin = rotary(torch.tensor([[0]]))
    torch.testing.assert_close(apply_rope(q.view(1, 1, 1, 16), cos, sin).flatten(), q)  # position 0: identity


def test_t5_relative_buckets():
    bidirectional = RelativePositionBias(n_heads=2, n_buckets=32, max_distance=128, bidirectional=True)
    relative = torch.tensor([-200, -128, -9, -8, -1, 0, 1, 7, 8, 127, 500])
    # Exact buckets for |d| < 8, log buckets up to 128, then the last bucket; keys after the query +16.
    assert bidirectional.bucket(relative).tolist() == [15, 15, 8, 8, 1, 0, 17, 23, 24, 31, 31]
    causal = RelativePositionBias(n_heads=2, n_buckets=32, max_distance=128, bidirectional=False)
    assert causal.bucket(torch.tensor([-1, 0, 5, -15, -16, -1000])).tolist() == [1, 0, 0, 15, 16, 31]
    bias = causal(torch.arange(4)[None], torch.arange(4)[None])
    assert bias.shape == (1, 2, 4, 4)


def test_sdpa_gqa_path_matches_explicit_with_additive_mask():
    torch.manual_seed(0)
    attn = Attention(tiny(n_kv_heads=2))
    x = torch.randn(2, 6, 32)
    bias = torch.randn(2, 4, 6, 6)
    fast, _ = attn(x, bias)
    slow, weights = attn(x, bias, need_weights=True)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, F.softmax(weights.log(), -1))


def test_an_attention_only_layer_is_its_attention_sublayer_alone():
    """`mlp: false` (Elhage et al. 2021): x + attn(norm(x)), no MLP and no second norm."""
    torch.manual_seed(0)
    model = build_model(tiny(mlp=False, n_layers=1)).eval()
    block = model.stack.layers[0]
    assert block.mlp is None and block.mlp_norm is None
    x = torch.randn(2, 5, 32)
    attended, _ = block.attn(block.attn_norm(x), None, is_causal=True)
    out, _ = block(x, None, is_causal=True)
    torch.testing.assert_close(out, x + attended)
