"""DVC stage `induction@<name>` (pipelines/experiments/dvc.yaml): the attention-only decoder trained
once per seed on windows of which `induction.repeat_share` repeat an earlier span, its induction score
and in-context learning probed through training (reports/induction/runs/<name>/).

python pipelines/induction.py induction.repeat_share=0.2 induction.name=share20
python pipelines/induction.py model=gpt_micro induction.name=decoder_share0   # the default decoder
"""

from lmforge.door import cli
from lmforge.induction.config import induction_config
from lmforge.induction.stage import run
from lmforge.model.config import model_config
from lmforge.stage import Stage, seed_value
from lmforge.tokenizer.config import tokenizer_config
from lmforge.training.config import (
    objective_config,
    optim_config,
    schedule_fits_run,
    train_config,
    trainer_config,
)

STAGE = Stage(
    "induction",
    run,
    reads={
        "induction": induction_config,
        "tokenizer": tokenizer_config,
        "model": model_config,
        "objective": objective_config,
        "optim": optim_config,
        "trainer": trainer_config,
        "train": train_config,
        "seed": seed_value,
    },
    instance_key="induction.name",
    checks=(schedule_fits_run,),
)


if __name__ == "__main__":
    cli(STAGE, __file__, "induction")
