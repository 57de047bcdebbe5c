"""DVC stage `distill`: a shallower student trained on a pretrained teacher's soft targets.

python pipelines/distill.py distill.backbone=decoder tokenizer=bpe trainer=distill run_name=decoder-student
python pipelines/distill.py distill=scratch tokenizer=wordpiece run_name=encoder-scratch    # the control
python pipelines/distill.py distill.layer_map=[0,3] distill.temperature=4 run_name=encoder-t4
"""

from lmforge.distill.stage import DistillPlan, folders, run, will_resume
from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.training.pretrain import extends, schedule_fits_run

STAGE = Stage(
    "distill",
    run,
    DistillPlan,
    instance_key="run_name",
    will_resume=will_resume,
    checks=(schedule_fits_run,),
    owns=folders,
    extends=extends,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
