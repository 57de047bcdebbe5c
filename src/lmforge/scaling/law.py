"""The parametric scaling law L(N, D) = E + A/N^alpha + B/D^beta, fitted as in Hoffmann et al. 2022.

Fit ("approach 3" of the Chinchilla paper). With a = log A, b = log B, e = log E the model's log loss
is LSE(a - alpha log N, b - beta log D, e), and the fit minimises exactly Hoffmann's objective

    sum_i Huber_delta( LSE(a - alpha log N_i, b - beta log D_i, e) - log L_i ),   delta = 1e-3

by L-BFGS-B (analytic gradient; alpha, beta in [0, 3]) from several starts, keeping the lowest
objective among the starts that converge. The optimiser sees the sum divided by delta (same
minimiser, better-scaled stopping tests); `LawFit.objective` is the sum itself.

How the optimum is found. From Hoffmann's 4,500-point grid (`hoffmann_grid()`) a third of the runs
reach the best objective; many others stall on plateaus where one term swamps the rest. And with
delta far below the noise the objective is nearly piecewise linear, so L-BFGS-B stops on its kinks:
on bootstrap resamples, runs from different good starts ended up to 7 % apart in objective and 1.5
apart in log E at scipy's default tolerances, 5e-5 and 0.2 apart at tight tolerances alone. Here
every start runs at tight tolerances through a homotopy: Huber deltas 0.1 (a smooth, nearly
least-squares problem) and 0.01, each warm-starting the next, then delta. The default starts are a profiled grid: for every (alpha, beta) in
{0.05, ..., 2.0}^2 the model is linear in (A, B, E), solved by least squares on relative residuals,
and the 4 best local minima of that grid are the starts. Measured on 7 synthetic sweeps of 36-42
cells (two full sweeps and five bootstrap resamples on which default-tolerance fits disagreed), this
reached the same optimum as Hoffmann's full grid at the same tight tolerances (objective within
1e-13 relative, parameters equal to 4 decimals), in ~50 ms per fit instead of ~1 min.
Where the cells do not pin E down (the smallest loss far above E) the objective is flat along a
valley: changes of 1e-11 in the objective move log E by 0.15. The fitted E is then one point of the
valley; the bootstrap interval shows its extent.

Compute-optimal allocation. Under C = 6ND, minimising L over N along a budget gives
N_opt = G (C/6)^a and D_opt = (C/6)^b / G with a = beta/(alpha+beta), b = alpha/(alpha+beta) and
G = (alpha A / (beta B))^(1/(alpha+beta)) (Hoffmann et al., section 3.3).

Uncertainty. `bootstrap` refits resamples of the cells drawn with replacement (percentile
intervals; a cell measured under several seeds is fitted at its mean and its seeds are redrawn too); `compare` differences the bootstrap samples of two sweeps; `holdout` fits on all but the
largest-compute cells and predicts those.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import minimize

from lmforge.errors import LmforgeError

N_PARAMS = 5  # a, b, e, alpha, beta
EXPONENT_BOUNDS = (0.0, 3.0)
HOMOTOPY = (1e-1, 1e-2)  # larger Huber deltas solved first, each warm-starting the next
TOLERANCES = {"ftol": 1e-13, "gtol": 1e-9, "maxiter": 5000}  # scipy's defaults stop early on the kinks
STALLED_GRADIENT = 1e-4  # a stalled line search counts as converged below this gradient (objective / delta)
COLUMNS = ("E", "A", "B", "alpha", "beta", "a", "b")  # the bootstrap sample matrix


class FitError(LmforgeError):
    """Too few or invalid cells, or no start of the optimiser converged."""


@dataclass(frozen=True)
class Law:
    """L(N, D) = E + A / N^alpha + B / D^beta; N parameters, D training tokens, L loss in nats."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def predict(self, N, D) -> np.ndarray:
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        return self.E + self.A / N**self.alpha + self.B / D**self.beta

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}

    @property
    def a(self) -> float:
        """N_opt grows as C^a under C = 6ND."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """D_opt grows as C^b under C = 6ND (a + b = 1)."""
        return self.alpha / (self.alpha + self.beta)

    def optimal(self, C) -> tuple[np.ndarray, np.ndarray]:
        """(N_opt, D_opt) minimising the predicted loss at compute C = 6ND."""
        G = (self.alpha * self.A / (self.beta * self.B)) ** (1 / (self.alpha + self.beta))
        budget = np.asarray(C, dtype=float) / 6
        return G * budget**self.a, budget**self.b / G

    def tokens_per_parameter(self, C) -> np.ndarray:
        N, D = self.optimal(C)
        return D / N


@dataclass(frozen=True)
class LawFit:
    law: Law
    objective: float  # Hoffmann's Huber sum at the optimum
    converged_starts: int  # starts whose last L-BFGS-B run converged (or stalled at a ~0 gradient)
    n_starts: int
    n_cells: int
    delta: float
    theta: tuple[float, ...]  # the optimiser's coordinates (log A, log B, log E, alpha, beta)
    at_bound: bool  # alpha or beta ended on a bound: that exponent is not identified by the cells


def hoffmann_grid() -> np.ndarray:
    """Hoffmann et al.'s 4,500 starts as rows (a, b, e, alpha, beta)."""
    ab, e, exponents = range(0, 30, 5), (-1, -0.5, 0, 0.5, 1), (0, 0.5, 1, 1.5, 2)
    return np.array(list(itertools.product(ab, ab, e, exponents, exponents)), dtype=float)


