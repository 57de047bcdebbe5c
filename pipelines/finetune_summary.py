"""DVC stage `finetune_summary`: one table of every fine-tuned row (reports/finetune/summary.md, .json).

python pipelines/finetune_summary.py
"""

import hydra
from omegaconf import DictConfig

from lmforge.finetune.summary import run, summary_config
from lmforge.stage import Stage
from lmforge.tracking import execute

STAGE = Stage("finetune_summary", run, reads={"summary": summary_config})


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
