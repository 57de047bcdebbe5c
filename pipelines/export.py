"""DVC stage `export@<run>`: a pretrained model of ours as a Hugging Face folder (artifacts/hf/<run>/),
checked against transformers (reports/export/<run>.json).

python pipelines/export.py export.run=decoder tokenizer=bpe
python pipelines/export.py export.run=encoder tokenizer=wordpiece export.out_dir=/tmp/hf
"""

from lmforge.door import cli
from lmforge.export.stage import ExportPlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "export",
    run,
    ExportPlan,
    instance_key="export.run",
    owns=lambda plan: [f"{plan.export.out_dir}/{plan.export.run}"],
)


if __name__ == "__main__":
    cli(STAGE, __file__, "export")
