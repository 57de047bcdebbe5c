"""DVC stage `arch_eval` (pipelines/experiments/dvc.yaml): positions past the training length, GQA/MQA's
KV cache against its loss, the KV cache's decoding speed-up and LayerNorm against RMSNorm, measured on
the decoders of arch_pretrain (reports/arch/, logged to MLflow).

python pipelines/arch_eval.py
"""

from lmforge.architecture.config import arch_config
from lmforge.architecture.stage import run
from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.tokenizer.config import tokenizer_config
from lmforge.training.config import train_config

STAGE = Stage(
    "arch_eval", run, reads={"arch": arch_config, "tokenizer": tokenizer_config, "train": train_config}
)


if __name__ == "__main__":
    cli(STAGE, __file__, "arch")
