"""DVC stage `scaling_sweep`: train every cell of the scaling grid not already in the store.

python pipelines/scaling_sweep.py                                  # the default sweep
python pipelines/scaling_sweep.py model.position=rope scaling.name=rope
python pipelines/scaling_sweep.py --multirun hydra/launcher=submitit_local scaling.shards=2 scaling.shard=0,1
"""

from lmforge.door import cli
from lmforge.model.config import model_config
from lmforge.scaling.config import scaling_config
from lmforge.scaling.sweep import run, will_resume
from lmforge.stage import Stage, seed_value
from lmforge.tokenizer.config import tokenizer_config
from lmforge.training.config import objective_config, optim_config, trainer_config

STAGE = Stage(
    "scaling_sweep",
    run,
    reads={
        "scaling": scaling_config,
        "tokenizer": tokenizer_config,
        "model": model_config,  # the base of every cell (its shape comes from the grid)
        "objective": objective_config,
        "optim": optim_config,
        "trainer": trainer_config,
        "seed": seed_value,
    },
    instance_key="scaling.job",
    will_resume=will_resume,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "scaling")
