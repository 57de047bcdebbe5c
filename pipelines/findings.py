"""DVC stage `findings`: the course's claims tested on the committed reports of every stage and
experiment, each with its numbers, one figure and a verdict computed by a rule (reports/findings.md,
reports/findings.json, reports/findings/; logged to MLflow).

python pipelines/findings.py
"""

from lmforge.door import cli
from lmforge.findings.stage import FindingsPlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "findings",
    run,
    FindingsPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "findings")
