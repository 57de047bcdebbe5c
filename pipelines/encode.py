"""DVC stage `encode`: encode every prepared split into memory-mapped token arrays.

Writes data/encoded/{name}/{split}.bin, {split}.sentences.npy, {split}.documents.npy and meta.json.
(Named encode.py, not tokenize.py, which would shadow the standard library module.)
"""

from lmforge.data.config import data_config
from lmforge.door import cli
from lmforge.encoding.encode import run
from lmforge.stage import Stage
from lmforge.tokenizer.config import tokenizer_config

STAGE = Stage(
    "encode", run, reads={"data": data_config, "tokenizer": tokenizer_config}, instance_key="tokenizer.name"
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
