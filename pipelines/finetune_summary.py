"""DVC stage `finetune_summary`: one table of every fine-tuned row (reports/finetune/summary.md, .json).

python pipelines/finetune_summary.py
"""

from lmforge.door import cli
from lmforge.finetune.summary import SummaryPlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "finetune_summary",
    run,
    SummaryPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
