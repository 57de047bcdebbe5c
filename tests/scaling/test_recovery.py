"""Synthetic recovery on the default sweep's own grid: can the fitter find a known law there?

Losses are generated from a known law at the (N, D) of every run of the default sweep
(conf/scaling/default.yaml, seed repeats included), with log-normal noise of the seed standard
deviation that sweep measured (reports/scaling/default/fit.json), and fitted as `scaling_fit` fits
them (seed repeats averaged into their cell, the two-stage bootstrap). Over many draws, the 95%
intervals of alpha and beta should cover the true values in most of them; the test also records
how often the grid identifies each parameter, which is what the default report's summary line says.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from helpers import entry_stage
from lmforge.scaling.analysis import unidentified
from lmforge.scaling.grid import cells
from lmforge.scaling.law import Law, bootstrap

ROOT = Path(__file__).resolve().parents[2]
# A law of the size the default sweep measures (4.6-5.3 nats over its cells), Chinchilla-like exponents.
TRUE = Law(E=3.0, A=25.0, B=60.0, alpha=0.34, beta=0.28)


def default_runs() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """N (non-embedding), D and the cell name of every run of the default sweep, repeats included."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        plan = entry_stage("scaling_sweep").visible(compose(config_name="scaling", overrides=["logger=none"]))
    vocab = compose_vocab(plan)
    base = dataclasses.replace(plan.model, vocab_size=vocab, pad_token_id=0)
    grid = cells(plan.scaling, base, plan.objective, plan.optim.lr, plan.seed)
    N = np.array([c.params_non_embedding for c in grid], dtype=float)
    D = np.array([c.tokens for c in grid], dtype=float)
    return N, D, [c.name for c in grid]


def compose_vocab(plan) -> int:
    return int(plan.tokenizer.vocab_size)


def measured_noise() -> float:
    fit = json.loads((ROOT / "reports/scaling/default/fit.json").read_text())
    return float(fit["noise"]["pooled_std"])


def recovery(draws: int, n_boot: int) -> dict[str, float]:
    N, D, names = default_runs()
    sigma = measured_noise()
    covered, identified = [], []
    for draw in range(draws):
        noise = np.exp(sigma * np.random.default_rng(1000 + draw).standard_normal(N.size))
        boot = bootstrap(N, D, TRUE.predict(N, D) * noise, groups=names, n_boot=n_boot, seed=draw)
        row = []
        for name in ("alpha", "beta"):
            lo, hi = boot.intervals[name]
            row.append(lo <= getattr(TRUE, name) <= hi)
        covered.append(row)
        identified.append(
            [unidentified(k, boot.estimate[k], *boot.intervals[k]) is None for k in ("E", "alpha", "beta")]
        )
    cover, ident = np.mean(covered, axis=0), np.mean(identified, axis=0)
    return {
        "sigma": sigma,
        "alpha_covered": float(cover[0]),
        "beta_covered": float(cover[1]),
        "E_identified": float(ident[0]),
        "alpha_identified": float(ident[1]),
        "beta_identified": float(ident[2]),
    }


def test_the_default_grid_is_the_one_the_recovery_check_reads():
    N, D, names = default_runs()
    assert len(set(names)) < len(names)  # seed repeats share their cell's name
    assert N.min() > 1e3 and D.min() >= 512_000  # 1,000 steps of 8 x 64 tokens at least


@pytest.mark.slow
def test_the_fitter_recovers_a_known_law_on_the_default_grid():
    """50 draws, 60 resamples each: alpha and beta inside their 95% intervals in at least 90% of
    draws (the issue's bar, at the measured seed noise)."""
    result = recovery(draws=50, n_boot=60)
    print(result)
    assert result["alpha_covered"] >= 0.9 and result["beta_covered"] >= 0.9, result
