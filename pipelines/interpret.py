"""DVC stage `interpret@<name>`: attention maps and logit lens of a pretrained model along its
checkpoints, and a decoder's induction heads and in-context learning (reports/interpret/<name>/,
logged to MLflow).

python pipelines/interpret.py                       # the default decoder
python pipelines/interpret.py interpret=attn_only   # the attention-only decoder of pretrain_probe
python pipelines/interpret.py interpret=encoder tokenizer=wordpiece   # the default encoder
python pipelines/interpret.py interpret.trajectory=[step100,step1000]
"""

from lmforge.door import cli
from lmforge.interpret.config import interpret_config
from lmforge.interpret.stage import run
from lmforge.stage import Stage
from lmforge.tokenizer.config import tokenizer_config
from lmforge.training.config import train_config

STAGE = Stage(
    "interpret",
    run,
    reads={"interpret": interpret_config, "tokenizer": tokenizer_config, "train": train_config},
    instance_key="interpret.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "interpret")
