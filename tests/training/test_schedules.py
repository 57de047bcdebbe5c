"""Learning-rate schedules (Noam, linear, cosine, constant, warmup-stable-decay) and AdamW decay groups."""

from __future__ import annotations

import itertools
import math
import pickle

import pytest
import torch
from torch import nn

from lmforge.errors import ConfigError
from lmforge.training.config import OptimConfig
from lmforge.training.optim import build_optimizer, parameter_groups
from lmforge.training.schedules import build_scheduler


def _lrs(name: str, n_updates: int, base_lr: float = 1.0, **kw) -> list[float]:
    """The learning rate each update s = 1 .. n_updates runs at (index s - 1)."""
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=base_lr)
    sched = build_scheduler(opt, name, **kw)
    used = []
    for _ in range(n_updates):
        used.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return used


def test_noam_peaks_at_warmup_with_the_paper_value():
    d_model, warmup = 512, 100
    lrs = _lrs("noam", 4 * warmup, warmup_steps=warmup, d_model=d_model)
    peak = d_model**-0.5 * warmup**-0.5
    assert lrs[warmup - 1] == pytest.approx(peak)  # update s = warmup
    assert max(lrs) == pytest.approx(peak) and lrs.index(max(lrs)) == warmup - 1
    assert lrs[0] == pytest.approx(d_model**-0.5 * warmup**-1.5)  # s = 1: linear ramp
    assert lrs[4 * warmup - 1] == pytest.approx(peak / 2)  # s^-0.5 decay: 4x the steps, half the rate
    assert _lrs("noam", warmup, warmup_steps=warmup, d_model=d_model, factor=2.0)[-1] == pytest.approx(
        2 * peak
    )
    assert _lrs("noam", warmup, base_lr=0.5, warmup_steps=warmup, d_model=d_model)[-1] == pytest.approx(
        peak / 2
    )


def test_linear_warms_up_then_decays_to_the_floor():
    lrs = _lrs("linear", 120, base_lr=2.0, warmup_steps=10, total_steps=110, min_lr_ratio=0.1)
    assert lrs[0] == pytest.approx(2.0 / 10)
    assert lrs[9] == pytest.approx(2.0)  # peak at s = warmup
    assert lrs[59] == pytest.approx(2.0 * (1 - 0.9 * 0.5))  # halfway through the decay
    assert lrs[109] == pytest.approx(0.2) and lrs[119] == pytest.approx(0.2)  # floor at total and after
    assert all(a >= b for a, b in itertools.pairwise(lrs[9:]))


def test_cosine_warms_up_then_follows_half_a_cosine():
    lrs = _lrs("cosine", 130, warmup_steps=20, total_steps=120, min_lr_ratio=0.1)
    assert lrs[19] == pytest.approx(1.0)
    assert lrs[69] == pytest.approx(0.1 + 0.9 * 0.5)  # midpoint of the cosine
    s = 45
    assert lrs[s - 1] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - 20) / 100)))
    assert lrs[119] == pytest.approx(0.1) and lrs[129] == pytest.approx(0.1)


def test_constant_with_and_without_warmup():
    assert _lrs("constant", 6, warmup_steps=4) == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
    assert _lrs("constant", 3, warmup_steps=0) == pytest.approx([1.0, 1.0, 1.0])
    assert _lrs("linear", 2, warmup_steps=0, total_steps=2) == pytest.approx([0.5, 0.0])


def test_wsd_warms_up_holds_the_peak_then_decays_over_its_last_share():
    lrs = _lrs(
        "wsd", 110, base_lr=2.0, warmup_steps=10, total_steps=100, decay_fraction=0.2, min_lr_ratio=0.1
    )
    assert lrs[0] == pytest.approx(0.2) and lrs[9] == pytest.approx(2.0)  # warmup reaches the peak
    assert lrs[9:80] == pytest.approx([2.0] * 71)  # stable through update 80
    assert lrs[89] == pytest.approx(2.0 * (1 - 0.9 * 0.5))  # halfway through the last 20 updates
    assert lrs[99] == pytest.approx(0.2) and lrs[109] == pytest.approx(0.2)  # floor at total and after
    assert all(a >= b for a, b in itertools.pairwise(lrs[9:]))
    whole = _lrs("wsd", 4, warmup_steps=0, total_steps=4, decay_fraction=1.0)
    assert whole == pytest.approx([0.75, 0.5, 0.25, 0.0])  # decay_fraction 1: the linear schedule
    assert whole == pytest.approx(_lrs("linear", 4, warmup_steps=0, total_steps=4))


def test_bad_schedule_arguments_are_one_line_config_errors():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ConfigError, match="noam, linear, cosine, constant, wsd") as info:
        build_scheduler(opt, "exponential", warmup_steps=10, total_steps=100)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="total_steps"):
        build_scheduler(opt, "cosine", warmup_steps=100, total_steps=100)
    with pytest.raises(ConfigError, match="d_model"):
        build_scheduler(opt, "noam", warmup_steps=100)
    with pytest.raises(ConfigError, match="min_lr_ratio"):
        build_scheduler(opt, "noam", warmup_steps=100, d_model=512, min_lr_ratio=0.1)
    with pytest.raises(ConfigError, match="warmup_steps"):
        build_scheduler(opt, "linear", warmup_steps=-1, total_steps=100)
    with pytest.raises(ConfigError, match="decay_fraction=0"):
        build_scheduler(opt, "wsd", warmup_steps=1, total_steps=100, decay_fraction=0)
    with pytest.raises(ConfigError, match="optim.decay_fraction: got 1.5"):
        OptimConfig(schedule="wsd", decay_fraction=1.5)


def test_scheduler_state_round_trips_through_a_checkpoint():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = build_scheduler(opt, "cosine", warmup_steps=5, total_steps=50)
    for _ in range(17):
        opt.step()
        sched.step()
    state = pickle.loads(pickle.dumps(sched.state_dict()))
    opt2 = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched2 = build_scheduler(opt2, "cosine", warmup_steps=5, total_steps=50)
    sched2.load_state_dict(state)
    opt2.param_groups[0]["lr"] = sched2.get_last_lr()[0]
    assert sched2.last_epoch == 17 and opt2.param_groups[0]["lr"] == pytest.approx(opt.param_groups[0]["lr"])


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 3)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied: must appear once
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)


def test_weight_decay_only_on_matrices():
    model = _Tiny()
    decay, no_decay = parameter_groups(model, weight_decay=0.1)
    assert {id(p) for p in decay["params"]} == {id(model.embed.weight), id(model.proj.weight)}
    assert {id(p) for p in no_decay["params"]} == {
        id(model.norm.weight),
        id(model.norm.bias),
        id(model.proj.bias),
    }
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0


def test_adamw_decays_matrices_and_leaves_vectors():
    model = _Tiny()
    opt = build_optimizer(model, lr=0.1, weight_decay=0.5, betas=[0.9, 0.95], eps=1e-8)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p) if p.requires_grad else None
    opt.step()  # zero gradients: only decoupled weight decay moves parameters, by a factor 1 - lr * wd
    assert torch.allclose(model.proj.weight, before["proj.weight"] * (1 - 0.1 * 0.5))
    assert torch.equal(model.proj.bias, before["proj.bias"]) and torch.equal(
        model.norm.weight, before["norm.weight"]
    )
    assert opt.param_groups[0]["betas"] == (0.9, 0.95)
    with pytest.raises(ConfigError, match="optim.betas"):
        OptimConfig(lr=0.1, betas=[0.9])
    with pytest.raises(ConfigError, match="optim.lr"):
        OptimConfig(lr=0.0)
