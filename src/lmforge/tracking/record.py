"""A run's final record and how it reaches MLflow: params (the validated config, with what the run
decided), metrics, artifacts (reports and figures under fixed folders; never checkpoints or data),
dataset inputs, the logged model, its registration, the run's status and the pipeline runs it ends.
`send_or_journal` sends it at the end of a run, or writes it to the run's journal when the server
does not take it; `backfill` sends every journal of a store, the metric batches a run's outbox could
not deliver included (lmforge.tracking.outbox), and removes each one it delivered whole.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path
from typing import Any

from lmforge.errors import DataError
from lmforge.io import exclusive, sha256_files
from lmforge.logged_model import log_text_model
from lmforge.stage import DataInput, TrainedModel, flatten
from lmforge.tracking.outbox import PENDING, append_journal, brief, journal_path, say, step_ranges
from lmforge.tracking.registry import register

FLUSH_TIMEOUT_S = 30.0  # `logger.flush_timeout_s` when the logger group does not set it


def send_or_journal(run_id: str, uri: str, final: dict[str, Any], try_now: bool = True) -> bool:
    """End a run: its final record (params, metrics, artifacts, inputs, model, registration, status,
    the pipeline runs it ends) sent now, or, when the server does not take it, written to the run's
    journal with one line saying so; the backfill sends it later. True when sent."""
    import mlflow

    try:
        if not try_now:  # the flush did not finish or the server does not answer: no minutes of retries
            raise ConnectionError("the server did not answer at the end of the run")
        send_final(run_id, uri, final, active=True)
        return True
    except Exception as err:  # the server, the network: the record waits on disk
        while mlflow.active_run() is not None:  # let go of the run without asking the server again
            _pop_active_run()
        path = append_journal(run_id, uri, [final])
        missing = (
            f"; its metrics of steps {step_ranges(final['metrics_missing'])} too"
            if final["metrics_missing"]
            else ""
        )
        say(
            f"{uri} did not take the end of run {run_id} ({brief(err)}); it waits in "
            f"{path}{missing}: the next tracked stage, or `python -m lmforge.tracking.backfill`, sends it"
        )
        with contextlib.suppress(Exception):
            mlflow.set_tracking_uri(uri)
        return False


def send_final(run_id: str, uri: str, final: dict[str, Any], active: bool = False) -> None:
    """Send a run's final record (see `send_or_journal`): into the active run (`active`), else by
    reopening it; then the run ends with its status, and so do the pipeline runs above it. On an
    error this process is left with no active run, and the server's record as it was."""
    import mlflow
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    mlflow.set_tracking_uri(uri)
    if not active:
        mlflow.start_run(run_id=run_id)
    try:
        if "params" in final:
            _log_flat_params(final["params"], resumed=final.get("resumed", False))
        if final.get("metrics"):
            mlflow.log_metrics(final["metrics"])
        _log_artifacts(final.get("artifacts", []))
        inputs = final.get("inputs", {})
        _log_inputs({k: DataInput(src, tuple(files), rows) for k, (src, files, rows) in inputs.items()})
        if final.get("model"):
            mlflow.set_tag("lmforge_model_uri", log_text_model(TrainedModel(*final["model"])))
        if final.get("register"):
            trained, metrics, score, overlay, evaluation, name = final["register"]
            register(client, trained, metrics, tuple(score), overlay, evaluation, name)
        mark_incomplete(client, run_id, final.get("metrics_missing", []))
    except BaseException:
        _pop_active_run()
        raise
    mlflow.end_run(status=final["status"])
    end_ancestors(client, final.get("ancestors", []), final["status"])


def end_ancestors(client, ancestors: list[str], status: str) -> None:
    """End the pipeline runs above a run with its status: the latest stage's end is the pipeline's,
    but a run that failed stays FAILED."""
    for ancestor in ancestors:
        if client.get_run(ancestor).info.status != "FAILED":
            client.set_terminated(ancestor, status=status)


def send_child_end(client, run_id: str, final: dict[str, Any], timestamp_ms: int) -> None:
    """A child run's end (a fine-tuning seed, a scaling cell): its final metrics, the steps it still
    lacks, its status."""
    from mlflow.entities import Metric

    client.log_batch(run_id, metrics=[Metric(k, v, timestamp_ms, 0) for k, v in final["metrics"].items()])
    mark_incomplete(client, run_id, final["metrics_missing"])
    client.set_terminated(run_id, status=final["status"])


def mark_incomplete(client, run_id: str, missing: list[int]) -> None:
    """Tag the run `lmforge_incomplete` with the steps whose metrics wait in its journal; untag it
    once none do."""
    if missing:
        text = f"metrics of steps {step_ranges(missing)} wait in {journal_path(run_id)}"
        client.set_tag(run_id, "lmforge_incomplete", text)
    elif "lmforge_incomplete" in client.get_run(run_id).data.tags:
        client.delete_tag(run_id, "lmforge_incomplete")


