"""Run a stage under MLflow: resolved config as params, metrics, artifacts and provenance tags.

Every DVC stage's entry point calls `execute(stage, cfg)`. It validates the config groups the stage
declares, takes a lock so that two runs of the same stage instance never overlap, and on rank zero
opens one MLflow run (experiment `logger.experiment`, store `logger.tracking_uri`, a local sqlite file
by default) tagged with the git commit, the DVC stage (`finetune@<row>` for each row that the
finetune stage's multirun fine-tunes) and a hash of the prepared data, with the
stage's own (validated, resolved) config as params. The stage's work returns a `StageResult`, whose
metrics and artifacts are logged. A run left RUNNING by a killed process is continued when the stage
resumes, else marked KILLED. Other ranks of a multi-process run log nothing. A `LmforgeError` ends
the process with one line on stderr, exit 2.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmforge.errors import ConfigError, LmforgeError
from lmforge.io import exclusive, sha256_files
from lmforge.stage import Plan, Stage, StageResult

LOCKS = Path(".lmforge/locks")  # one lock file per stage instance: two runs of one stage never overlap


def active_run() -> tuple[str, str] | None:
    """(run id, tracking uri) of the run `execute` opened, for Lightning's MLFlowLogger; else None."""
    if "mlflow" not in sys.modules:
        return None
    import mlflow

    run = mlflow.active_run()
    return (run.info.run_id, mlflow.get_tracking_uri()) if run else None


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists become strings (MLflow params are flat key/values)."""
    if isinstance(values, dict):
        out: dict[str, Any] = {}
        for key, value in values.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): values if not isinstance(values, list) else str(values)}


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def data_hash(prepared_dir: str | os.PathLike) -> str:
    """sha256 over the prepared splits (first 16 hex digits), or 'none' before `prepare` ran."""
    files = sorted(Path(prepared_dir).glob("*.jsonl"))
    return sha256_files(files)[:16] if files else "none"


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


def refuse_unread_additions(stage: Stage) -> None:
    """A `+key=value` on the command line adds a key; one that the stage never reads would be ignored
    in silence (a typo of a real key, a group of another stage), so it is refused in one line."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    for override in HydraConfig.get().overrides.task:
        if not override.startswith("+"):
            continue
        key = override.lstrip("+").split("=", 1)[0]
        if key.split(".", 1)[0] not in stage.reads:
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
    refuse_unread_additions(stage)
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
        return _report(_tracked(stage, plan, cfg, label, str(logger.tracking_uri), str(logger.experiment)))


def _tracked(stage: Stage, plan: Plan, cfg: DictConfig, label: str, uri: str, experiment: str):
    import mlflow

    mlflow.set_tracking_uri(uri)
    with _store_lock(uri):  # the first use of a new sqlite store creates its tables: one process at a time
        mlflow.set_experiment(experiment)
    tags = {
        "git_commit": git_commit(),
        "dvc_stage": label,
        "data_hash": data_hash(cfg.data.prepared_dir) if "data" in cfg else "none",
    }
    if owned := stage.folders(plan):  # how a later run that extends this one finds it
        tags["out_dir"] = str(owned[0])
    if extends := stage.extends and stage.extends(plan):  # a new run, linked to the one it extends
        tags.update(extends=str(extends), extends_run_id=_run_of_folder(str(extends)))
    # before a run is opened: a refused resume (train.resume=true over another config) raises here
    run_id = _settle_unfinished_runs(label, resume=stage.resumes(plan))
    status_before = mlflow.get_run(run_id).info.status if run_id else None
    try:
        with mlflow.start_run(run_id=run_id, run_name=None if run_id else label, tags=tags):
            if run_id is None:
                mlflow.log_params(flatten(plan.values))
                mlflow.log_text(OmegaConf.to_yaml(OmegaConf.create(plan.values)), "config.yaml")
            result = stage.work(plan)
            mlflow.log_metrics({k: float(v) for k, v in result.metrics.items()})
            for path in result.artifacts:
                if Path(path).is_file():
                    mlflow.log_artifact(path, artifact_path=Path(path).parent.name)
    except LmforgeError:
        if status_before == "FINISHED":  # a refused continuation changed nothing: the record stays finished
            from mlflow.tracking import MlflowClient

            MlflowClient().set_terminated(run_id, status="FINISHED")
        raise
    return result


def _run_of_folder(folder: str) -> str:
    """The newest finished MLflow run that wrote `folder` (its `out_dir` tag), or 'none'."""
    import mlflow

    runs = mlflow.search_runs(
        filter_string=f"tags.out_dir = '{folder}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        output_format="list",
        max_results=1,
    )
    return runs[0].info.run_id if runs else "none"


def _settle_unfinished_runs(label: str, resume: bool) -> str | None:
    """A resumed stage continues the newest MLflow run of the same stage (the one that wrote the
    checkpoint it continues); every other run left RUNNING by a killed process is marked KILLED.
    Returns the run id to continue, if any."""
    import mlflow
    from mlflow.tracking import MlflowClient

    runs = mlflow.search_runs(
        filter_string=f"tags.dvc_stage = '{label}'",
        order_by=["attributes.start_time DESC"],
        output_format="list",
        max_results=100,
    )
    keep = runs[0].info.run_id if resume and runs else None
    client = MlflowClient()
    for run in runs:
        if run.info.status == "RUNNING" and run.info.run_id != keep:
            client.set_terminated(run.info.run_id, status="KILLED")
    return keep


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    if uri.startswith("sqlite:///"):
        with exclusive(Path(uri.removeprefix("sqlite:///") + ".lock"), "the MLflow store", wait=True):
            yield
    else:
        yield


def _report(result: StageResult) -> StageResult:
    for name, value in sorted(result.metrics.items()):
        print(f"{name}: {value:.6g}")
    return result
