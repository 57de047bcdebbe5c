"""Stage `learning_curves` (pipelines/experiments/dvc.yaml): a downstream score against the number of
labelled examples, from the runs of conf/sweep/learning_curve.yaml
(reports/finetune/learning_curves.{md,json,png}, logged to MLflow).

python pipelines/finetune.py --multirun sweep=learning_curve row=encoder-pos,scratch-pos finetune.train_examples=100,300,null
python pipelines/learning_curves.py
"""

from lmforge.door import cli
from lmforge.finetune.curves import CurvesPlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "learning_curves",
    run,
    CurvesPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "learning_curves")
