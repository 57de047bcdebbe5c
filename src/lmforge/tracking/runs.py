"""A stage's MLflow run: one run per stage in one run per pipeline, true params, metrics, artifacts,
inputs, system metrics; child runs for fine-tuning's seeds. The door (`lmforge.door`) calls
`tracked` on rank zero when the logger is on.

Hierarchy. The run is a child of one parent run per pipeline invocation: the `dvc repro` or `dvc exp
run` that started it (found by its process; `LMFORGE_PIPELINE=<name>` names an invocation
explicitly), or the Hydra multirun it belongs to. A stage that sweeps a multirun under DVC
(fine-tuning's rows, distillation's runs) has a run of its own between the two; fine-tuning's seeds
and the scaling sweep's cells are children of their row and sweep. A run started alone, by hand, has
no parent. An evaluation is tagged with the run whose model it evaluates (`evaluates_run_id`).
A parent is RUNNING while a stage under it runs: a stage's start reopens it, a lone stage's end ends
it (the latest stage's end is the pipeline's), and the rows of a multirun leave theirs RUNNING until
their process exits, so a kill between two rows leaves them for the next invocation to mark KILLED.

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

import atexit
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from lmforge.errors import ConfigError, LmforgeError
from lmforge.io import exclusive, sha256_files
from lmforge.stage import Plan, Stage, flatten
from lmforge.tracking.outbox import append_journal, brief, close_all, close_outbox, journal_path, say
from lmforge.tracking.record import (
    FLUSH_TIMEOUT_S,
    _log_params,
    backfill,
    end_ancestors,
    send_child_end,
    send_or_journal,
)


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
        found = psutil.Process(int(pid))
        return int(found.create_time()) == int(started) and found.status() != psutil.STATUS_ZOMBIE
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
        if journal_path(run.info.run_id).is_file():  # its end waits in the journal: the backfill ends it
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
    for name, value in HTTP_DEFAULTS.items():  # a few quick retries: the outbox waits out an outage
        os.environ.setdefault(name, value)
    mlflow.set_tracking_uri(uri)
    backfill(uri)  # what earlier runs could not send, first
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
    status, final = "FAILED", None
    run = mlflow.start_run(run_id=run_id, run_name=name, tags=tags)
    opened = run.info.run_id
    ancestors = [parent, *_ancestors(client, parent)] if parent else []
    reopen(client, ancestors)
    flush = float((cfg.get("logger") or {}).get("flush_timeout_s", FLUSH_TIMEOUT_S))
    try:
        with _system_metrics(opened, uri):
            if run_id is None:
                mlflow.log_text(OmegaConf.to_yaml(OmegaConf.create(plan.values)), "report/config.yaml")
            STAGE_PARAMS.clear()
            STAGE_PARAMS.update(flatten(plan.values))  # what each child run it opens was configured with
            try:
                result = stage.work(plan)
            except BaseException:
                # the config of a failed run, but never in place of its error
                with contextlib.suppress(Exception):
                    _log_params(plan.values, {}, resumed=run_id is not None)
                raise
        registration, scores = None, {k: float(v) for k, v in result.metrics.items()}
        if stage.score is not None and evaluated not in (None, "none"):
            registration = [evaluated, scores, list(stage.score), tags["experiment"], opened, None]
        elif stage.score is not None and stage.registers is not None and result.model is not None:
            # a stage that scores its own model (fine-tuning's rows)
            registration = [
                opened,
                scores,
                list(stage.score),
                tags["experiment"],
                opened,
                stage.registers(plan),
            ]
        status = "FINISHED"
        final = {
            "kind": "final",
            "params": {**flatten(plan.values), **flatten(result.params)},
            "resumed": run_id is not None,
            "metrics": scores,
            "artifacts": [str(a) for a in result.artifacts],
            "inputs": {k: [d.source, list(d.files), d.rows] for k, d in result.inputs.items()},
            "model": list(result.model) if result.model is not None else None,
            "register": registration,
        }
    except LmforgeError:
        if status_before == "FINISHED":  # a refused continuation changed nothing: the record stays finished
            status = "FINISHED"
        raise
    finally:  # the invocation doing the work ends with its latest stage (a continued run's included)
        final = final or {"kind": "final"}
        missing = sorted({s for steps in close_all(flush).values() for s in steps})
        ends = [a for a in ancestors if a]
        if _multirun():  # the rows of this process share their ancestors: those end with the process
            defer_end(ends, status, uri)
            ends = []
        final.update(status=status, ancestors=ends, metrics_missing=missing)
        send_or_journal(opened, uri, final, try_now=not final["metrics_missing"] and answers(uri))
    return result


def reopen(client, ancestors: list[str]) -> None:
    """Mark RUNNING again the pipeline runs above a starting run that an earlier stage ended: a
    pipeline run is RUNNING while any of its stages runs, so a kill leaves it for `settle_orphans`.
    A pipeline run that has no process of its own (an `LMFORGE_PIPELINE` invocation) takes this
    one's, so that check can tell when it is gone."""
    for ancestor in ancestors:
        run = client.get_run(ancestor)
        if run.data.tags.get("lmforge_invocation", "").startswith("env-"):
            client.set_tag(ancestor, "lmforge_process", this_process())
        if run.info.status == "FINISHED":
            client.update_run(ancestor, status="RUNNING")


