"""DVC stage `induction_summary` (pipelines/experiments/dvc.yaml): the induction study's runs as one table and
figure, with a verdict per share of repeated windows (reports/induction/summary.{md,json},
induction.png).

python pipelines/induction_summary.py
"""

from lmforge.door import cli
from lmforge.induction.summary import InductionSummaryPlan, summarise
from lmforge.stage import Stage

STAGE = Stage(
    "induction_summary",
    summarise,
    InductionSummaryPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "induction")
