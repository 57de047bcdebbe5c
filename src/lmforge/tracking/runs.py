"""A stage's MLflow run: one run per stage in one run per pipeline, true params, metrics, artifacts,
inputs, system metrics; child runs for fine-tuning's seeds. The door (`lmforge.door`) calls
`tracked` on rank zero when the logger is on.

Hierarchy. The run is a child of one parent run per pipeline invocation: the `dvc repro` or `dvc exp
run` that started it (found by its process; `LMFORGE_PIPELINE=<name>` names an invocation
explicitly), or the Hydra multirun it belongs to. A stage that sweeps a multirun under DVC
(fine-tuning's rows, distillation's runs) has a run of its own between the two; fine-tuning's seeds
and the scaling sweep's cells are children of their row and sweep. A run started alone, by hand, has
no parent. An evaluation is tagged with the run whose model it evaluates (`evaluates_run_id`).

Tags on every run: `git_commit` and `git_dirty`, `dvc_stage` (DVC's own name: `pretrain@decoder`,
`finetune`), `lmforge_job` (the instance: `finetune@<row>`), `experiment` (the overlay), `data_hash`
(the prepared data), `seed`. Names read `<job> <MM-DD HH:MM:SS>`, so no two runs share one.

Params are the stage's validated config, flattened once (`model.d_model`), with what the run decided
itself replacing the configured value (the model's vocabulary size is the tokenizer's). Artifacts
are the reports and figures, under fixed paths (`report/`, `plots/`) so runs compare; checkpoints
and data are never uploaded: a training stage logs its final model once (`lmforge.tracking.models`)
and its datasets as run inputs (digest, source, rows). System metrics (CPU, memory) are sampled on
every run. An evaluation with a `score` registers the evaluated model (`lmforge.tracking.registry`).
A run left RUNNING by a killed process is continued when the stage resumes, else marked KILLED; a
run continued by a later invocation keeps the parent it started under and is tagged
`lmforge_resumed_by` with the run of the invocation that continued it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from lmforge.errors import ConfigError, LmforgeError
from lmforge.io import exclusive, sha256_files
from lmforge.logged_model import log_text_model
from lmforge.stage import Plan, Stage, flatten
from lmforge.tracking.registry import register


def active_run() -> tuple[str, str] | None:
    """(run id, tracking uri) of the run `execute` opened, for Lightning's MLFlowLogger; else None."""
    if "mlflow" not in sys.modules:
        return None
    import mlflow

    run = mlflow.active_run()
    return (run.info.run_id, mlflow.get_tracking_uri()) if run else None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit() -> str:
    return (_git("rev-parse", "HEAD") or "").strip() or "unknown"


# What decides a run: its code and config. A `dvc repro` rewrites its outputs (reports/, dvc.lock)
# before the next stage starts, so a dirty flag over every tracked file would be "true" for every
# stage after the first; the flag says whether the code or config that ran differs from the commit.
CODE_PATHS = ("src", "conf", "pipelines", "dvc.yaml", "pyproject.toml", "constraints.txt", ":(exclude)*.lock")


def git_dirty() -> str:
    """'true' when the tracked code or config differs from the commit, 'unknown' outside git."""
    status = _git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    return "unknown" if status is None else str(bool(status.strip())).lower()


def data_hash(prepared_dir: str | os.PathLike) -> str:
    """sha256 over the prepared splits (first 16 hex digits), or 'none' before `prepare` ran."""
    files = sorted(Path(prepared_dir).glob("*.jsonl"))
    return sha256_files(files)[:16] if files else "none"


class Invocation(NamedTuple):
    """The pipeline invocation a run belongs to: its key (tag `lmforge_invocation`) and parent run name."""

    key: str
    name: str


def invocation() -> Invocation | None:
    """`LMFORGE_PIPELINE`, else the `dvc` process that runs this stage (DVC sets `DVC_STAGE` in its
    commands' environment), else this process when it runs a Hydra multirun; None for a lone run."""
    if named := os.environ.get("LMFORGE_PIPELINE"):
        return Invocation(f"env-{named}", named)
    if "DVC_STAGE" in os.environ:
        import psutil

        for process in psutil.Process().parents():
            try:
                command = process.cmdline()
            except (psutil.Error, OSError):
                continue
            at = next((i for i, part in enumerate(command[:3]) if Path(part).name == "dvc"), None)
            if at is not None:
                started = process.create_time()
                words = " ".join(command[at + 1 :])[:80]
                stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(started))
                return Invocation(f"dvc-{process.pid}-{int(started)}", f"dvc {words} {stamp}")
    if _multirun():
        import psutil

        started = psutil.Process().create_time()
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(started))
        return Invocation(f"multirun-{os.getpid()}-{int(started)}", f"multirun {sys.argv[0]} {stamp}")
    return None


