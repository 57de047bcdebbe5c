"""DVC stage `task`: fetch one labelled task's source (pinned, sha256-checked, cached), split it once
and write data/tasks/<name>/{train,val,test}.jsonl with a data card.

python pipelines/task.py task=topic
"""

import hydra
from omegaconf import DictConfig

from lmforge.stage import Stage
from lmforge.tasks.build import run
from lmforge.tasks.config import task_config
from lmforge.tracking import execute

STAGE = Stage("task", run, reads={"task": task_config}, instance_key="task.name")


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
