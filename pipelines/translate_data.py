"""DVC stage `translate_data`: parallel pairs, cleaned, deduplicated, split by book.

python pipelines/translate_data.py
python pipelines/translate_data.py pairs=local pairs.local.path=my_pairs.tsv
"""

import hydra
from omegaconf import DictConfig

from lmforge.stage import Stage
from lmforge.tracking import execute
from lmforge.translate.config import pairs_config
from lmforge.translate.pairs import run

STAGE = Stage("translate_data", run, reads={"pairs": pairs_config})


@hydra.main(config_path="../conf", config_name="translate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