def _multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _overlay() -> str:
    """The experiment overlay Hydra composed (`experiment=smoke`), or 'none'."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return "none"
    return str(HydraConfig.get().runtime.choices.get("experiment") or "none")


# The provenance tags of every run, each from (config, job label); a child run inherits them.
RUN_TAGS: dict[str, Callable[[DictConfig, str], str]] = {
    "git_commit": lambda cfg, label: git_commit(),
    "git_dirty": lambda cfg, label: git_dirty(),
    "dvc_stage": lambda cfg, label: os.environ.get("DVC_STAGE", label),
    "lmforge_job": lambda cfg, label: label,
    "experiment": lambda cfg, label: _overlay(),
    "data_hash": lambda cfg, label: data_hash(cfg.data.prepared_dir) if "data" in cfg else "none",
    "seed": lambda cfg, label: str(cfg.get("seed", "none")),
    "lmforge_host": lambda cfg, label: socket.gethostname(),
    "lmforge_process": lambda cfg, label: this_process(),
}


def this_process() -> str:
    """This process as `<pid>-<start time, whole seconds>`: a pid alone is reused."""
    import psutil

    return f"{os.getpid()}-{int(psutil.Process().create_time())}"


def alive(process: str) -> bool:
    """Whether the process `<pid>-<start time>` (of this host) still runs."""
    import psutil

    pid, _, started = process.partition("-")
    try:
        return int(psutil.Process(int(pid)).create_time()) == int(started)
    except (psutil.Error, ValueError, OSError):
        return False


def settle_orphans(client, experiment_id: str, keep: str | None = None) -> list[str]:
    """Mark KILLED every RUNNING run of this host whose process is gone (a stage killed with its
    `dvc repro`, the `dvc repro` run itself); runs of other hosts, runs that name no process and
    `keep` (the run this stage continues) stay. Returns the runs marked."""
    host, killed = socket.gethostname(), []
    for run in client.search_runs(
        [experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=5000
    ):
        tags = run.data.tags
        process = tags.get("lmforge_process")
        if run.info.run_id == keep or tags.get("lmforge_host") != host or not process or alive(process):
            continue
        client.set_terminated(run.info.run_id, status="KILLED")
        killed.append(run.info.run_id)
    return killed


def probe(uri: str, timeout: float = 5.0) -> None:
    """One line before anything is written when a tracking server does not answer (a refused
    connection at once, a silent host within `timeout` seconds), instead of MLflow's minutes of
    retries. Any HTTP answer counts, an authenticating server's 401 included."""
    import urllib.error
    import urllib.request

    if not uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout).close()
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err
        raise ConfigError(
            f"logger.tracking_uri: {uri} does not answer ({reason}); expected a running MLflow server "
            "there (fix MLFLOW_TRACKING_URI), or logger=none to run without tracking"
        ) from None


def run_tags(cfg: DictConfig, label: str) -> dict[str, str]:
    return {key: tag(cfg, label) for key, tag in RUN_TAGS.items()}


def _parent(client, experiment_id: str, tags: dict[str, str]) -> str | None:
    """The run this stage run hangs from: its invocation's (found or created), and under DVC, for a
    stage that runs a multirun, that stage's own run inside the invocation."""
    found = invocation()
    if found is None:
        return None
    common = {k: tags[k] for k in ("git_commit", "git_dirty", "experiment", "data_hash", "lmforge_host")}
    kind, _, process = found.key.partition("-")  # dvc-<pid>-<start>, multirun-<pid>-<start>, env-<name>
    top = _find_or_create(
        client,
        experiment_id,
        {"lmforge_invocation": found.key, "lmforge_level": "pipeline"},
        found.name,
        {**common, "lmforge_process": process} if kind in ("dvc", "multirun") else common,
    )
    if not (_multirun() and "DVC_STAGE" in os.environ):
        return top
    stage = os.environ["DVC_STAGE"]
    return _find_or_create(
        client,
        experiment_id,
        {"lmforge_invocation": found.key, "lmforge_level": "stage", "dvc_stage": stage},
        f"{stage} {time.strftime('%m-%d %H:%M:%S')}",
        {**common, "lmforge_process": tags["lmforge_process"], "mlflow.parentRunId": top},
    )


