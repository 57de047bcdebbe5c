"""DVC stage `scaling_fit`: the sweep's table -> L(N, D) = E + A/N^alpha + B/D^beta with bootstrap
intervals and held-out error, the IsoFLOP optima and exponents, and the table beside published laws.

python pipelines/scaling_fit.py                      # reports/scaling/default/{fit.json,law.md}
python pipelines/scaling_fit.py scaling.fit.params=total scaling.fit.n_boot=1000
"""

from lmforge.door import cli
from lmforge.scaling.analysis import run
from lmforge.scaling.config import ScalingPlan
from lmforge.stage import Stage

STAGE = Stage(
    "scaling_fit",
    run,
    ScalingPlan,
    instance_key="scaling.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "scaling")
