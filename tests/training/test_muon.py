"""`optim.algorithm=muon`: Muon's update is the orthogonalised gradient (against its SVD), AdamW's part
is plain AdamW, one schedule reaches both, a checkpoint round trip continues exactly, and only the
transformer stacks' matrices go to Muon."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import tiny
from lmforge.errors import ConfigError
from lmforge.model import build_model
from lmforge.training.config import OptimConfig
from lmforge.training.optim import MuonAdamW, hidden_matrices, optimization


def _params(seed: int = 0) -> tuple[nn.Parameter, nn.Parameter, nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return (
        nn.Parameter(torch.randn(24, 16, generator=gen)),  # a matrix: Muon's
        nn.Parameter(torch.randn(7, 5, generator=gen)),  # a matrix left to AdamW (an embedding, say)
        nn.Parameter(torch.randn(16, generator=gen)),  # a gain: AdamW, no decay
    )


def _grads(params, step: int) -> None:
    gen = torch.Generator().manual_seed(100 + step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen)


def test_muons_update_is_the_orthogonalised_gradient():
    matrix, table, gain = _params()
    before = matrix.detach().clone()
    o = OptimConfig(algorithm="muon", lr=0.01, weight_decay=0.0, muon_momentum=0.0)
    optimizer = MuonAdamW([matrix], [table, gain], o)
    _grads([matrix, table, gain], 0)
    grad = matrix.grad.clone()
    optimizer.step()
    scale = 0.01 * 0.2 * 24**0.5  # lr matched to AdamW's update RMS: 0.2 * sqrt(max(A, B))
    update = (before - matrix.detach()) / scale
    u, _, vh = torch.linalg.svd(grad, full_matrices=False)
    core = u.T @ update @ vh.T  # update = U S' V^T with S' near one (Newton-Schulz, in bfloat16)
    diagonal = torch.diagonal(core)
    assert ((diagonal > 0.5) & (diagonal < 1.5)).all(), diagonal
    assert (core - torch.diag(diagonal)).abs().max() < 0.1
    cosine = torch.nn.functional.cosine_similarity(update.flatten(), (u @ vh).flatten(), dim=0)
    assert cosine > 0.95


def test_the_rest_is_plain_adamw_and_one_schedule_reaches_both():
    matrix, table, gain = _params()
    twin_table, twin_gain = (nn.Parameter(p.detach().clone()) for p in (table, gain))
    o = OptimConfig(algorithm="muon", lr=0.01, weight_decay=0.1, warmup_steps=0, schedule="constant")
    optimizer = optimization([matrix, table, gain], o, d_model=16, max_steps=10, matrices=[matrix])[
        "optimizer"
    ]
    assert isinstance(optimizer, MuonAdamW)
    reference = torch.optim.AdamW(
        [{"params": [twin_table], "weight_decay": 0.1}, {"params": [twin_gain], "weight_decay": 0.0}],
        lr=0.01,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    for step in range(3):
        _grads([matrix, table, gain], step)
        twin_table.grad, twin_gain.grad = table.grad.clone(), gain.grad.clone()
        optimizer.step()
        reference.step()
    torch.testing.assert_close(table, twin_table)
    torch.testing.assert_close(gain, twin_gain)

    o = OptimConfig(algorithm="muon", lr=0.01, warmup_steps=2, schedule="constant")
    scheduled = optimization([matrix, table, gain], o, d_model=16, max_steps=10, matrices=[matrix])
    scheduler = scheduled["lr_scheduler"]["scheduler"]
    assert [g["lr"] for g in scheduled["optimizer"].muon.param_groups] == [0.005]  # warmup 1/2
    assert {g["lr"] for g in scheduled["optimizer"].adamw.param_groups} == {0.005}
    scheduled["optimizer"].step()
    scheduler.step()
    assert scheduled["optimizer"].muon.param_groups[0]["lr"] == pytest.approx(0.01)


def test_a_checkpoint_round_trip_continues_exactly():
    o = OptimConfig(algorithm="muon", lr=0.01)
    whole = _params()
    first = MuonAdamW([whole[0]], whole[1:], o)
    for step in range(4):
        _grads(whole, step)
        first.step()

    resumed = _params()
    second = MuonAdamW([resumed[0]], resumed[1:], o)
    for step in range(2):
        _grads(resumed, step)
        second.step()
    saved = second.state_dict()
    again = MuonAdamW([resumed[0]], resumed[1:], o)
    again.load_state_dict(saved)
    assert again.muon.state is again.state and again.muon.param_groups[0] is again.param_groups[0]
    for step in range(2, 4):
        _grads(resumed, step)
        again.step()
    for a, b in zip(whole, resumed):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("family", ["decoder", "encoder_decoder"])
def test_muon_gets_the_stacks_matrices_only(family):
    model = build_model(tiny(family=family, position="relative"))  # a bias table inside the stack
    chosen = {id(p) for p in hidden_matrices(model)}
    names = {n for n, p in model.named_parameters() if id(p) in chosen}
    assert names and all(".layers." in n and not n.endswith(("bias", "norm.weight")) for n in names)
    assert any("relative" in n for n, _ in model.named_parameters())
    assert not any("embed" in n or "relative" in n or n.startswith("head.") for n in names)
    linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    assert chosen < linear  # linear weights only, and not all of them (the head's is left to AdamW)
    assert all(p.dim() == 2 for p in hidden_matrices(model))


def test_bad_muon_settings_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="optim.algorithm: got 'sgd', expected one of adamw, muon"):
        OptimConfig(algorithm="sgd")
    with pytest.raises(ConfigError, match="optim.muon_momentum: got 1.0"):
        OptimConfig(algorithm="muon", muon_momentum=1.0)
    with pytest.raises(ConfigError, match="no matrices in a transformer stack"):
        optimization([nn.Parameter(torch.zeros(3))], OptimConfig(algorithm="muon"), 16, 10)