def _find_or_create(client, experiment_id: str, keys: dict[str, str], name: str, tags: dict[str, str]) -> str:
    query = " and ".join(f"tags.{k} = '{v}'" for k, v in keys.items())
    runs = client.search_runs([experiment_id], filter_string=query, max_results=1)
    if runs:
        return runs[0].info.run_id
    return client.create_run(experiment_id, run_name=name, tags={**keys, **tags}).info.run_id


def _ancestors(client, run_id: str) -> list[str]:
    out = []
    while parent := client.get_run(run_id).data.tags.get("mlflow.parentRunId"):
        out.append(parent)
        run_id = parent
    return out


def tracked(stage: Stage, plan: Plan, cfg: DictConfig, label: str, uri: str, experiment: str):
    import mlflow
    from mlflow.tracking import MlflowClient

    probe(uri)
    mlflow.set_tracking_uri(uri)
    tags = run_tags(cfg, label)
    with _store_lock(uri):  # the first use of a new sqlite store creates its tables: one process at a time
        client = MlflowClient()  # opens the store: inside the lock
        experiment_id = mlflow.set_experiment(experiment).experiment_id
        parent = _parent(client, experiment_id, tags)
    if parent is not None:
        tags["mlflow.parentRunId"] = parent
    if owned := stage.folders(plan):  # how a later run that extends or evaluates this one finds it
        tags["out_dir"] = str(owned[0])
    if extends := stage.extends and stage.extends(plan):  # a new run, linked to the one it extends
        tags.update(extends=str(extends), extends_run_id=_run_of_folder(str(extends)))
    if starts := stage.starts_from and stage.starts_from(plan):  # the model a fine-tuning row starts from
        tags.update(starts_from=str(starts), starts_from_run_id=_run_of_folder(str(starts)))
    evaluated = None
    if evaluates := stage.evaluates and stage.evaluates(plan):  # the training run whose model it scores
        evaluated = _run_of_folder(str(evaluates))
        tags.update(evaluates=str(evaluates), evaluates_run_id=evaluated)
    # before a run is opened: a refused resume (train.resume=true over another config) raises here
    run_id = _settle_unfinished_runs(label, resume=stage.resumes(plan))
    settle_orphans(client, experiment_id, keep=run_id)  # no run stays RUNNING without its process
    if run_id is not None and parent is not None:
        started_under = client.get_run(run_id).data.tags.get("mlflow.parentRunId")
        if started_under not in (None, parent):  # a run continued by a later invocation stays where it
            tags["mlflow.parentRunId"] = started_under  # started, and names the one that continued it
            tags["lmforge_resumed_by"] = parent
    status_before = mlflow.get_run(run_id).info.status if run_id else None
    name = None if run_id else f"{label} {time.strftime('%m-%d %H:%M:%S')}"
    status, opened = "FAILED", run_id
    try:
        with (
            mlflow.start_run(run_id=run_id, run_name=name, tags=tags) as run,
            _system_metrics(run.info.run_id),
        ):
            opened = run.info.run_id
            if run_id is None:
                mlflow.log_text(OmegaConf.to_yaml(OmegaConf.create(plan.values)), "report/config.yaml")
            try:
                result = stage.work(plan)
            except BaseException:
                # the config of a failed run, but never in place of its error
                with contextlib.suppress(Exception):
                    _log_params(plan.values, {}, resumed=run_id is not None)
                raise
            _log_params(plan.values, result.params, resumed=run_id is not None)
            mlflow.log_metrics({k: float(v) for k, v in result.metrics.items()})
            _log_artifacts(result.artifacts)
            _log_inputs(result.inputs)
            if result.model is not None:
                mlflow.set_tag("lmforge_model_uri", log_text_model(result.model))
            if stage.score is not None and evaluated not in (None, "none"):
                register(client, evaluated, result.metrics, stage.score, tags["experiment"], opened)
            elif stage.score is not None and stage.registers is not None and result.model is not None:
                name = stage.registers(plan)  # a stage that scores its own model (fine-tuning's rows)
                register(client, opened, result.metrics, stage.score, tags["experiment"], opened, name)
        status = "FINISHED"
    except LmforgeError:
        if status_before == "FINISHED":  # a refused continuation changed nothing: the record stays finished
            client.set_terminated(run_id, status="FINISHED")
            status = "FINISHED"
        raise
    finally:  # the invocation doing the work ends with its latest stage (a continued run's included)
        for ancestor in [parent, *_ancestors(client, parent)] if opened and parent else []:
            if client.get_run(ancestor).info.status != "FAILED":  # the latest stage's end is the pipeline's
                client.set_terminated(ancestor, status=status)
    return result


