"""DVC stage `arch_eval` (pipelines/experiments/dvc.yaml): positions past the training length, GQA/MQA's
KV cache against its loss, the KV cache's decoding speed-up and LayerNorm against RMSNorm, measured on
the decoders of arch_pretrain (reports/arch/, logged to MLflow).

python pipelines/arch_eval.py
"""

from lmforge.architecture.stage import ArchEvalPlan, run
from lmforge.door import cli
from lmforge.stage import Stage

STAGE = Stage(
    "arch_eval",
    run,
    ArchEvalPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "arch")