def _cells(N, D, loss) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log N, log D, log L after checking that every value is finite and positive."""
    arrays = [np.asarray(v, dtype=float).ravel() for v in (N, D, loss)]
    if len({a.size for a in arrays}) != 1:
        sizes = ", ".join(str(a.size) for a in arrays)
        raise FitError(f"scaling fit: N, D and loss have sizes {sizes}, expected equal sizes")
    for name, values in zip(("N", "D", "loss"), arrays):
        bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
        if bad.size:
            raise FitError(
                f"scaling fit: {name}[{bad[0]}] = {values[bad[0]]}, expected a finite positive number"
            )
    if arrays[0].size < N_PARAMS + 2:
        raise FitError(
            f"scaling fit: got {arrays[0].size} cells, expected at least {N_PARAMS + 2} ({N_PARAMS} parameters + 2)"
        )
    return np.log(arrays[0]), np.log(arrays[1]), np.log(arrays[2])


def _huber(theta: np.ndarray, x, y, log_l, delta: float, grad: bool = True):
    """Hoffmann's objective divided by delta (and its gradient); theta (..., 5) broadcasts over starts."""
    a, b, e, alpha, beta = (np.asarray(theta, dtype=float)[..., i, None] for i in range(N_PARAMS))
    t_n, t_d = a - alpha * x, b - beta * y  # (..., cells)
    top = np.maximum(np.maximum(t_n, t_d), e)
    w_n, w_d, w_e = np.exp(t_n - top), np.exp(t_d - top), np.exp(e - top)
    total = w_n + w_d + w_e
    r = top + np.log(total) - log_l
    abs_r = np.abs(r)
    value = np.where(abs_r <= delta, 0.5 * r * r / delta, abs_r - 0.5 * delta).sum(axis=-1)
    if not grad:
        return value
    psi = np.clip(r / delta, -1.0, 1.0) / total  # Huber'(r) / delta, over the sum of the weights
    w_n, w_d = w_n * psi, w_d * psi
    gradient = np.array([w_n.sum(), w_d.sum(), w_e @ psi, -(w_n @ x), -(w_d @ y)])
    return float(value), gradient


def _profile_starts(x, y, log_l, n_starts: int, delta: float) -> np.ndarray:
    """The default starts: the best points of an (alpha, beta) grid with A, B, E profiled out.

    For each (alpha, beta) in {0.05, ..., 2.0}^2 the model is linear in (A, B, E): least squares on
    the relative residual (prediction - L) / L gives them. The local minima of the Huber objective
    over that grid (8-neighbourhood) come first, lowest first, so the starts do not crowd into one
    basin; the other points fill up to `n_starts`.
    """
    grid = np.arange(1, 41) * 0.05
    alpha, beta = (g.ravel() for g in np.meshgrid(grid, grid, indexing="ij"))
    L = np.exp(log_l)
    X = np.stack([np.exp(-alpha[:, None] * x), np.exp(-beta[:, None] * y), np.ones((alpha.size, x.size))], -1)
    X = X / L[:, None]  # (grid points, cells, 3)
    coef = np.linalg.solve(X.transpose(0, 2, 1) @ X, X.sum(axis=1)[..., None])[..., 0]
    coef = np.maximum(coef, 1e-3 * L.min())  # a negative A, B or E becomes a small positive start
    theta = np.column_stack([np.log(coef), alpha, beta])
    f = _huber(theta, x, y, log_l, delta, grad=False).reshape(grid.size, grid.size)
    padded = np.pad(f, 1, constant_values=np.inf)
    around = [
        padded[1 + i : 1 + i + grid.size, 1 + j : 1 + j + grid.size] for i in (-1, 0, 1) for j in (-1, 0, 1)
    ]
    is_min = (f <= np.min(around, axis=0)).ravel()
    order = np.lexsort((f.ravel(), ~is_min))  # local minima by objective, then the other points
    return theta[order[:n_starts]]