@contextlib.contextmanager
def _system_metrics(run_id: str, interval: float = 5.0) -> Iterator[None]:
    """MLflow's CPU, memory, disk and network samples every `interval` seconds while the stage works,
    and one more when it ends, so that a run shorter than the interval has one too."""
    import logging

    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # no start/stop lines per stage
    monitor = SystemMetricsMonitor(run_id, sampling_interval=interval, resume_logging=True)
    monitor.start()
    try:
        yield
    finally:
        monitor.finish()
        monitor.collect_metrics()
        monitor.publish_metrics(monitor.aggregate_metrics())
        monitor.mlflow_logger.flush()


def _log_params(values: dict, decided: dict, resumed: bool) -> None:
    """The config as validated, with what the run decided in place of the configured value."""
    import mlflow
    from mlflow.exceptions import MlflowException

    params = {**flatten(values), **flatten(decided)}
    try:
        mlflow.log_params(params)
    except MlflowException:
        if not resumed:  # a resumed run logged them already, the same values
            raise


NOT_UPLOADED = {".ckpt", ".pt", ".bin", ".safetensors", ".npy", ".jsonl"}  # checkpoints and data


PLOTS = {".png", ".svg", ".csv", ".html"}


MAX_ARTIFACT_BYTES = 5_000_000


def artifact_folder(path: Path) -> str | None:
    """Where a stage output goes in the run: `plots/` (figures, curves) or `report/`; None for what is
    never uploaded (checkpoints, data, anything over 5 MB)."""
    if path.suffix in NOT_UPLOADED or path.stat().st_size > MAX_ARTIFACT_BYTES:
        return None
    return "plots" if path.suffix in PLOTS else "report"


def _log_artifacts(paths: list[str]) -> None:
    import mlflow

    taken: set[str] = set()
    for path in map(Path, paths):
        if not path.is_file() or (folder := artifact_folder(path)) is None:
            continue
        name = path.name if path.name not in taken else f"{path.parent.name}_{path.name}"
        taken.add(name)
        mlflow.log_artifact(
            str(path), artifact_path=folder if name == path.name else f"{folder}/{path.parent.name}"
        )


def _log_inputs(inputs: dict[str, Any]) -> None:
    """Each dataset the run read: digest of its files, source path, rows, under its context."""
    import mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    for context, data in inputs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            source = resolve_dataset_source(str(Path(data.source).resolve()))
        digest = sha256_files(sorted(map(Path, data.files)))[:16]
        dataset = MetaDataset(source, name=f"{Path(data.source).name}/{context}", digest=digest)
        mlflow.log_input(dataset, context=context, tags={"rows": str(data.rows)})


def open_child(name: str, tags: dict[str, str] | None = None) -> tuple[str, str] | None:
    """A child run of the active run (fine-tuning seeds), with its tags; (run id, tracking uri), or
    None when no run is active. Close it with `close_child`."""
    active = active_run()
    if active is None:
        return None
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=active[1])
    parent = client.get_run(active[0])
    inherited = inherited_tags(parent.data.tags, name)
    run = client.create_run(
        parent.info.experiment_id,
        run_name=f"{inherited['lmforge_job']} {time.strftime('%m-%d %H:%M:%S')}",
        tags={**inherited, **(tags or {}), "mlflow.parentRunId": active[0]},
    )
    return run.info.run_id, active[1]


def inherited_tags(parent: dict[str, str], name: str) -> dict[str, str]:
    """A child's tags: its parent's provenance (commit, stage, overlay, data), its own job name."""
    keep = {k: v for k, v in parent.items() if k in RUN_TAGS}
    return {**keep, "lmforge_job": f"{parent.get('lmforge_job', 'run')}/{name}"}


def close_child(child: tuple[str, str] | None, metrics: dict[str, float], status: str = "FINISHED") -> None:
    if child is None:
        return
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=child[1])
    for key, value in metrics.items():
        client.log_metric(child[0], key, float(value))
    client.set_terminated(child[0], status=status)


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
        filter_string=f"tags.lmforge_job = '{label}'",
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
