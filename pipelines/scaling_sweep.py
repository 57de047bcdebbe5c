"""DVC stage `scaling_sweep`: train every cell of the scaling grid not already in the store.

python pipelines/scaling_sweep.py                                  # the default sweep
python pipelines/scaling_sweep.py model.position=rope scaling.name=rope
python pipelines/scaling_sweep.py --multirun hydra/launcher=submitit_local scaling.shards=2 scaling.shard=0,1
"""

from lmforge.door import cli
from lmforge.scaling.cell import LOOP
from lmforge.scaling.sweep import SweepPlan, run, will_resume
from lmforge.stage import Stage

STAGE = Stage(
    "scaling_sweep",
    run,
    SweepPlan,
    instance_key="scaling.job",
    will_resume=will_resume,
    decided=LOOP,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "scaling")
