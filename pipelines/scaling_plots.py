"""DVC stage `scaling_plots`: loss vs N per D with the fitted law, loss vs compute with the frontier,
IsoFLOP curves with their minima, residuals (reports/scaling/<name>/figures/*.png, logged to MLflow).

python pipelines/scaling_plots.py
"""

from lmforge.door import cli
from lmforge.scaling.config import ScalingPlan
from lmforge.scaling.plots import run
from lmforge.stage import Stage

STAGE = Stage(
    "scaling_plots",
    run,
    ScalingPlan,
    instance_key="scaling.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "scaling")
