"""What every stage's `run(cfg)` returns: metrics to log and the paths of the files it wrote."""

from __future__ import annotations

from typing import NamedTuple


class StageResult(NamedTuple):
    metrics: dict[str, float]  # flat names -> numbers, ready for mlflow.log_metrics
    artifacts: list[str]  # every file the stage wrote, for mlflow.log_artifact