def _drop_active_run() -> None:
    """Leave this process with no active MLflow run, whether or not the server took its end."""
    import mlflow

    while mlflow.active_run() is not None:
        with contextlib.suppress(Exception):  # end_run lets go of the run before it asks the server
            mlflow.end_run(status="FAILED")
        if mlflow.active_run() is not None:
            _pop_active_run()


def _pop_active_run() -> None:
    """Let go of the active run without a word to the server."""
    from mlflow.environment_variables import MLFLOW_RUN_ID
    from mlflow.tracking import fluent

    stack = fluent._active_run_stack.get()
    if stack:
        stack.pop()
    MLFLOW_RUN_ID.unset()


def _log_params(values: dict, decided: dict, resumed: bool) -> None:
    """The config as validated, with what the run decided in place of the configured value."""
    _log_flat_params({**flatten(values), **flatten(decided)}, resumed)


def _log_flat_params(params: dict[str, Any], resumed: bool) -> None:
    import mlflow
    from mlflow.exceptions import MlflowException

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
    """Each dataset the run read: digest of its files, source path, rows, under its context; the
    same on each of its child runs that trained (fine-tuning seeds, scaling cells), which read them."""
    import mlflow
    from mlflow.tracking import MlflowClient

    datasets = dataset_inputs(inputs)
    if not datasets:
        return
    client, run = MlflowClient(), mlflow.active_run()
    client.log_inputs(run.info.run_id, datasets=datasets)
    query = f"tags.mlflow.parentRunId = '{run.info.run_id}'"
    for child in client.search_runs([run.info.experiment_id], filter_string=query, max_results=5000):
        if not child.inputs.dataset_inputs and any(k.startswith("train/") for k in child.data.metrics):
            client.log_inputs(child.info.run_id, datasets=datasets)


def dataset_inputs(inputs: dict[str, Any]) -> list:
    """MLflow's dataset inputs for `inputs` (context -> DataInput)."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    out = []
    for context, data in inputs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            source = resolve_dataset_source(str(Path(data.source).resolve()))
        digest = sha256_files(sorted(map(Path, data.files)))[:16]
        dataset = MetaDataset(source, name=f"{Path(data.source).name}/{context}", digest=digest)
        tags = [InputTag("mlflow.data.context", context), InputTag("rows", str(data.rows))]
        out.append(DatasetInput(dataset=dataset._to_mlflow_entity(), tags=tags))
    return out


def backfill(uri: str, folder: Path = PENDING) -> tuple[int, int]:
    """Send the journals of store `uri`, oldest first: each run's waiting metric batches, then its
    final record; a journal delivered whole is removed. Returns (runs completed, runs still waiting);
    a store that still does not answer is said once, in one line."""

    done = waiting = 0
    for path in sorted(folder.glob("*.jsonl")):
        with contextlib.ExitStack() as held:
            try:  # one process sends a journal: another stage backfilling at once skips it
                held.enter_context(exclusive(path.with_suffix(".lock"), f"journal {path}"))
            except DataError:
                continue
            if not path.is_file():  # sent by the process that held it before us
                continue
            failed = _send_journal(path, uri)
        if failed is None:
            done += 1
            path.with_suffix(".lock").unlink(missing_ok=True)
        elif failed:
            waiting += 1
            if waiting == 1:
                say(f"{uri}: the backfill of {path} waits ({failed})")
    if done:
        say(f"{uri}: backfilled {done} run(s) from {folder}")
    return done, waiting


def _send_journal(path: Path, uri: str) -> str | None:
    """Send one journal of store `uri` and remove it (None); else why not, in a few words ("" for a
    journal of another store)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records or records[0].get("uri") != uri:
        return ""
    run_id = records[0]["run_id"]
    try:
        client = MlflowClient(tracking_uri=uri)
        batches = [r for r in records if r["kind"] == "metrics"]
        points = [Metric(k, v, ts, b["step"]) for b in batches for k, v, ts in b["metrics"]]
        for at in range(0, len(points), 1000):  # MLflow takes at most 1,000 metrics a batch
            client.log_batch(run_id, metrics=points[at : at + 1000])
        for final in (r for r in records if r["kind"] == "final"):
            final = {**final, "metrics_missing": []}
            if final.get("child"):
                send_child_end(client, run_id, final, timestamp_ms=0)
            else:
                send_final(run_id, uri, final)
        for end in (r for r in records if r["kind"] == "end"):  # a pipeline run its multirun ended
            end_ancestors(client, [run_id], end["status"])
        if not any(r["kind"] == "final" for r in records):
            mark_incomplete(client, run_id, [])
    except Exception as err:
        return brief(err)
    path.unlink()
    return None
