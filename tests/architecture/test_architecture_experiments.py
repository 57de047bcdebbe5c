"""The architecture experiments' measures against hand computations, and their config's refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir

from helpers import CONF, entry_stage, fails_in_one_line, tiny
from lmforge.architecture.config import ArchConfig
from lmforge.architecture.measures import interleaved_medians, kv_cache_bytes_per_token, train_step_seconds
from lmforge.architecture.stage import difference
from lmforge.errors import ConfigError
from lmforge.interpret.induction import token_losses
from lmforge.model import build_model


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_kv_cache_bytes_per_token_is_two_tensors_per_layer_of_kv_heads_by_head_dim(kv_heads):
    model = build_model(tiny(n_kv_heads=kv_heads))  # 2 layers, 4 query heads of 8, float32
    assert kv_cache_bytes_per_token(model, 64) == 2 * 2 * kv_heads * 8 * 4


def test_token_losses_average_to_the_models_loss():
    torch.manual_seed(0)
    model = build_model(tiny()).eval()
    ids = torch.randint(0, 61, (5, 12))
    losses = token_losses(model, [ids[:3], ids[3:]])
    assert losses.shape == (5, 11)
    logits = model(ids).logits[:, :-1]
    expected = F.cross_entropy(logits.reshape(-1, 61), ids[:, 1:].reshape(-1))
    assert losses.mean().item() == pytest.approx(expected.item(), rel=1e-5)


def test_train_step_leaves_no_gradient_and_the_model_in_eval_mode():
    model = build_model(tiny()).eval()
    assert train_step_seconds(model, torch.randint(0, 61, (2, 8))) > 0
    assert not model.training and all(p.grad is None for p in model.parameters())


def test_interleaved_medians_take_each_jobs_median_and_run_jobs_in_turn():
    calls: list[str] = []
    values = {"a": iter([3.0, 1.0, 2.0]), "b": iter([9.0, 7.0, 8.0])}

    def job(name):
        def run():
            calls.append(name)
            return next(values[name])

        return run

    assert interleaved_medians({"a": job("a"), "b": job("b")}, 3) == {"a": 2.0, "b": 8.0}
    assert calls == ["a", "b", "a", "b", "a", "b"]


def test_difference_is_paired_by_window():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    d = difference(a + 0.5 + torch.tensor([0.01, -0.01, 0.02, -0.02]), a, ("x", "y"))
    assert d["mean"] == pytest.approx(0.5) and d["low"] > 0.45 and d["verdict"] == "x higher"


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"positions": ["arch_rope"]}, "arch.positions"),
        ({"lengths": [256, 128]}, "arch.lengths"),
        ({"repeats": 0}, "arch.repeats"),
        ({"max_windows": 0}, "arch.max_windows"),
    ],
)
def test_bad_arch_values_name_the_key(values, needle):
    with pytest.raises(ConfigError, match=needle):
        ArchConfig(**values)


@pytest.mark.parametrize("lengths", ["[256,512]", "[64,128]"])
def test_arch_eval_needs_the_training_length_and_a_longer_one(lengths, capsys):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="arch", overrides=["logger=none", f"arch.lengths={lengths}"])
    assert "arch.lengths" in fails_in_one_line(capsys, entry_stage("arch_eval"), cfg)
