"""DVC stage `encode`: encode every prepared split into memory-mapped token arrays.

Writes data/encoded/{name}/{split}.bin, {split}.sentences.npy, {split}.documents.npy and meta.json.
(Named encode.py, not tokenize.py, which would shadow the standard library module.)
"""

from lmforge.door import cli
from lmforge.encoding.encode import EncodePlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "encode",
    run,
    EncodePlan,
    instance_key="tokenizer.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
