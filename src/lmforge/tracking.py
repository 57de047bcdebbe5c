"""Run a stage under MLflow: resolved config as params, metrics, artifacts and provenance tags.

Every DVC stage's entry point calls `execute(stage, run, cfg)`. On rank zero it opens one MLflow run
(experiment `logger.experiment`, store `logger.tracking_uri`, a local sqlite file by default) tagged
with the git commit, the DVC stage and a hash of the prepared data; `run(cfg)` does the
work and returns a `StageResult`, whose metrics and artifacts are logged. Other ranks of a
multi-process run log nothing. A `LmforgeError` ends the process with one line on stderr, exit 2.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmforge.errors import LmforgeError
from lmforge.stage import StageResult


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
    digest = hashlib.sha256()
    files = sorted(Path(prepared_dir).glob("*.jsonl"))
    for path in files:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16] if files else "none"


def is_rank_zero() -> bool:
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", 0) == 0


def execute(stage: str, run: Callable[[DictConfig], StageResult], cfg: DictConfig) -> StageResult:
    """Run one stage; see the module docstring. Exits with status 2 on a LmforgeError."""
    try:
        return _execute(stage, run, cfg)
    except LmforgeError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def _execute(stage: str, run: Callable[[DictConfig], StageResult], cfg: DictConfig) -> StageResult:
    logger = cfg.get("logger") or {}
    if not logger.get("enabled", False) or not is_rank_zero():
        return _report(run(cfg))

    import mlflow

    uri, experiment = str(logger.tracking_uri), str(logger.experiment)
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    tags = {
        "git_commit": git_commit(),
        "dvc_stage": stage,
        "data_hash": data_hash(cfg.data.prepared_dir) if "data" in cfg else "none",
    }
    with mlflow.start_run(run_name=stage, tags=tags):
        mlflow.log_params(flatten(resolved))
        mlflow.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")
        result = run(cfg)
        mlflow.log_metrics({k: float(v) for k, v in result.metrics.items()})
        for path in result.artifacts:
            if Path(path).is_file():
                mlflow.log_artifact(path, artifact_path=Path(path).parent.name)
    return _report(result)


def _report(result: StageResult) -> StageResult:
    for name, value in sorted(result.metrics.items()):
        print(f"{name}: {value:.6g}")
    return result
