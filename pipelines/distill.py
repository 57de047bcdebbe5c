"""DVC stage `distill`: a shallower student trained on a pretrained teacher's soft targets.

python pipelines/distill.py distill.backbone=decoder tokenizer=bpe trainer=distill run_name=decoder-student
python pipelines/distill.py distill=scratch tokenizer=wordpiece run_name=encoder-scratch    # the control
python pipelines/distill.py distill.layer_map=[0,3] distill.temperature=4 run_name=encoder-t4
"""

import hydra
from omegaconf import DictConfig

from lmforge.distill.config import distill_config
from lmforge.distill.stage import run, will_resume
from lmforge.stage import Stage, run_name_value, seed_value
from lmforge.tokenizer.config import tokenizer_config
from lmforge.tracking import execute
from lmforge.training.config import objective_config, optim_config, train_config, trainer_config

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
)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