def _converged(res) -> bool:
    """L-BFGS-B converged, or its line search stalled where the projected gradient is ~0 (at the
    tight tolerances this happens at the optimum: the objective is flat to rounding there)."""
    if not np.isfinite(res.fun):
        return False
    free = (res.x[3:] > EXPONENT_BOUNDS[0]) & (res.x[3:] < EXPONENT_BOUNDS[1])
    gradient = np.concatenate([res.jac[:3], np.where(free, res.jac[3:], 0.0)])
    return bool(res.success or (res.status == 2 and np.abs(gradient).max() < STALLED_GRADIENT))


def fit_law(
    N, D, loss, *, delta: float = 1e-3, starts=None, homotopy: tuple[float, ...] = HOMOTOPY, n_starts: int = 4
) -> LawFit:
    """Minimise Hoffmann's objective from every start (rows a, b, e, alpha, beta); keep the best.

    `starts=None` takes the `n_starts` profiled starts; each start runs through the `homotopy`
    deltas before `delta` (pass `homotopy=()` and `starts=hoffmann_grid()` for the paper's procedure).
    """
    x, y, log_l = _cells(N, D, loss)
    starts = _profile_starts(x, y, log_l, n_starts, delta) if starts is None else np.atleast_2d(starts)
    bounds = [(None, None)] * 3 + [EXPONENT_BOUNDS] * 2
    best, converged = None, 0
    for theta in starts:
        for d in [*(d for d in homotopy if d > delta), delta]:
            res = minimize(
                _huber, theta, (x, y, log_l, d), "L-BFGS-B", jac=True, bounds=bounds, options=TOLERANCES
            )
            theta = res.x
        if _converged(res):
            converged += 1
            if best is None or res.fun < best.fun:
                best = res
    if best is None:
        raise FitError(
            f"scaling fit: L-BFGS-B did not converge from any of {len(starts)} starts; "
            "expected at least one (check the cells, or pass starts=hoffmann_grid())"
        )
    log_A, log_B, log_E, alpha, beta = (float(v) for v in best.x)
    law = Law(E=float(np.exp(log_E)), A=float(np.exp(log_A)), B=float(np.exp(log_B)), alpha=alpha, beta=beta)
    return LawFit(
        law=law,
        objective=float(best.fun) * delta,
        converged_starts=converged,
        n_starts=len(starts),
        n_cells=x.size,
        delta=delta,
        theta=tuple(float(v) for v in best.x),
        at_bound=bool(
            np.any((best.x[3:] <= EXPONENT_BOUNDS[0] + 1e-6) | (best.x[3:] >= EXPONENT_BOUNDS[1] - 1e-6))
        ),
    )


def _row(law: Law) -> list[float]:
    return [law.E, law.A, law.B, law.alpha, law.beta, law.a, law.b]


def _interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Bootstrap:
    fit: LawFit  # the point estimate: the fit on every cell
    samples: np.ndarray  # (successful resamples, 7), columns COLUMNS
    intervals: dict[str, tuple[float, float]]  # percentile interval of each column at `level`
    level: float
    n_boot: int  # resamples drawn
    n_failed: int  # resamples whose refit raised FitError (left out of `samples`)
    seed: int

    @property
    def estimate(self) -> dict[str, float]:
        return dict(zip(COLUMNS, _row(self.fit.law)))

    def column(self, name: str) -> np.ndarray:
        return self.samples[:, COLUMNS.index(name)]

    def as_dict(self) -> dict:
        """The summary without the sample matrix (for JSON reports)."""
        return {
            "estimate": self.estimate,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "level": self.level,
            "n_boot": self.n_boot,
            "n_failed": self.n_failed,
            "seed": self.seed,
        }


