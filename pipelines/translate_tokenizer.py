"""DVC stage `translate_tokenizer`: one BPE vocabulary learnt on both languages of the training pairs.

python pipelines/translate_tokenizer.py translate.vocab_size=16000
"""

import hydra
from omegaconf import DictConfig

from lmforge.stage import Stage
from lmforge.tracking import execute
from lmforge.translate.config import pairs_config, translate_config
from lmforge.translate.vocab import run

STAGE = Stage("translate_tokenizer", run, reads={"pairs": pairs_config, "translate": translate_config})


@hydra.main(config_path="../conf", config_name="translate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
