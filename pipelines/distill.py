"""DVC stage `distill`: a shallower student trained on a pretrained teacher's soft targets.

python pipelines/distill.py distill.backbone=decoder tokenizer=bpe trainer=distill run_name=decoder-student
python pipelines/distill.py distill=scratch tokenizer=wordpiece run_name=encoder-scratch    # the control
python pipelines/distill.py distill.layer_map=[0,3] distill.temperature=4 run_name=encoder-t4
"""

from lmforge.distill.config import distill_config
from lmforge.distill.stage import folders, run, will_resume
from lmforge.door import cli
from lmforge.stage import Stage, run_name_value, seed_value
from lmforge.tokenizer.config import tokenizer_config
from lmforge.training.config import (
    objective_config,
    optim_config,
    schedule_fits_run,
    train_config,
    trainer_config,
)
from lmforge.training.pretrain import extends

STAGE = Stage(
    "distill",
    run,
    reads={
        "distill": distill_config,
        "tokenizer": tokenizer_config,
        "objective": objective_config,  # used only by a teacher without one (an hf: folder)
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
