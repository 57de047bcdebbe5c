"""DVC stage `evaluate`: test metrics of a pretrained model beside a unigram baseline, plus samples.

python pipelines/evaluate.py model=gpt_tiny objective=clm tokenizer=bpe run_name=decoder
"""

from lmforge.door import cli
from lmforge.evaluation.config import eval_config
from lmforge.evaluation.evaluate import run
from lmforge.stage import Stage, run_name_value, seed_value
from lmforge.tokenizer.config import tokenizer_config
from lmforge.training.config import objective_config, train_config

STAGE = Stage(
    "evaluate",
    run,
    reads={
        "tokenizer": tokenizer_config,
        "objective": objective_config,
        "train": train_config,
        "eval": eval_config,
        "seed": seed_value,
        "run_name": run_name_value,
    },
    instance_key="run_name",
    evaluates=lambda plan: plan.train.out_dir,  # links to the pretrain run, whose model it registers
    score=("test_loss", "min"),
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
