"""DVC stage `tokenizer`: train a WordPiece or byte-level BPE tokenizer on the prepared train split.

Writes artifacts/tokenizers/{name}/tokenizer.json and reports/tokenizer/{name}.json.
Example: `python pipelines/train_tokenizer.py tokenizer=bpe tokenizer.vocab_size=16384`.
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.tokenizer.train import TokenizerTrainPlan, run

STAGE = Stage(
    "tokenizer",
    run,
    TokenizerTrainPlan,
    instance_key="tokenizer.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
