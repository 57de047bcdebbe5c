"""DVC stage `interpret@<name>`: attention maps and logit lens of a pretrained model along its
checkpoints, and a decoder's induction heads and in-context learning (reports/interpret/<name>/,
logged to MLflow).

python pipelines/interpret.py                       # the default decoder
python pipelines/interpret.py interpret=attn_only   # the attention-only decoder of pretrain_probe
python pipelines/interpret.py interpret=encoder tokenizer=wordpiece   # the default encoder
python pipelines/interpret.py interpret.trajectory=[step100,step1000]
"""

from lmforge.door import cli
from lmforge.interpret.stage import InterpretPlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "interpret",
    run,
    InterpretPlan,
    instance_key="interpret.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "interpret")
