"""Stage `scaling_compare` (pipelines/experiments/dvc.yaml): two sweeps' fitted laws with intervals, and
which differences the intervals support (reports/scaling/compare-<name>-vs-<against>.md).

python pipelines/scaling_compare.py scaling.name=default scaling.against=rope
"""

import hydra
from omegaconf import DictConfig

from lmforge.scaling.compare import run
from lmforge.scaling.config import scaling_config
from lmforge.stage import Stage
from lmforge.tracking import execute

STAGE = Stage("scaling_compare", run, reads={"scaling": scaling_config}, instance_key="scaling.name")


@hydra.main(config_path="../conf", config_name="scaling", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
