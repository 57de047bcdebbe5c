"""DVC stage `induction@<name>` (pipelines/experiments/dvc.yaml): the attention-only decoder trained
once per seed on windows of which `induction.repeat_share` repeat an earlier span, its induction score
and in-context learning probed through training (reports/induction/runs/<name>/).

python pipelines/induction.py induction.repeat_share=0.2 induction.name=share20
python pipelines/induction.py model=gpt_micro induction.name=decoder_share0   # the default decoder
"""

from lmforge.door import cli
from lmforge.induction.stage import InductionPlan, run
from lmforge.stage import Stage
from lmforge.training.pretrain import schedule_fits_run

STAGE = Stage(
    "induction",
    run,
    InductionPlan,
    instance_key="induction.name",
    checks=(schedule_fits_run,),
)


if __name__ == "__main__":
    cli(STAGE, __file__, "induction")
