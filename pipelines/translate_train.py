"""DVC stage `translate_train`: the 2017 encoder-decoder trained on the pairs (Noam, label smoothing).

python pipelines/translate_train.py
python pipelines/translate_train.py model.norm_placement=pre model.final_norm=true translate.warmup=false run_name=pre-nowarmup
python pipelines/translate_train.py --multirun 'translate_run=glob(warmup-*)'     # the warmup experiment
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.translate.train import TranslateTrainPlan, run

STAGE = Stage(
    "translate_train",
    run,
    TranslateTrainPlan,
    instance_key="run_name",
    owns=lambda plan: [plan.translate.out_dir],  # its model folder; translate_eval finds the run by it
)


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
