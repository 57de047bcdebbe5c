"""DVC stage `tokenizer`: train a WordPiece or byte-level BPE tokenizer on the prepared train split.

Writes artifacts/tokenizers/{name}/tokenizer.json and reports/tokenizer/{name}.json.
Example: `python pipelines/train_tokenizer.py tokenizer=bpe tokenizer.vocab_size=16384`.
"""

import hydra
from omegaconf import DictConfig

from lmforge.data.config import data_config
from lmforge.stage import Stage
from lmforge.tokenizer.config import tokenizer_config
from lmforge.tokenizer.train import run
from lmforge.tracking import execute

STAGE = Stage(
    "tokenizer",
    run,
    reads={"data": data_config, "tokenizer": tokenizer_config},
    instance_key="tokenizer.name",
)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
