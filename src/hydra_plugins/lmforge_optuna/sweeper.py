"""Hydra's `--multirun` with a sampler instead of a grid: each trial is one job of a stage, its
settings drawn by Optuna (TPE by default) from a search space written in Hydra's sweep syntax, its
score read from what the job returned.

    python -m scripts.search pretrain --multirun sweep=search_decoder
    python -m scripts.search pretrain --multirun sweep=search_decoder hydra.sweeper.n_trials=30

The space is `hydra.sweeper.params` (a preset under conf/sweep/ sets it) plus any sweep on the command
line: `interval(a, b)` is a float range (`tag(log, interval(a, b))` on a log scale,
`int(interval(a, b))` an integer one), `choice(a, b, c)` and `range(a, b, step)` are categories. Other
overrides are fixed for every trial.

A study keeps everything in its folder (`dir`): its Optuna journal (study.journal), so running the
same command again resumes it until `n_trials` trials have finished (a trial left RUNNING by a killed
study is recorded as FAILED); trial n's Hydra job folder `<dir>/<n>/`, since trial n runs as Hydra job
n with `hydra.sweep.dir=<dir>`, so `${hydra:job.num}` and `${hydra:sweep.dir}` name its outputs the
same way on every resume. A trial whose objective is NaN (a diverged run) is recorded as FAILED and
the search goes on; a job that raises stops the study (a crash is a bug to chase, not a sample).
`study.json` beside the journal lists every trial (state, settings, score, the job's folder) and the
best one.

Hydra imports this module at the start of every run (it scans `hydra_plugins`), so Optuna is
imported only when a study runs. The class must live under `hydra_plugins` for Hydra to accept it.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from lmforge.errors import ConfigError, DataError
from lmforge.io import write_json

log = logging.getLogger(__name__)

SAMPLERS = ("tpe", "random", "grid")
DIRECTIONS = ("minimize", "maximize")
RESULT = "result.json"  # what a trial's job leaves in its Hydra output folder: metric name -> value
JOURNAL = "study.journal"  # the study's Optuna journal, in the study's folder


class OptunaSweeper(Sweeper):
    def __init__(
        self,
        study: str,
        dir: str,
        objective: str,
        direction: str = "minimize",
        n_trials: int = 20,
        sampler: str = "tpe",
        seed: int = 0,
        n_startup_trials: int = 5,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.study, self.dir, self.objective = study, dir, objective
        self.direction, self.n_trials, self.sampler = direction, n_trials, sampler
        self.seed, self.n_startup_trials = seed, n_startup_trials
        self.params = dict(params or {})

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> None:
        import optuna
        from optuna.trial import TrialState

        check(self)
        searched = [f"{key}={value}" for key, value in self.params.items()] + list(arguments)
        space, fixed = search_space(searched)
        if not space:
            raise ConfigError(
                "hydra.sweeper.params: no setting to search; expected a sweep such as "
                "optim.lr='tag(log, interval(1e-3, 1e-2))' in the preset or on the command line"
            )
        folder = Path(self.dir)
        folder.mkdir(parents=True, exist_ok=True)
        storage = folder / JOURNAL
        journal = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(storage)))
        study = optuna.create_study(
            study_name=self.study,
            storage=journal,
            sampler=make_sampler(self),
            direction=self.direction,
            load_if_exists=True,
        )
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            log.warning("trial %d was left RUNNING by a study that stopped; recorded as FAILED", trial.number)
            study.tell(trial.number, state=TrialState.FAIL)
        finished = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)))
        n_trials, pending = self.n_trials, None
        # a grid: each combination once, in order; a resumed study runs those not yet tried
        if self.sampler == "grid":
            points = grid_points(space)
            tried = {tuple(sorted(t.params.items())) for t in study.get_trials(deepcopy=False)}
            pending = [point for point in points if tuple(sorted(point.items())) not in tried]
            n_trials = min(n_trials, len(points))
        log.info("study %s (%s): %d of %d trials finished", self.study, storage, finished, n_trials)
        while finished < n_trials and pending != []:
            if pending:
                study.enqueue_trial(pending.pop(0))  # the sampler draws nothing for a queued trial
            trial = study.ask(space)
            drawn = tuple(f"{key}={value}" for key, value in trial.params.items())
            overrides = (f"hydra.sweep.dir={folder}", *fixed, *drawn)  # the job's folder: <dir>/<n>
            (job,) = self.launcher.launch([overrides], initial_job_idx=trial.number)
            trial.set_user_attr("folder", os.path.relpath(job.hydra_cfg.hydra.runtime.output_dir))
            value = objective_value(job, self.objective, trial.number)
            if math.isnan(value):
                log.warning(
                    "trial %d: %s is NaN (the run diverged); recorded as FAILED", trial.number, self.objective
                )
                study.tell(trial, state=TrialState.FAIL)
            else:
                study.tell(trial, value)
            finished += 1
        write_json(folder / "study.json", summary(study, self, searched))


def check(sweeper: OptunaSweeper) -> None:
    """One line for a setting of the sweeper itself that cannot run."""
    for key, allowed in (("sampler", SAMPLERS), ("direction", DIRECTIONS)):
        if getattr(sweeper, key) not in allowed:
            got = getattr(sweeper, key)
            raise ConfigError(f"hydra.sweeper.{key}: got {got!r}, expected one of {', '.join(allowed)}")
    for key, least in (("n_trials", 1), ("n_startup_trials", 0), ("seed", 0)):
        got = getattr(sweeper, key)
        if not isinstance(got, int) or isinstance(got, bool) or got < least:
            raise ConfigError(f"hydra.sweeper.{key}: got {got!r}, expected an integer >= {least}")
    for key in ("study", "dir", "objective"):
        if not isinstance(getattr(sweeper, key), str) or not getattr(sweeper, key):
            raise ConfigError(
                f"hydra.sweeper.{key}: got {getattr(sweeper, key)!r}, expected a non-empty string"
            )


def search_space(arguments: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Overrides -> (name -> Optuna distribution for each sweep, the fixed overrides as written).
    A later override of a key replaces an earlier one: the command line wins over the preset."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(arguments))
    except Exception as err:  # Hydra's grammar error names the bad override
        raise ConfigError(f"hydra.sweeper.params: {str(err).splitlines()[0]}") from None
    space: dict[str, Any] = {}
    fixed: dict[str, str] = {}
    for override in parsed:
        key = override.get_key_element()
        space.pop(key, None)
        fixed.pop(key, None)
        if override.is_sweep_override():
            space[key] = distribution(override)
        else:
            fixed[key] = override.input_line
    return space, list(fixed.values())


def distribution(override: Override) -> Any:
    """The Optuna distribution of one sweep override."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    key = override.get_key_element()
    if override.is_interval_sweep():
        interval = override.value()
        low, high, log_scale = interval.start, interval.end, "log" in interval.tags
        if not low < high or (log_scale and low <= 0):
            raise ConfigError(
                f"{key}: interval({low}, {high}) is empty or not positive on a log scale; "
                "expected low < high (and low > 0 with tag(log, ...))"
            )
        if isinstance(low, int) and isinstance(high, int):
            return IntDistribution(low, high, log=log_scale)
        return FloatDistribution(float(low), float(high), log=log_scale)
    values = list(override.sweep_string_iterator())  # choice(...) and range(...), as Hydra would pass them
    if len(set(values)) < 2:
        raise ConfigError(
            f"{key}: {override.input_line} offers {len(set(values))} value; expected at least two"
        )
    return CategoricalDistribution(values)