def cell_means(N, D, loss, groups=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """One point per cell: rows sharing a group (the same cell under several seeds) are averaged.

    Returns N, D and the mean loss per group (in order of first appearance) and each group's row
    indices. Without `groups` every row is its own cell.
    """
    N, D, loss = (np.asarray(v, dtype=float).ravel() for v in (N, D, loss))
    if groups is None:
        members = [np.array([i]) for i in range(N.size)]
    else:
        labels = list(groups)
        if len(labels) != N.size:
            raise FitError(
                f"scaling fit: got {len(labels)} group labels for {N.size} rows, expected one per row"
            )
        first: dict = {}
        for i, g in enumerate(labels):
            first.setdefault(g, []).append(i)
        members = [np.array(rows) for rows in first.values()]
    heads = np.array([m[0] for m in members], dtype=int)
    means = np.array([loss[m].mean() for m in members])
    return N[heads], D[heads], means, members


def bootstrap(
    N, D, loss, *, groups=None, n_boot: int = 200, seed: int = 0, level: float = 0.95, **fit_kwargs
) -> Bootstrap:
    """Percentile intervals from refitting `n_boot` resamples of the cells drawn with replacement.

    Rows with the same `groups` label are one cell measured under several seeds: the fit sees their
    mean, and each resample also redraws that cell's seeds with replacement (a two-stage bootstrap,
    so the intervals carry the seed noise too). The cell indices of every resample are drawn up front
    from `seed` (the seed redraws from a second stream), so the result is deterministic and a failed
    refit (FitError) shifts nothing. `fit_kwargs` (delta, starts, homotopy, n_starts) go to the full
    fit; each refit starts once, from the full fit's parameters, through the same homotopy: on 30
    resamples it reached the optimum of the four profiled starts (objective within 1e-12 relative) at
    a quarter of the cost.
    """
    raw = np.asarray(loss, dtype=float).ravel()
    n_cells, d_cells, means, members = cell_means(N, D, raw, groups)
    full = fit_law(n_cells, d_cells, means, **fit_kwargs)
    refit_kwargs = {**fit_kwargs, "starts": [full.theta]}
    draws = np.random.default_rng(seed).integers(0, full.n_cells, size=(n_boot, full.n_cells))
    seeds = np.random.default_rng([seed, 1])
    rows, failed = [], 0
    for idx in draws:
        resampled = np.array(
            [raw[rng_pick(seeds, members[i])].mean() if members[i].size > 1 else means[i] for i in idx]
        )
        try:
            rows.append(_row(fit_law(n_cells[idx], d_cells[idx], resampled, **refit_kwargs).law))
        except FitError:
            failed += 1
    if not rows:
        raise FitError(f"scaling bootstrap: all {n_boot} refits failed; expected at least one to converge")
    samples = np.array(rows)
    intervals = {name: _interval(samples[:, i], level) for i, name in enumerate(COLUMNS)}
    return Bootstrap(full, samples, intervals, level, n_boot, failed, seed)


def rng_pick(rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
    """`rows.size` of `rows` drawn with replacement."""
    return rows[rng.integers(0, rows.size, size=rows.size)]


def holdout(
    N, D, loss, compute, *, n_holdout: int | None = None, fraction: float = 0.15, **fit_kwargs
) -> dict:
    """Fit on all cells but the `n_holdout` of largest compute (default: `fraction` of them, at least 1)
    and predict those: does the law extrapolate to the largest budgets?

    Returns the law fitted on the rest, `n_fit`, one row per held-out cell (index into the inputs, N,
    D, compute, actual, predicted, rel_error = (predicted - actual) / actual) and their
    `mean_abs_rel_error`. Ties in compute at the cut are broken by input order.
    """
    N, D, loss, compute = (np.asarray(v, dtype=float).ravel() for v in (N, D, loss, compute))
    if compute.size != N.size:
        raise FitError(
            f"scaling holdout: got {compute.size} compute values for {N.size} cells, expected one per cell"
        )
    n_holdout = max(1, round(fraction * N.size)) if n_holdout is None else n_holdout
    if not 1 <= n_holdout < N.size:
        raise FitError(f"scaling holdout: n_holdout = {n_holdout}, expected 1 to {N.size - 1}")
    order = np.argsort(-compute, kind="stable")
    held, kept = np.sort(order[:n_holdout]), np.sort(order[n_holdout:])
    fit = fit_law(N[kept], D[kept], loss[kept], **fit_kwargs)
    predicted = fit.law.predict(N[held], D[held])
    rel = (predicted - loss[held]) / loss[held]
    rows = [
        {
            "index": int(i),
            "N": float(N[i]),
            "D": float(D[i]),
            "compute": float(compute[i]),
            "actual": float(loss[i]),
            "predicted": float(p),
            "rel_error": float(r),
        }
        for i, p, r in zip(held, predicted, rel)
    ]
    return {
        "law": fit.law.as_dict(),
        "n_fit": int(kept.size),
        "rows": rows,
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
    }


def compare(boot_a: Bootstrap, boot_b: Bootstrap, level: float = 0.95) -> list[dict]:
    """For alpha, beta, E, a, b: both estimates with their intervals, and b - a with an interval.

    The two bootstraps resample different sweeps independently, so pairing sample i of one with
    sample i of the other draws from the joint distribution (the longer sample is cut to the shorter);
    the difference's percentile interval excluding 0 is the `supported` claim that the sweeps differ.
    """
    n = min(len(boot_a.samples), len(boot_b.samples))
    rows = []
    for name in ("alpha", "beta", "E", "a", "b"):
        sa, sb = boot_a.column(name)[:n], boot_b.column(name)[:n]
        lo, hi = _interval(sb - sa, level)
        rows.append(
            {
                "name": name,
                "estimate_a": boot_a.estimate[name],
                "interval_a": _interval(sa, level),
                "estimate_b": boot_b.estimate[name],
                "interval_b": _interval(sb, level),
                "difference": boot_b.estimate[name] - boot_a.estimate[name],
                "interval_difference": (lo, hi),
                "supported": bool(lo > 0 or hi < 0),
            }
        )
    return rows
