"""Stage `scaling_compare` (pipelines/experiments/dvc.yaml): two sweeps' fitted laws with intervals, and
which differences the intervals support (reports/scaling/compare-<name>-vs-<against>.md).

python pipelines/scaling_compare.py scaling.name=default scaling.against=rope
"""

from lmforge.door import cli
from lmforge.scaling.compare import run
from lmforge.scaling.config import ScalingPlan
from lmforge.stage import Stage

STAGE = Stage(
    "scaling_compare",
    run,
    ScalingPlan,
    instance_key="scaling.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "scaling")
