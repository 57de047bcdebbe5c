"""DVC stage `translate_tokenizer`: one BPE vocabulary learnt on both languages of the training pairs.

python pipelines/translate_tokenizer.py translate.vocab_size=16000
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.translate.vocab import VocabPlan, run

STAGE = Stage(
    "translate_tokenizer",
    run,
    VocabPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
