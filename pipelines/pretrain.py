"""DVC stage `pretrain`: train one model with one objective on one tokenizer's encoded corpus.

python pipelines/pretrain.py model=llama_tiny objective=clm tokenizer=bpe
python pipelines/pretrain.py --multirun model=gpt_tiny,llama_tiny,mistral_tiny tokenizer=bpe
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.training.pretrain import PretrainPlan, extends, folders, run, schedule_fits_run, will_resume

STAGE = Stage(
    "pretrain",
    run,
    PretrainPlan,
    instance_key="run_name",
    will_resume=will_resume,
    checks=(schedule_fits_run,),
    owns=folders,
    extends=extends,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