# The ancestors of a Hydra multirun's rows (the stage's run under DVC, the pipeline's run) -> (store,
# status): each row leaves them RUNNING and they end when the process exits, FAILED if a row failed.
# A process killed between rows therefore leaves them RUNNING, and the next invocation marks them
# KILLED, not FINISHED after a fraction of the rows.
DEFERRED: dict[str, tuple[str, str]] = {}


def defer_end(ancestors: list[str], status: str, uri: str) -> None:
    if not DEFERRED:
        atexit.register(end_deferred)
    for ancestor in ancestors:
        failed = DEFERRED.get(ancestor, (uri, status))[1] == "FAILED" or status == "FAILED"
        DEFERRED[ancestor] = (uri, "FAILED" if failed else status)


def end_deferred() -> None:
    """End the ancestors this process's rows left RUNNING (see `DEFERRED`); when the store does not
    answer, each end waits in its run's journal for the backfill."""
    from mlflow.tracking import MlflowClient

    for run_id, (uri, status) in list(DEFERRED.items()):
        try:
            if not answers(uri):
                raise ConnectionError("the server does not answer")
            end_ancestors(MlflowClient(tracking_uri=uri), [run_id], status)
        except Exception as err:
            path = append_journal(run_id, uri, [{"kind": "end", "status": status}])
            say(f"{uri} did not take the end of run {run_id} ({brief(err)}); it waits in {path}")
    DEFERRED.clear()


# MLflow's own retries of a request (7, with pauses doubling from 2 s: minutes per call while a
# server is away) cut to 3 within 20 s each; a user's own settings of these variables win.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}


@contextlib.contextmanager
def _system_metrics(run_id: str, uri: str, interval: float = 5.0) -> Iterator[None]:
    """MLflow's CPU, memory, disk and network samples every `interval` seconds while the stage works,
    and one more when it ends, so that a run shorter than the interval has one too. Samples are not
    worth waiting for: the monitor gets `SYSTEM_METRICS_GRACE_S` to stop, and while the server is away
    its last sample is dropped (its thread may be inside MLflow's retries then)."""
    import logging

    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    logging.getLogger("mlflow.system_metrics").setLevel(logging.ERROR)  # no start/stop/outage lines
    monitor = SystemMetricsMonitor(run_id, sampling_interval=interval, resume_logging=True)
    monitor.start()
    try:
        yield
    finally:
        stop_monitor(monitor, uri)


