"""DVC stage `prepare`: fetch or read the raw corpus, clean, deduplicate and split it by document.

Writes data/prepared/ (each split in shards, and manifest.json), reports/data_card.md and reports/data.json
(paths from the `data` config group). Example: `python pipelines/prepare.py data=local data.local.path=corpus/`.
"""

from lmforge.data.prepare import PreparePlan, run
from lmforge.door import cli
from lmforge.stage import Stage

STAGE = Stage(
    "prepare",
    run,
    PreparePlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
