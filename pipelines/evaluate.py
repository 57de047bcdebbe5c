"""DVC stage `evaluate`: test metrics of a pretrained model beside a unigram baseline, plus samples.

python pipelines/evaluate.py model=gpt_tiny objective=clm tokenizer=bpe run_name=decoder
"""

from lmforge.door import cli
from lmforge.evaluation.evaluate import EvaluatePlan, run
from lmforge.stage import Stage

STAGE = Stage(
    "evaluate",
    run,
    EvaluatePlan,
    instance_key="run_name",
    evaluates=lambda plan: plan.train.out_dir,  # links to the pretrain run, whose model it registers
    score=("test_loss", "min"),
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