def stop_monitor(monitor: Any, uri: str) -> None:
    """Stop a system-metrics monitor with its last sample, within `SYSTEM_METRICS_GRACE_S`; the
    sample is dropped while the server is away."""

    def stop() -> None:
        with contextlib.suppress(Exception):
            monitor.finish()
            if answers(uri):
                monitor.collect_metrics()
                monitor.publish_metrics(monitor.aggregate_metrics())
                monitor.mlflow_logger.flush()

    stopping = threading.Thread(target=stop, name="lmforge-system-metrics", daemon=True)
    stopping.start()
    stopping.join(timeout=SYSTEM_METRICS_GRACE_S)


STAGE_PARAMS: dict[str, Any] = {}  # the tracked stage's config, flattened: a child run's params
CHILD_MONITORS: dict[str, Any] = {}  # child run id -> its system-metrics monitor
SYSTEM_METRICS_GRACE_S = 2.0  # how long a run waits for its system-metrics monitor to stop


def answers(uri: str, timeout: float = 2.0) -> bool:
    """Whether the tracking server answers now (a local store always does)."""
    try:
        probe(uri, timeout)
    except ConfigError:
        return False
    return True


def open_child(name: str, tags: dict[str, str] | None = None) -> tuple[str, str] | None:
    """A child run of the active run (fine-tuning seeds), with its tags; (run id, tracking uri), or
    None when no run is active. Close it with `close_child`."""
    active = active_run()
    if active is None:
        return None
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=active[1])
    try:
        parent = client.get_run(active[0])
        inherited = inherited_tags(parent.data.tags, name)
        run = client.create_run(
            parent.info.experiment_id,
            run_name=f"{inherited['lmforge_job']} {time.strftime('%m-%d %H:%M:%S')}",
            tags={**inherited, **(tags or {}), "mlflow.parentRunId": active[0]},
        )
        start_child(run.info.run_id, active[1], {**STAGE_PARAMS, **(tags or {})})
    except Exception as err:  # the server is away: this child goes untracked, the work goes on
        say(f"{active[1]} did not open the run of {name} ({brief(err)}); it goes untracked")
        return None
    return run.info.run_id, active[1]


def start_child(run_id: str, uri: str, params: dict[str, Any]) -> None:
    """A child run that trains gets what every training run has: its params (its stage's config, with
    what is its own, such as its seed) and system metrics, sampled until `close_child`."""
    from mlflow.entities import Param
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
    from mlflow.tracking import MlflowClient

    pairs = [Param(k, str(v)[:6000]) for k, v in sorted(params.items())]
    client = MlflowClient(tracking_uri=uri)
    for at in range(0, len(pairs), 100):  # MLflow takes at most 100 params a batch
        client.log_batch(run_id, params=pairs[at : at + 100])
    monitor = SystemMetricsMonitor(run_id, sampling_interval=5.0, resume_logging=True)
    monitor.start()
    CHILD_MONITORS[run_id] = monitor


def inherited_tags(parent: dict[str, str], name: str) -> dict[str, str]:
    """A child's tags: its parent's provenance (commit, stage, overlay, data), its own job name."""
    keep = {k: v for k, v in parent.items() if k in RUN_TAGS}
    return {**keep, "lmforge_job": f"{parent.get('lmforge_job', 'run')}/{name}"}


def close_child(child: tuple[str, str] | None, metrics: dict[str, float], status: str = "FINISHED") -> None:
    """End a child run: its outbox flushed (`FLUSH_TIMEOUT_S`), its final metrics and status sent,
    or written to its journal for the backfill when the server does not take them."""
    if child is None:
        return
    from mlflow.tracking import MlflowClient

    run_id, uri = child
    if (monitor := CHILD_MONITORS.pop(run_id, None)) is not None:
        stop_monitor(monitor, uri)
    final = {"kind": "final", "child": True, "metrics": {k: float(v) for k, v in metrics.items()}}
    final.update(status=status, metrics_missing=close_outbox(run_id, FLUSH_TIMEOUT_S))
    try:
        send_child_end(MlflowClient(tracking_uri=uri), run_id, final, int(time.time() * 1000))
    except Exception as err:  # the server is away: the child's end waits on disk
        path = append_journal(run_id, uri, [final])
        say(f"{uri} did not take the end of run {run_id} ({brief(err)}); it waits in {path}")


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
