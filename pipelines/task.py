"""DVC stage `task`: fetch one labelled task's source (pinned, sha256-checked, cached), split it once
and write data/tasks/<name>/{train,val,test}.jsonl with a data card.

python pipelines/task.py task=topic
"""

from lmforge.door import cli
from lmforge.stage import Stage
from lmforge.tasks.build import TaskPlan, run

STAGE = Stage(
    "task",
    run,
    TaskPlan,
    instance_key="task.name",
)


if __name__ == "__main__":
    cli(STAGE, __file__, "config")
