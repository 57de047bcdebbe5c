"""DVC stage `lora_grid_choice` (pipelines/experiments/dvc.yaml): the configuration of a fine-tuning
grid that validation chose, compared with a reference row on the test split
(reports/<grid>/summary.{md,json}; lmforge.finetune.grid says how).

python pipelines/finetune_grid.py grid=lora_encoder
"""

from lmforge.door import cli
from lmforge.finetune.grid import GridPlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "finetune_grid",
    run,
    GridPlan,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "grid")
