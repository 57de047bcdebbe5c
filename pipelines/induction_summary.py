"""DVC stage `induction_summary` (pipelines/experiments/dvc.yaml): the induction study's runs as one table and
figure, with a verdict per share of repeated windows (reports/induction/summary.{md,json},
induction.png).

python pipelines/induction_summary.py
"""

from lmforge.door import cli
from lmforge.induction.config import induction_config
from lmforge.induction.summary import summarise
from lmforge.stage import Stage

STAGE = Stage("induction_summary", summarise, reads={"induction": induction_config})


if __name__ == "__main__":
    cli(STAGE, __file__, "induction")
