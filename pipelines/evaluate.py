"""DVC stage `evaluate`: test metrics of a pretrained model beside a unigram baseline, plus samples.

python pipelines/evaluate.py model=gpt_tiny objective=clm tokenizer=bpe run_name=decoder
"""

import hydra
from omegaconf import DictConfig

from lmforge.evaluation.evaluate import run
from lmforge.tracking import execute


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(f"evaluate@{cfg.run_name}", run, cfg)


if __name__ == "__main__":
    main()
