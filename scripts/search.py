"""Search a stage's settings with a sampler: the stage's own Hydra door, run as a multirun whose sweeper
is Optuna's (`hydra/sweeper=optuna`, src/hydra_plugins/lmforge_optuna/sweeper.py), with each trial's
metrics recorded in its Hydra job folder (`result.json`) for the sweeper to score it by.

    python -m scripts.search pretrain --multirun sweep=search_decoder
    python -m scripts.search pretrain --multirun sweep=search_decoder hydra.sweeper.n_trials=30 \
        optim.warmup_steps='int(interval(20, 300))'

Every trial runs, validates and logs like a run of `pipelines/<stage>.py` (an MLflow child of the
study's multirun run when the logger is on); only the recorded metrics are added. A search preset
under conf/sweep/ names the space, the trial budget and where trials write (docs/pretraining.md#search).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from hydra_plugins.lmforge_optuna.sweeper import RESULT
from lmforge.errors import LmforgeError
from lmforge.io import write_json
from lmforge.stage import Plan, Stage, StageResult
from pipelines import STAGES, stage

ROOT = Path(__file__).resolve().parents[1]


def recorded(inner: Stage) -> Stage:
    """`inner` with its metrics also written to the Hydra job's output folder."""

    def work(plan: Plan) -> StageResult:
        from hydra.core.hydra_config import HydraConfig

        result = inner.work(plan)
        write_json(Path(HydraConfig.get().runtime.output_dir) / RESULT, result.metrics)
        return result

    return dataclasses.replace(inner, work=work)


def main(argv: list[str]) -> None:
    from lmforge.door import cli

    if not argv or argv[0] not in STAGES:
        got = repr(argv[0]) if argv else "nothing"
        raise LmforgeError(f"search: got {got}, expected a stage first, one of {', '.join(STAGES)}")
    if not {"--multirun", "-m"} & set(argv):
        raise LmforgeError(
            "search: no --multirun; expected `python -m scripts.search <stage> --multirun sweep=<preset>`"
        )
    name, overrides = argv[0], argv[1:]
    entry = ROOT / "pipelines" / f"{name}.py"
    sys.argv = [str(entry), *overrides]
    cli(recorded(stage(name)), str(entry), STAGES[name])


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except LmforgeError as err:  # the sweeper's own refusals (its settings, a trial without metrics)
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
