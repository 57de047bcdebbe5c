"""DVC stage `positions_probe` (pipelines/experiments/dvc.yaml): what the decoder with learned positions
does past the length it trained on, its position table edited (reports/positions_probe/summary.md,
probe.json; lmforge.architecture.probe says how).

python pipelines/positions_probe.py
"""

from lmforge.architecture.probe import ProbePlan, run
from lmforge.door import cli
from lmforge.stage import Stage

STAGE = Stage(
    "positions_probe",
    run,
    ProbePlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "positions_probe")
