"""DVC stage `finetune_sequential` (pipelines/experiments/dvc.yaml): a margin claim between two
fine-tuned rows decided by a sequential design declared before its blocks of seeds ran
(reports/minilm_lora_sequential/summary.{md,json}; lmforge.finetune.sequential says how).

python pipelines/finetune_sequential.py sequential=minilm_lora
"""

from lmforge.door import cli
from lmforge.finetune.sequential import SequentialPlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "finetune_sequential",
    run,
    SequentialPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "sequential")
