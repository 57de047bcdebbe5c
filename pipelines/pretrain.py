"""DVC stage `pretrain`: train one model with one objective on one tokenizer's encoded corpus.

python pipelines/pretrain.py model=llama_tiny objective=clm tokenizer=bpe
python pipelines/pretrain.py --multirun model=gpt_tiny,llama_tiny,mistral_tiny tokenizer=bpe
"""

import hydra
from omegaconf import DictConfig

from lmforge.tracking import execute
from lmforge.training.pretrain import run


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(f"pretrain@{cfg.run_name}", run, cfg)


if __name__ == "__main__":
    main()
