"""DVC stage `distill_summary`: teacher vs distilled student vs control (reports/distill/summary.md, .json).

python pipelines/distill_summary.py
"""

from lmforge.distill.summary import distill_summary_config, run
from lmforge.door import cli
from lmforge.stage import Stage, seed_value
from lmforge.training.config import train_config

STAGE = Stage(
    "distill_summary",
    run,
    reads={"distill_summary": distill_summary_config, "train": train_config, "seed": seed_value},
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
