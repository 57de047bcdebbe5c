"""Structure: pre- vs post-norm placement, tied embeddings, sparse prediction, outputs on request."""

from __future__ import annotations

import torch

from helpers import tiny
from lmforge.model import build_model
from lmforge.model.components.block import Block


def test_post_norm_is_add_and_norm_and_pre_norm_is_residual_around_norm():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 32)
    for placement in ("pre", "post"):
        block = Block(tiny(norm_placement=placement)).eval()
        a = block.attn(block.attn_norm(x) if placement == "pre" else x, is_causal=False)[0]
        if placement == "pre":
            h = x + a
            expected = h + block.mlp(block.mlp_norm(h))
        else:
            h = block.attn_norm(x + a)  # LayerNorm(x + Sublayer(x)), Vaswani et al. 3.1
            expected = block.mlp_norm(h + block.mlp(h))
        torch.testing.assert_close(block(x, None)[0], expected)
    # Post-norm outputs are normalised; pre-norm outputs are not.
    post = Block(tiny(norm_placement="post"))(x, None)[0]
    torch.testing.assert_close(post.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)


def test_tied_embeddings_share_one_tensor():
    for family in ("decoder", "encoder_decoder"):
        model = build_model(tiny(family=family))
        embedding = model.embeddings.tok if family == "decoder" else model.encoder_embeddings.tok
        assert model.head.proj.weight is embedding.weight
        if family == "encoder_decoder":
            assert model.decoder_embeddings.tok.weight is embedding.weight
    untied = build_model(tiny(tie_embeddings=False))
    assert untied.head.proj.weight is not untied.embeddings.tok.weight


def test_sparse_prediction_equals_dense_logits_at_selected_positions():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder", head_transform=True, head_bias=True, n_segments=2)).eval()
    ids = torch.randint(0, 61, (2, 8))
    segments = torch.randint(0, 2, (2, 8))
    selected = torch.rand(2, 8) < 0.3
    dense = model(ids, token_type_ids=segments).logits
    sparse = model(ids, token_type_ids=segments, predict_mask=selected).logits
    torch.testing.assert_close(sparse, dense[selected])


def test_segments_change_the_output():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder", n_segments=2)).eval()
    ids = torch.randint(0, 61, (1, 6))
    a = model(ids, token_type_ids=torch.zeros_like(ids)).logits
    b = model(ids, token_type_ids=torch.ones_like(ids)).logits
    assert not torch.allclose(a, b)


def test_hidden_states_and_attentions_on_request():
    model = build_model(tiny(family="decoder", n_layers=3)).eval()
    out = model(torch.randint(0, 61, (2, 7)), output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 4 and out.hidden_states[0].shape == (2, 7, 32)
    assert len(out.attentions) == 3 and out.attentions[0].shape == (2, 4, 7, 7)
    torch.testing.assert_close(out.attentions[1].sum(-1), torch.ones(2, 4, 7))
    assert torch.all(out.attentions[0].triu(1) == 0)  # causal maps


def test_residual_projections_get_scaled_init():
    model = build_model(tiny(family="decoder", n_layers=8, d_model=256, d_ff=1024, init_std=0.02))
    layer = model.stack.layers[0]
    assert abs(layer.attn.q_proj.weight.std().item() - 0.02) < 0.002
    assert abs(layer.attn.out_proj.weight.std().item() - 0.02 / 4) < 0.0005  # 1/sqrt(2 * 8)


def test_features_are_the_last_hidden_states_without_the_vocabulary_projection():
    torch.manual_seed(0)
    for family in ("encoder", "decoder"):
        model = build_model(tiny(family=family, n_segments=2)).eval()
        x = torch.randint(0, 61, (2, 7))
        mask = torch.ones(2, 7, dtype=torch.bool)
        mask[1, 5:] = False
        segments = (torch.arange(7) >= 3).long().expand(2, -1)
        want = model(x, attention_mask=mask, token_type_ids=segments).last_hidden_state
        torch.testing.assert_close(model.features(x, mask, segments), want)
