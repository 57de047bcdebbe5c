"""Experiment stage `translate_length`: BLEU and chrF of one long run's kept checkpoints against the
word-by-word dictionary, each difference with its paired bootstrap interval. The run comes first:

python pipelines/translate_train.py translate_run=length
python pipelines/translate_length.py translate_run=length

or both: dvc repro pipelines/experiments/dvc.yaml:translate_length
"""

from lmforge.door import cli
from lmforge.stage import Stage, run_name_value
from lmforge.translate.config import pairs_config, translate_config
from lmforge.translate.length import run

STAGE = Stage(
    "translate_length",
    run,
    reads={
        "pairs": pairs_config,
        "translate": translate_config,
        "run_name": run_name_value,
    },
    evaluates=lambda plan: plan.translate.out_dir,  # links to translate_train's run
)


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
