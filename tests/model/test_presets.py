"""Every conf/model preset composes through Hydra and builds; the classic presets have their
published parameter counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from lmforge.model import build_model, count_parameters
from lmforge.model.config import load_model_config

CONF = Path(__file__).resolve().parents[2] / "conf"
PRESETS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))


def _preset(name: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(overrides=[f"+model={name}"])  # the group alone: model tests need no other group
    return load_model_config(cfg.model)


# Published sizes: BERT paper (110M), GPT-2 paper (124M), T5 paper (60M), and the 2017 paper (65M).
# The 2017 paper's own sizes (6+6 layers, 512, 2048, shared 37k vocabulary) add up to 63.1M, 3% under
# its quoted 65M; no vocabulary it names reaches 65M, so that preset is checked against the sum.
PUBLISHED = {"bert_base": 110e6, "gpt2_small": 124e6, "t5_small": 60e6}


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_composes_and_builds(name):
    config = _preset(name)
    model = build_model(config)
    assert count_parameters(model)["total"] > 0


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_classic_presets_match_published_parameter_counts(name):
    total = count_parameters(build_model(_preset(name)))["total"]
    assert abs(total - PUBLISHED[name]) / PUBLISHED[name] < 0.01, total


def test_transformer_base_parameter_count_equals_the_papers_sizes():
    total = count_parameters(build_model(_preset("transformer_base")))["total"]
    d, d_ff, vocab, n = 512, 2048, 37000, 6
    attention = 4 * (d * d + d)
    ffn = d * d_ff + d_ff + d_ff * d + d
    layer_norm = 2 * d
    encoder = n * (attention + ffn + 2 * layer_norm)
    decoder = n * (2 * attention + ffn + 3 * layer_norm)
    assert total == vocab * d + encoder + decoder  # one embedding matrix shared three ways
    assert abs(total - 65e6) / 65e6 < 0.035


def test_exact_counts_of_reference_implementations():
    # The totals of the reference checkpoints: GPT-2 small 124,439,808; T5-small 60,506,624;
    # BERT-base with its MLM head 109,514,298.
    counts = {name: count_parameters(build_model(_preset(name)))["total"] for name in PUBLISHED}
    assert counts == {"gpt2_small": 124_439_808, "t5_small": 60_506_624, "bert_base": 109_514_298}


def test_embedding_split():
    counts = count_parameters(build_model(_preset("gpt2_small")))
    assert counts["embedding"] == 50257 * 768 + 1024 * 768  # tied output projection counted once
    assert counts["non_embedding"] == counts["total"] - counts["embedding"]


def test_any_field_overrides_without_plus():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(overrides=["+model=gpt_tiny", "model.n_kv_heads=2", "model.sliding_window=16"])
    config = load_model_config(cfg.model)
    assert (config.n_kv_heads, config.sliding_window, config.d_model) == (2, 16, 128)
