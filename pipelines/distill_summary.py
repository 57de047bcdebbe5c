"""DVC stage `distill_summary`: teacher vs distilled student vs control (reports/distill/summary.md, .json).

python pipelines/distill_summary.py
"""

from lmforge.distill.summary import DistillSummaryPlan, run
from lmforge.door import cli
from lmforge.stage import Stage

STAGE = Stage(
    "distill_summary",
    run,
    DistillSummaryPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
