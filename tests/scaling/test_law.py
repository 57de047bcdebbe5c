"""Hoffmann et al.'s approach 3 on synthetic sweeps drawn from a known law: recovery, interval
coverage, the compute-optimal allocation against a brute-force search, and the error lines."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from lmforge.scaling.law import (
    FitError,
    Law,
    _cells,
    _huber,
    bootstrap,
    compare,
    fit_law,
    hoffmann_grid,
    holdout,
)

TRUE = Law(E=1.7, A=400.0, B=410.0, alpha=0.34, beta=0.28)  # Chinchilla's constants


def sweep(law=TRUE, *, sizes=(1e4, 3e5, 6), tokens=(1e5, 3e6, 6), sigma=0.01, seed=0):
    """Cells on a geometric N x D grid with multiplicative log-normal noise of `sigma`."""
    N, D = (v.ravel() for v in np.meshgrid(np.geomspace(*sizes), np.geomspace(*tokens)))
    noise = np.exp(sigma * np.random.default_rng(seed).standard_normal(N.size))
    return N, D, law.predict(N, D) * noise


def test_the_gradient_matches_finite_differences():
    x, y, log_l = _cells(*sweep(seed=1))
    theta = np.array([6.1, 5.8, 0.4, 0.33, 0.3])
    for delta in (1e-1, 1e-3):  # quadratic and linear Huber regimes
        value, gradient = _huber(theta, x, y, log_l, delta)
        numeric = approx_fprime(theta, lambda t, d=delta: _huber(t, x, y, log_l, d)[0], 1e-7)
        np.testing.assert_allclose(gradient, numeric, rtol=1e-4, atol=1e-4 * np.abs(numeric).max())


def test_exponents_are_recovered_from_noisy_cells():
    fit = fit_law(*sweep(sigma=0.01, seed=0))  # off by at most 0.038 over 20 seeds
    assert abs(fit.law.alpha - TRUE.alpha) < 0.05 and abs(fit.law.beta - TRUE.beta) < 0.05
    assert fit.n_cells == 36 and fit.converged_starts >= 1 and not fit.at_bound


def test_the_default_starts_reach_the_optimum_of_hoffmanns_grid():
    grid = hoffmann_grid()
    assert grid.shape == (4500, 5) and sorted(set(grid[:, 0])) == [0, 5, 10, 15, 20, 25]
    cells = sweep(seed=0)
    paper = fit_law(*cells, starts=grid[::150], homotopy=())  # every 150th start, plain L-BFGS-B
    assert fit_law(*cells).objective == pytest.approx(paper.objective, rel=1e-9)


def test_E_is_recovered_where_the_cells_reach_towards_it():
    # In the 1e4..3e5 grid A/N^alpha and B/D^beta are ~8 nats each and 1 % noise leaves E undetermined
    # (off by up to 1.7 over 10 seeds); with N up to 1e8 and D up to 1e9 the reducible terms shrink
    # to ~1 nat, and at 0.2 % noise E is off by at most 0.03 over 20 seeds.
    fit = fit_law(*sweep(sizes=(1e4, 1e8, 6), tokens=(1e5, 1e9, 6), sigma=0.002, seed=0))
    assert abs(fit.law.E - TRUE.E) < 0.05
    assert abs(fit.law.alpha - TRUE.alpha) < 0.01 and abs(fit.law.beta - TRUE.beta) < 0.01


def test_a_noise_free_law_is_recovered_almost_exactly():
    fit = fit_law(*sweep(sigma=0.0))
    for name, value in TRUE.as_dict().items():
        assert getattr(fit.law, name) == pytest.approx(value, rel=1e-6), name  # measured 5e-9
    assert fit.objective < 1e-12


@pytest.mark.slow  # ~9 s: 20 bootstraps of 30 refits
def test_bootstrap_intervals_cover_the_true_exponents():
    covered = []
    for trial in range(20):
        boot = bootstrap(*sweep(tokens=(1e5, 3e6, 4), seed=100 + trial), n_boot=30, seed=trial)
        (a_lo, a_hi), (b_lo, b_hi) = boot.intervals["alpha"], boot.intervals["beta"]
        covered.append((a_lo <= TRUE.alpha <= a_hi, b_lo <= TRUE.beta <= b_hi))
    assert np.mean(covered, axis=0).min() >= 0.75  # nominal 95 %; measured 90 % (alpha), 95 % (beta)


def test_bootstrap_is_deterministic_and_holds_the_point_estimate():
    cells = sweep(tokens=(1e5, 3e6, 4), seed=3)
    one, two = bootstrap(*cells, n_boot=12, seed=7), bootstrap(*cells, n_boot=12, seed=7)
    np.testing.assert_array_equal(one.samples, two.samples)
    assert one.samples.shape == (12 - one.n_failed, 7)
    assert one.estimate["alpha"] == fit_law(*cells).law.alpha
    assert one.estimate["a"] == pytest.approx(
        one.estimate["beta"] / (one.estimate["alpha"] + one.estimate["beta"])
    )
    lo, hi = one.intervals["beta"]
    assert lo <= np.median(one.column("beta")) <= hi


def test_too_few_cells_and_bad_values_are_one_line_errors():
    N, D, loss = sweep()
    with pytest.raises(FitError, match=r"got 6 cells, expected at least 7 \(5 parameters \+ 2\)") as error:
        fit_law(N[:6], D[:6], loss[:6])
    assert "\n" not in str(error.value)
    for bad in (np.nan, -1.0, 0.0, np.inf):
        broken = loss.copy()
        broken[4] = bad
        with pytest.raises(FitError, match=r"loss\[4\] = .*expected a finite positive number") as error:
            fit_law(N, D, broken)
        assert "\n" not in str(error.value)
    with pytest.raises(FitError, match=r"N\[0\] = -5"):
        fit_law(np.r_[-5.0, N[1:]], D, loss)
    with pytest.raises(FitError, match="did not converge from any of 1 starts"):
        fit_law(N, D, loss, starts=[[np.nan] * 5])


@pytest.mark.parametrize("C", [1e12, 1e16, 1e21])
def test_optimal_allocation_matches_a_brute_force_search(C):
    N = np.geomspace(1e2, 1e14, 400_001)  # steps of 0.007 % in N
    D = C / (6 * N)
    best = np.argmin(TRUE.predict(N, D))
    n_opt, d_opt = TRUE.optimal(C)
    assert n_opt == pytest.approx(N[best], rel=1e-3) and d_opt == pytest.approx(D[best], rel=1e-3)
    assert TRUE.tokens_per_parameter(C) == pytest.approx(D[best] / N[best], rel=2e-3)
    assert TRUE.a + TRUE.b == pytest.approx(1.0)


def test_holdout_of_a_noise_free_sweep_predicts_the_largest_cells():
    N, D, loss = sweep(sigma=0.0)
    report = holdout(N, D, loss, 6 * N * D)
    assert len(report["rows"]) == round(0.15 * 36) == 5 and report["n_fit"] == 31
    assert report["mean_abs_rel_error"] < 1e-4
    largest = np.sort(6 * N * D)[-5:]
    assert sorted(row["compute"] for row in report["rows"]) == pytest.approx(largest)
    noisy = holdout(*sweep(sigma=0.01, seed=2), 6 * N * D, n_holdout=1)
    assert len(noisy["rows"]) == 1 and 0 < noisy["mean_abs_rel_error"] < 0.05


def test_compare_supports_a_real_difference_and_not_a_null_one():
    steeper = Law(E=1.7, A=2300.0, B=410.0, alpha=0.5, beta=0.28)  # N term ~ as large as TRUE's
    cells = dict(tokens=(1e5, 3e6, 4), sigma=0.01)
    base = bootstrap(*sweep(seed=11, **cells), n_boot=50, seed=1)
    rows = {
        r["name"]: r for r in compare(base, bootstrap(*sweep(steeper, seed=12, **cells), n_boot=50, seed=2))
    }
    assert rows["alpha"]["supported"] and rows["alpha"]["interval_difference"][0] > 0
    assert rows["alpha"]["difference"] == pytest.approx(0.16, abs=0.05)
    # a null pair: nominally 5 % false positives per parameter; measured 0 % (alpha) and 7 % (beta) over
    # 30 pairs at 50 resamples, 3 % and 13 % at 25 resamples (too few for the interval's tails)
    null = {r["name"]: r for r in compare(base, bootstrap(*sweep(seed=13, **cells), n_boot=50, seed=3))}
    assert not null["alpha"]["supported"] and not null["beta"]["supported"]
    assert set(null) == {"alpha", "beta", "E", "a", "b"}


def test_seed_repeats_are_fitted_at_their_mean_and_redrawn_in_the_bootstrap():
    N, D, loss = sweep(tokens=(1e5, 3e6, 4), seed=5)
    singletons = bootstrap(N, D, loss, groups=list(range(N.size)), n_boot=10, seed=2)
    np.testing.assert_array_equal(singletons.samples, bootstrap(N, D, loss, n_boot=10, seed=2).samples)
    # the first three cells measured under two more seeds, 0.02 nats apart on either side
    extra = np.array([0, 1, 2, 0, 1, 2])
    rows_n, rows_d = np.concatenate([N, N[extra]]), np.concatenate([D, D[extra]])
    shift = np.array([0.02, 0.02, 0.02, -0.02, -0.02, -0.02])
    rows_l = np.concatenate([loss, loss[extra] + shift])
    groups = [*range(N.size), *extra]
    repeated = bootstrap(rows_n, rows_d, rows_l, groups=groups, n_boot=10, seed=2)
    assert repeated.fit.n_cells == N.size  # one point per cell: the mean of its seeds
    assert repeated.estimate["alpha"] == fit_law(N, D, loss).law.alpha  # the shifts cancel in the means
    assert not np.array_equal(repeated.samples, singletons.samples)  # the seeds are redrawn
    with pytest.raises(FitError, match="got 3 group labels for 30 rows"):
        bootstrap(rows_n, rows_d, rows_l, groups=[0, 1, 2], n_boot=10)
