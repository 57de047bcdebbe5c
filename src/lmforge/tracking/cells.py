"""MLflow child runs of a sweep: one per cell, found again by the cell's key, never duplicated.

The parent is the run `lmforge.tracking.execute` opens for the sweep stage (continued when a killed
sweep resumes). Each cell is a child (`mlflow.parentRunId`) tagged `lmforge_cell=<key>`: its
shape, N total and non-embedding, D and FLOPs as params; the training curve (Lightning's logger);
the held-out loss, wall time and tokens/s as metrics. Before creating a child the sweep looks for
one with the key: a finished child means the cell was logged already (by this sweep, an earlier one
or another shard), an unfinished one left by a killed process is continued, and a cell whose result
came from the store without a run gets one, tagged `lmforge_cell_source=store`. A cell is a
`lmforge.scaling.grid.Cell`, not imported: the sweep imports this module, and packages import only
downward.
"""

from __future__ import annotations

import math
from typing import Any

CELL_TAG = "lmforge_cell"
METRICS = ("val_loss", "val_accuracy", "wall_seconds", "tokens_per_second", "flops", "flops_6nd", "tokens")


class CellRuns:
    def __init__(self, parent_id: str, uri: str) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.parent_id, self.uri = parent_id, uri
        parent = self.client.get_run(parent_id)
        self.experiment_id = parent.info.experiment_id
        self.parent_tags = parent.data.tags  # commit, stage, overlay and data of the sweep, for each cell

    def find(self, cell: Any):
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.{CELL_TAG} = '{cell.key}'",
            order_by=["attributes.start_time DESC"],
            max_results=10,
        )
        return runs[0] if runs else None

    def open(self, cell: Any, source: str) -> tuple[str | None, bool]:
        """(run id, finished already) of the cell's child run, created when there is none; (None,
        False) when the server does not answer: the cell trains untracked."""
        try:
            return self._open(cell, source)
        except Exception as err:
            from lmforge.tracking.outbox import brief, say

            say(f"{self.uri} did not open the run of cell {cell.name} ({brief(err)}); it goes untracked")
            return None, False

    def _open(self, cell: Any, source: str) -> tuple[str, bool]:
        found = self.find(cell)
        if found is not None:
            if found.info.status == "FINISHED":
                return found.info.run_id, True
            self.client.update_run(found.info.run_id, status="RUNNING")
            from lmforge.tracking.runs import this_process

            self.client.set_tag(found.info.run_id, "lmforge_process", this_process())  # continued here
            return found.info.run_id, False
        from lmforge.tracking.runs import inherited_tags

        tags = inherited_tags(self.parent_tags, f"{cell.name}-seed{cell.seed}")  # seed repeats share the name
        run = self.client.create_run(
            self.experiment_id,
            run_name=tags["lmforge_job"],
            tags={
                **tags,
                "seed": str(cell.seed),
                "mlflow.parentRunId": self.parent_id,
                CELL_TAG: cell.key,
                "lmforge_cell_source": source,
            },  # fmt: skip
        )
        params = {k: v for k, v in cell.describe().items() if k not in ("key",)}
        if source == "trained":  # a cell that trains: the sweep's config beside its own, system metrics
            from lmforge.tracking.runs import STAGE_PARAMS, start_child

            start_child(run.info.run_id, self.uri, {**STAGE_PARAMS, **params})
        else:
            for key, value in params.items():
                self.client.log_param(run.info.run_id, key, value)
        return run.info.run_id, False

    def finish(self, run_id: str | None, result: dict[str, Any]) -> None:
        """The cell's metrics and its end, as a child run's (`close_child`: queued curves flushed,
        the rest written to its journal when the server is away)."""
        if run_id is None:
            return
        from lmforge.tracking.runs import close_child

        metrics = {f"cell/{n}": float(result[n]) for n in METRICS if _finite(result.get(n))}
        close_child((run_id, self.uri), metrics)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(float(value))
