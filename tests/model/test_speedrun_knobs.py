"""The speedrun's architecture knobs (issue 54), each against a tiny reference computation: ReLU²,
QK-norm (and KV-cache decoding with it), zero-initialised residual outputs, logit soft-capping (its
gradient through the fused loss is in tests/objectives/test_linear_ce.py), value embeddings and the
skip connections from the embedding; and the Hugging Face export's one-line refusal of the knobs no
exported architecture expresses."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from helpers import tiny
from lmforge.errors import ConfigError, DataError
from lmforge.export.hf import exporter_for
from lmforge.model import build_model, count_parameters
from lmforge.model.components.attention import Attention
from lmforge.model.components.mlp import MLP
from lmforge.training.optim import hidden_matrices


def test_relu2_is_the_square_of_relu():
    torch.manual_seed(0)
    x = torch.randn(3, 32)
    mlp = MLP(tiny(activation="relu2"))
    hidden = mlp.fc_in(x)
    torch.testing.assert_close(mlp(x), mlp.fc_out(torch.where(hidden > 0, hidden * hidden, 0.0)))


def test_qk_norm_normalises_each_heads_queries_and_keys():
    torch.manual_seed(0)
    attn = Attention(tiny(qk_norm=True))
    with torch.no_grad():  # gains other than one, so the test sees where they apply
        attn.q_norm.weight.uniform_(0.5, 1.5)
        attn.k_norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 7, 32)
    B, T, H, D = 2, 7, attn.n_heads, attn.head_dim

    def heads(proj, norm):
        y = (x @ proj.weight.T + proj.bias).view(B, T, H, D).transpose(1, 2)
        return y / torch.sqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight

    q, k = heads(attn.q_proj, attn.q_norm), heads(attn.k_proj, attn.k_norm)
    v = (x @ attn.v_proj.weight.T + attn.v_proj.bias).view(B, T, H, D).transpose(1, 2)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(~causal, float("-inf"))
    expected = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, T, H * D)
    expected = expected @ attn.out_proj.weight.T + attn.out_proj.bias
    for need_weights in (False, True):
        out, _ = attn(x, is_causal=True, need_weights=need_weights)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # the logits no longer grow with the projections' scale
        attn.q_proj.weight.mul_(100.0)
        attn.q_proj.bias.mul_(100.0)
    torch.testing.assert_close(attn(x, is_causal=True)[0], expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", ["decoder", "encoder_decoder"])
def test_cached_decoding_with_qk_norm_equals_the_full_forward(family):
    torch.manual_seed(0)
    model = build_model(tiny(family=family, position="rope", qk_norm=True)).eval()
    tgt = torch.randint(0, 61, (2, 10))
    if family == "decoder":
        full = model(tgt).logits
        cache = model.init_cache(2, 10)
        steps = [model(tgt[:, t : t + 1], cache=cache).logits for t in range(10)]
    else:
        src = torch.randint(0, 61, (2, 9))
        src_mask = torch.ones_like(src)
        full = model(src, src_mask, tgt).logits
        memory = model.encode(src, src_mask).last_hidden_state
        cache = model.init_cache(2, 10, memory_len=9)
        steps = [
            model(None, src_mask, tgt[:, t : t + 1], memory=memory, cache=cache).logits for t in range(10)
        ]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


def test_zero_init_residual_makes_every_layer_start_as_the_identity():
    torch.manual_seed(0)
    config = tiny(family="decoder", position="learned", zero_init_residual=True, dropout=0.0)
    model = build_model(config).eval()
    outputs = [p for n, p in model.named_parameters() if n.endswith(("out_proj.weight", "fc_out.weight"))]
    assert outputs and all(not p.any() for p in outputs)
    ids = torch.randint(0, 61, (2, 8))
    hidden = model(ids).last_hidden_state
    embedded = model.embeddings(ids, torch.arange(8)[None])  # learned positions 0..7
    torch.testing.assert_close(hidden, model.stack.final_norm(embedded))
    torch.manual_seed(0)
    default = build_model(tiny(family="decoder", position="learned"))
    assert all(p.any() for n, p in default.named_parameters() if n.endswith("out_proj.weight"))


@pytest.mark.parametrize(
    ("knob", "named"),
    [
        ({"qk_norm": True}, "model.qk_norm=True"),
        ({"activation": "relu2"}, "model.activation=relu2"),
        ({"value_embeddings": 1}, "model.value_embeddings=1"),
        ({"embedding_skip": True}, "model.embedding_skip=True"),
    ],
)
def test_export_refuses_a_knob_no_architecture_expresses(knob, named):
    with pytest.raises(DataError, match="no Hugging Face architecture expresses") as caught:
        exporter_for(tiny(family="decoder", position="learned", **knob))
    assert named in str(caught.value) and "\n" not in str(caught.value)
    assert exporter_for(tiny(family="decoder", position="learned")).model_type == "gpt2"


def test_soft_capped_logits_are_c_tanh_of_the_projection_and_stay_within_c():
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", logit_softcap=2.0)).eval()
    with torch.no_grad():
        model.head.proj.weight.mul_(50.0)  # raw logits far beyond the cap
    ids = torch.randint(0, 61, (2, 8))
    out = model(ids)
    raw = F.linear(out.last_hidden_state, model.head.proj.weight)
    torch.testing.assert_close(out.logits, 2.0 * torch.tanh(raw / 2.0))
    assert raw.abs().max() > 10 and out.logits.abs().max() <= 2.0  # tanh reaches 1 in float32
    with pytest.raises(ConfigError, match="model.logit_softcap: got 0.0"):
        tiny(logit_softcap=0.0)


def test_value_tables_go_to_the_first_and_the_last_layers():
    assert [tiny(n_layers=12, value_embeddings=3).value_table(i) for i in range(12)] == [0, 1, 2] + [
        None
    ] * 6 + [0, 1, 2]
    assert [tiny(n_layers=2, value_embeddings=1).value_table(i) for i in range(2)] == [0, 0]
    assert [tiny(n_layers=3, value_embeddings=2).value_table(i) for i in range(3)] == [0, 1, 1]
    assert [tiny(n_layers=2).value_table(i) for i in range(4)] == [None] * 4  # off, deeper stacks too
    with pytest.raises(ConfigError, match="model.value_embeddings: got 3, expected 0 to n_layers=2 tables"):
        tiny(value_embeddings=3)
    for knob in ({"value_embeddings": 1}, {"embedding_skip": True}):
        with pytest.raises(ConfigError, match="for family=encoder_decoder"):
            tiny(family="encoder_decoder", **knob)


def test_a_value_embedding_is_mixed_into_the_values():
    torch.manual_seed(0)
    attn = Attention(tiny(n_kv_heads=2), value_embedding=True)
    with torch.no_grad():
        attn.value_mix.copy_(torch.tensor([0.3, 1.7]))
    x, ve = torch.randn(2, 7, 32), torch.randn(2, 7, 16)  # 2 key/value heads of 8
    B, T, H, D = 2, 7, 4, 8

    def heads(y, n):
        return y.view(B, T, n, D).transpose(1, 2)

    q = heads(x @ attn.q_proj.weight.T + attn.q_proj.bias, H)
    k = heads(x @ attn.k_proj.weight.T + attn.k_proj.bias, 2).repeat_interleave(2, dim=1)
    v = 0.3 * (x @ attn.v_proj.weight.T + attn.v_proj.bias) + 1.7 * ve
    v = heads(v, 2).repeat_interleave(2, dim=1)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(~causal, float("-inf"))
    expected = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, T, H * D)
    expected = expected @ attn.out_proj.weight.T + attn.out_proj.bias
    for need_weights in (False, True):
        out, _ = attn(x, is_causal=True, need_weights=need_weights, value_embedding=ve)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="a value embedding goes with a self-attention built for one"):
        attn(x, is_causal=True)


def test_each_layer_reads_its_table_of_the_tokens():
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", n_layers=3, value_embeddings=2)).eval()
    ids = torch.randint(0, 61, (2, 8))
    seen = []
    for layer in model.stack.layers:
        layer.attn.register_forward_hook(
            lambda m, args, kwargs, out: seen.append(kwargs["value_embedding"]), with_kwargs=True
        )
    model(ids)
    tables = model.value_embeddings.tables
    for got, table in zip(seen, [0, 1, 1], strict=True):
        torch.testing.assert_close(got, tables[table](ids))
    counts = count_parameters(model)  # the tables are embeddings, like the token table
    assert counts["embedding"] == 61 * 32 + 2 * 61 * 32
    assert not {id(t.weight) for t in tables} & {id(p) for p in hidden_matrices(model)}  # AdamW's, not Muon's


def test_the_embedding_skip_starts_as_without_it_and_mixes_x0_in():
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", embedding_skip=True)).eval()
    plain_model = build_model(tiny(family="decoder")).eval()
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("skip_mix")}
    plain_model.load_state_dict(state)
    ids = torch.randint(0, 61, (2, 8))
    torch.testing.assert_close(model(ids).logits, plain_model(ids).logits)  # a = 1, b = 0 at the start
    with torch.no_grad():
        model.stack.layers[1].skip_mix.copy_(torch.tensor([0.6, 0.9]))
    out = model(ids, output_hidden_states=True)
    x0, after_first = out.hidden_states[0], out.hidden_states[1]
    rope = model.stack.rotary(torch.arange(8)[None])
    with torch.no_grad():  # the second layer with a = 1, b = 0 on the input 0.6 x + 0.9 x0 by hand
        model.stack.layers[1].skip_mix.copy_(torch.tensor([1.0, 0.0]))
        plain_second, _ = model.stack.layers[1](
            0.6 * after_first + 0.9 * x0, None, rope=rope, is_causal=True, x0=x0
        )
    torch.testing.assert_close(out.hidden_states[2], plain_second)


@pytest.mark.parametrize("knobs", [{"value_embeddings": 1}, {"embedding_skip": True}])
def test_cached_decoding_with_the_speedrun_inputs_equals_the_full_forward(knobs):
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder", position="rope", **knobs)).eval()
    with torch.no_grad():  # mixes away from their starting values
        for name, p in model.named_parameters():
            if name.endswith(("value_mix", "skip_mix")):
                p.copy_(torch.tensor([0.7, 0.4]))
    tgt = torch.randint(0, 61, (2, 10))
    full = model(tgt).logits
    cache = model.init_cache(2, 10)
    steps = [model(tgt[:, t : t + 1], cache=cache).logits for t in range(10)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)
