"""DVC stage `translate_eval`: BLEU and chrF on the test books (sacreBLEU), baselines, samples, beam plot.

python pipelines/translate_eval.py translate.decode.beam_size=8 translate.decode.length_penalty=1.0
"""

import hydra
from omegaconf import DictConfig

from lmforge.stage import Stage, run_name_value
from lmforge.tracking import execute
from lmforge.translate.config import pairs_config, translate_config
from lmforge.translate.evaluate import run

STAGE = Stage(
    "translate_eval",
    run,
    reads={
        "pairs": pairs_config,
        "translate": translate_config,
        "run_name": run_name_value,
    },
    instance_key="run_name",
)


@hydra.main(config_path="../conf", config_name="translate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    execute(STAGE, cfg)


if __name__ == "__main__":
    main()
