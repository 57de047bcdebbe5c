"""DVC stage `finetune`: fine-tune one starting point on one task, score it on the test split beside
the task's baselines.

python pipelines/finetune.py task=pos                                   # our pretrained encoder
python pipelines/finetune.py task=pos finetune.init=scratch             # the same, randomly initialised
python pipelines/finetune.py task=sentiment finetune=minilm adapt=lora  # all-MiniLM-L6-v2 with LoRA
python pipelines/finetune.py task=sentiment finetune.backbone=decoder finetune.tokenizer=bpe
python pipelines/finetune.py --multirun task=sentiment,topic finetune.seeds=[0,1,2]
"""

import hydra
from omegaconf import DictConfig

from lmforge.finetune.config import adapt_config, finetune_config
from lmforge.finetune.stage import run
from lmforge.stage import Stage, run_name_value
from lmforge.tasks.config import task_config
from lmforge.tracking import execute

STAGE = Stage(
    "finetune",
    run,
    reads={
        "task": task_config,
        "finetune": finetune_config,
        "adapt": adapt_config,
        "run_name": run_name_value,
    },
    instance_key="run_name",
)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
