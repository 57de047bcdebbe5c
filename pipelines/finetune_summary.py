"""DVC stage `finetune_summary`: one table of every fine-tuned row (reports/finetune/summary.md, .json).

python pipelines/finetune_summary.py
"""

from lmforge.door import cli
from lmforge.finetune.summary import run, summary_config
from lmforge.stage import Stage

STAGE = Stage("finetune_summary", run, reads={"summary": summary_config})


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
