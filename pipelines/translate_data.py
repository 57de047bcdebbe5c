"""DVC stage `translate_data`: parallel pairs, cleaned, deduplicated, split by book.

python pipelines/translate_data.py
python pipelines/translate_data.py pairs=local pairs.local.path=my_pairs.tsv
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.translate.pairs import PairsPlan, run

STAGE = Stage(
    "translate_data",
    run,
    PairsPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
