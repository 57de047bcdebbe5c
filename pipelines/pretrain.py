"""DVC stage `pretrain`: train one model with one objective on one tokenizer's encoded corpus.

python pipelines/pretrain.py model=llama_tiny objective=clm tokenizer=bpe
python pipelines/pretrain.py --multirun model=gpt_tiny,llama_tiny,mistral_tiny tokenizer=bpe
"""

from lmforge.door import cli
from lmforge.model.config import model_config
from lmforge.stage import Stage, run_name_value, seed_value
from lmforge.tokenizer.config import tokenizer_config
from lmforge.training.config import (
    objective_config,
    optim_config,
    schedule_fits_run,
    train_config,
    trainer_config,
)
from lmforge.training.pretrain import extends, folders, run, will_resume

STAGE = Stage(
    "pretrain",
    run,
    reads={
        "tokenizer": tokenizer_config,
        "model": model_config,
        "objective": objective_config,
        "optim": optim_config,
        "trainer": trainer_config,
        "train": train_config,
        "seed": seed_value,
        "run_name": run_name_value,
    },
    instance_key="run_name",
    will_resume=will_resume,
    checks=(schedule_fits_run,),
    owns=folders,
    extends=extends,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
