"""DVC stage `finetune`: fine-tune one starting point on one task, score it on the test split beside
the task's baselines. A row of the summary is a config under conf/row/ (task x start x adaptation);
DVC runs every row in one process, `--multirun 'row=glob(*)'`, so Lightning is imported once.

python pipelines/finetune.py row=minilm-qa                              # one row of the summary
python pipelines/finetune.py --multirun 'row=glob(*)'                   # every row (the DVC stage)
python pipelines/finetune.py task=pos run_name=my-pos                   # our pretrained encoder
python pipelines/finetune.py task=pos finetune.init=scratch run_name=scratch-pos-2
python pipelines/finetune.py task=topic finetune=minilm adapt=lora run_name=minilm-topic-lora
python pipelines/finetune.py task=sentiment finetune.backbone=decoder finetune.tokenizer=bpe run_name=gpt-sst
python pipelines/finetune.py --multirun row=encoder-sentiment,encoder-topic finetune.seeds=[0,1,2]
python pipelines/finetune.py row=encoder-pos trainer=ddp_cpu                # 2 processes (gloo)
"""

from lmforge.door import cli
from lmforge.finetune.stage import LOOP, FinetunePlan, run, starts_from
from lmforge.stage import Stage

STAGE = Stage(
    "finetune",
    run,
    FinetunePlan,
    instance_key="run_name",
    starts_from=starts_from,  # tags the row with the pretraining (or distillation) run it starts from
    score=("test/score", "max"),  # the row's mean test score over its seeds
    registers=lambda plan: f"finetune-{plan.task.name}",  # the best row of each task: @champion
    decided=LOOP,
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
