"""DVC stage `translate_eval`: BLEU and chrF on the test books (sacreBLEU), baselines, samples, beam plot.

python pipelines/translate_eval.py translate.decode.beam_size=8 translate.decode.length_penalty=1.0
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.translate.config import TranslateEvalPlan
from lmforge.translate.evaluate import run

STAGE = Stage(
    "translate_eval",
    run,
    TranslateEvalPlan,
    instance_key="run_name",
    evaluates=lambda plan: plan.translate.out_dir,  # links to translate_train's run, whose model it registers
    score=("bleu", "max"),
)


if __name__ == "__main__":
    cli(STAGE, __file__, "translate")
