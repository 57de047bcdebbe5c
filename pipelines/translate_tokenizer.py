"""DVC stage `translate_tokenizer`: one BPE vocabulary learnt on both languages of the training pairs.

python pipelines/translate_tokenizer.py translate.vocab_size=16000
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.translate.config import pairs_config, translate_config
from lmforge.translate.vocab import run

STAGE = Stage("translate_tokenizer", run, reads={"pairs": pairs_config, "translate": translate_config})


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
