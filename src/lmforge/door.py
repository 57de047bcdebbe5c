"""The stage door: what every `pipelines/<stage>.py` runs. Hydra composes the config (`cli`), the
stage validates the groups it declares into its plan, a lock keeps two runs of one stage instance
(and of one output folder) from overlapping, and the work runs; a `LmforgeError` ends the process
with one line on stderr, exit 2. With the logger on (`logger.enabled`), rank zero runs the work
inside an MLflow run (`lmforge.tracking.runs.tracked`); other ranks of a multi-process run log
nothing. The door imports tracking only then: tracking observes a run and cannot change an output,
so it is no stage's dependency (scripts/dvc_yaml.py's `OBSERVABILITY`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from omegaconf import DictConfig

from lmforge.errors import ConfigError, LmforgeError
from lmforge.io import exclusive
from lmforge.stage import Stage, StageResult

LOCKS = Path(".lmforge/locks")  # one lock file per stage instance: two runs of one stage never overlap


RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")  # Lightning's, in its order


def is_rank_zero() -> bool:
    """Lightning's rank when Lightning set it, else the launcher's (torchrun, SLURM) environment as
    Lightning reads it. Stages that train import Lightning anyway; the others (data, tokenizers,
    tasks, summaries) are spared its import, 6-7 s of every process on a 2-core CPU."""
    from lightning_utilities.core.rank_zero import rank_zero_only

    rank = getattr(rank_zero_only, "rank", None)
    if rank is None:
        rank = next((int(os.environ[k]) for k in RANK_VARIABLES if k in os.environ), 0)
    return rank == 0


def cli(stage: Stage, entry_file: str, config_name: str = "config") -> None:
    """What `pipelines/<stage>.py` runs: Hydra composes `conf/<config_name>.yaml` with the command line
    (`--multirun` too) and each job calls `execute`. Hydra's own refusals (an unknown preset, row or
    key, a malformed override) end in one line and exit 2, like every other bad input."""
    import hydra
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    conf = Path(entry_file).resolve().parents[1] / "conf"

    @hydra.main(config_path=str(conf), config_name=config_name, version_base="1.3")
    def main(cfg: DictConfig) -> None:
        execute(stage, cfg)

    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises its errors instead of printing them on many lines
    try:
        main()
    except MissingConfigException as err:  # "Could not find 'model/foo'" + the options, one per line
        wanted = getattr(err, "missing_cfg_file", None) or str(err).splitlines()[0]
        group, _, name = str(wanted).rpartition("/")
        options = [line.strip() for line in str(err).split("Available options", 1)[-1].splitlines()[1:]]
        options = [o for o in options if o and "=" not in o and not o.startswith("Config search path")]
        listed = (
            f", expected one of {', '.join(options)}" if options else f", expected a file in conf/{group}/"
        )
        print(f"error: config: {group}={name}: no such preset{listed}", file=sys.stderr)
        sys.exit(2)
    except (HydraException, OmegaConfBaseException) as err:
        cause = err.__cause__
        detail = str(cause).splitlines()[0] if cause else ""
        override = getattr(err, "override", None)  # a malformed override names itself
        text = " ".join(part for part in (str(err).splitlines()[0], detail) if part)
        text = f"{override}: {text}" if override else text
        print(f"error: config: {text}; expected keys and presets that exist under conf/", file=sys.stderr)
        sys.exit(2)


def refuse_ignored_overrides(stage: Stage) -> None:
    """A command-line override the stage would ignore in silence is refused in one line: a `+key=value`
    that adds a key the stage never reads (a typo of a real key, a group of another stage), and a key
    of a group it reads that it decides itself (`Stage.decided`: fine-tuning's `trainer.max_steps`)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    for override in HydraConfig.get().overrides.task:
        key = override.lstrip("+~").split("=", 1)[0]
        if key in stage.decided:
            raise ConfigError(
                f"config: {override}: stage {stage.name} decides '{key}' itself, from {stage.decided[key]}; "
                f"expected {stage.decided[key]} changed instead"
            )
        if override.startswith("+") and key.split(".", 1)[0] not in stage.reads:
            raise ConfigError(
                f"config: {override}: stage {stage.name} never reads '{key}'; expected one of its groups "
                f"({', '.join(stage.reads)}), set without '+'"
            )


def execute(stage: Stage, cfg: DictConfig) -> StageResult:
    """Run one stage; see the module docstring. Exits with status 2 on a LmforgeError."""
    try:
        return _execute(stage, cfg)
    except LmforgeError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def _execute(stage: Stage, cfg: DictConfig) -> StageResult:
    refuse_ignored_overrides(stage)
    plan = stage.visible(cfg)  # validated at the door: a bad value fails before any work
    label = stage.label(cfg)
    logger = cfg.get("logger") or {}
    if not is_rank_zero():
        return _report(stage.work(plan))
    with contextlib.ExitStack() as locks:  # a refused run has touched nothing, MLflow included
        locks.enter_context(exclusive(LOCKS / f"{label}.lock", f"stage {label}"))
        for folder in map(Path, stage.folders(plan)):
            locks.enter_context(exclusive(folder.parent / f".{folder.name}.lock", f"output folder {folder}"))
        if not logger.get("enabled", False):
            return _report(stage.work(plan))
        from lmforge.tracking.runs import tracked  # observability: imported only for a tracked run

        return _report(tracked(stage, plan, cfg, label, str(logger.tracking_uri), str(logger.experiment)))


def _report(result: StageResult) -> StageResult:
    for name, value in sorted(result.metrics.items()):
        print(f"{name}: {value:.6g}")
    return result
