"""Writes pipelines/dvc_vars.yaml, the values dvc.yaml cannot find itself: `tasks`, every labelled
task that some fine-tuning row (conf/row/*.yaml, conf/distill_row/*.yaml, and the rows of
pipelines/experiments/dvc.yaml under conf/row/extra/) trains on, each of which becomes a
`task@<name>` stage. DVC resolves `vars` when it parses dvc.yaml, before any stage runs,
so the file is committed and `make repro` rewrites it first; tests/test_dvc_vars.py fails while the
committed file disagrees with conf/.

python pipelines/dvc_vars.py            # rewrite pipelines/dvc_vars.yaml
"""

from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir

from lmforge.io import write_text

ROOT = Path(__file__).resolve().parents[1]
VARS = ROOT / "pipelines" / "dvc_vars.yaml"
ROW_GROUPS = ("row", "distill_row")  # the config groups whose options are fine-tuning rows
HEADER = "# Written by `python pipelines/dvc_vars.py` from conf/row/ and conf/distill_row/: do not edit.\n"


def row_tasks(conf: Path) -> list[str]:
    """The task of every row, as Hydra composes it (a row may leave the default task in place)."""
    tasks = set()
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        for group in ROW_GROUPS:
            for row in sorted((conf / group).rglob("*.yaml")):
                option = row.relative_to(conf / group).with_suffix("").as_posix()  # extra/<row>
                tasks.add(compose("config", overrides=[f"{group}={option}"]).task.name)
    return sorted(tasks)


def render(conf: Path) -> str:
    return HEADER + yaml.safe_dump({"tasks": row_tasks(conf)}, default_flow_style=None, sort_keys=False)


if __name__ == "__main__":
    write_text(VARS, render(ROOT / "conf"))  # atomic: DVC never reads half a file
