"""The DVC stages' entry points: one thin module per stage, `pipelines/<name>.py`, each defining
`STAGE` (what it reads and does) and handing it to the Hydra door when run as a script.

`STAGES` is their registry, each entry point with the primary config it composes (conf/<name>.yaml);
code that needs the stages (scripts/dvc_yaml.py's deps, scripts/conf_bases.py's group files, the
tests) imports them from here, and tests/test_stage_plan.py checks that the registry and the folder
agree. Tools that are not stages live in scripts/ and benchmarks/.
"""

from __future__ import annotations

import importlib
from typing import Any

STAGES = {
    "prepare": "config",
    "train_tokenizer": "config",
    "encode": "config",
    "pretrain": "config",
    "evaluate": "config",
    "interpret": "interpret",
    "export": "export",
    "task": "config",
    "finetune": "config",
    "finetune_summary": "config",
    "finetune_sequential": "sequential",
    "finetune_grid": "grid",
    "distill": "config",
    "distill_summary": "config",
    "translate_data": "translate",
    "translate_tokenizer": "translate",
    "translate_train": "translate",
    "translate_eval": "translate",
    "translate_warmup": "translate",
    "translate_length": "translate",
    "scaling_sweep": "scaling",
    "scaling_fit": "scaling",
    "scaling_plots": "scaling",
    "scaling_compare": "scaling",
    "learning_curves": "learning_curves",
    "arch_eval": "arch",
    "positions_probe": "positions_probe",
    "induction": "induction",
    "induction_summary": "induction",
    "findings": "findings",
}


def stage(name: str) -> Any:
    """The `STAGE` of entry point `name` (a key of `STAGES`)."""
    if name not in STAGES:
        raise KeyError(f"{name!r} is not a stage entry point; expected one of {', '.join(STAGES)}")
    return importlib.import_module(f"pipelines.{name}").STAGE
