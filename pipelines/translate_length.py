"""Experiment stage `translate_length`: BLEU and chrF of one long run's kept checkpoints against the
word-by-word dictionary, each difference with its paired bootstrap interval. The run comes first:

python pipelines/translate_train.py translate_run=length
python pipelines/translate_length.py translate_run=length

or both: dvc repro pipelines/experiments/dvc.yaml:translate_length
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.translate.config import TranslateEvalPlan
from lmforge.translate.length import run

STAGE = Stage(
    "translate_length",
    run,
    TranslateEvalPlan,
    evaluates=lambda plan: plan.translate.out_dir,  # links to translate_train's run
)


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