def grid_points(space: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the categories, in order (a grid over an interval has no points). Each is
    queued as a fixed trial: Optuna's GridSampler can stop a study only from inside `Study.optimize`."""
    from optuna.distributions import CategoricalDistribution

    for key, dist in space.items():
        if not isinstance(dist, CategoricalDistribution):
            raise ConfigError(
                f"{key}: an interval cannot be a grid axis; expected choice(...) or range(...) with sampler=grid"
            )
    names = list(space)
    return [dict(zip(names, values)) for values in itertools.product(*(space[n].choices for n in names))]


def make_sampler(sweeper: OptunaSweeper) -> Any:
    import optuna

    if sweeper.sampler in ("random", "grid"):  # a grid's trials are all queued: the sampler draws none
        return optuna.samplers.RandomSampler(seed=sweeper.seed)
    return optuna.samplers.TPESampler(seed=sweeper.seed, n_startup_trials=sweeper.n_startup_trials)


def objective_value(job: JobReturn, objective: str, number: int) -> float:
    """The trial's score: `objective` from the mapping the job returned, or else from the result.json
    it wrote in its output folder (`python -m scripts.search` writes one for any stage)."""
    if job.status != JobStatus.COMPLETED:
        job.return_value  # noqa: B018 - re-raises the job's own exception: the study stops on a crash
    metrics = job.return_value
    if not isinstance(metrics, Mapping):
        path = Path(str(job.hydra_cfg.hydra.runtime.output_dir)) / RESULT
        try:
            metrics = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise DataError(
                f"trial {number}: no readable {path}; expected the job's metrics (run the study through "
                "`python -m scripts.search <stage>`, which records them)"
            ) from None
    if objective not in metrics:
        raise ConfigError(
            f"hydra.sweeper.objective: trial {number} reported no {objective!r}; expected one of "
            f"{', '.join(sorted(metrics))}"
        )
    return float(metrics[objective])


def summary(study: Any, sweeper: OptunaSweeper, searched: Sequence[str]) -> dict[str, Any]:
    """Every trial and the best one, with the overrides the study ran under (study.json)."""
    trials = [
        {
            "number": t.number,
            "state": t.state.name,
            "params": t.params,
            "value": t.value,
            "folder": t.user_attrs.get("folder"),
        }
        for t in study.get_trials(deepcopy=False)
    ]
    complete = [t for t in trials if t["state"] == "COMPLETE"]
    pick = min if sweeper.direction == "minimize" else max
    best = pick(complete, key=lambda t: t["value"]) if complete else None
    return {
        "study": sweeper.study,
        "sampler": sweeper.sampler,
        "seed": sweeper.seed,
        "objective": sweeper.objective,
        "direction": sweeper.direction,
        "trials": trials,
        "overrides": list(searched),
        "best": best,
    }
