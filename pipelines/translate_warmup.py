"""The warmup experiment's summary: validation curves of {Post-LN, Pre-LN} x {Noam warmup, none} on one
plot and final BLEU in one table (reports/translate/warmup/). The runs come first:

python pipelines/translate_train.py --multirun 'translate_run=glob(warmup-*)'
python pipelines/translate_eval.py --multirun 'translate_run=glob(warmup-*)'
python pipelines/translate_warmup.py

or all three: dvc repro pipelines/experiments/dvc.yaml
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.translate.warmup import WarmupPlan, run

STAGE = Stage(
    "translate_warmup",
    run,
    WarmupPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
