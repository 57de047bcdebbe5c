"""Time to quality: how much sooner the default pretraining recipe reaches the old recipe's final loss.

    python -m benchmarks --only time_to_quality      # about a minute; reads the two pipelines' curves

For the encoder and the decoder, the old recipe (recipe v1: the `pretrain_v1` stage of
pipelines/experiments/dvc.yaml) and the default one (the `pretrain` stage of dvc.yaml) each left a
validation curve. The target is the old recipe's final validation loss; each recipe's steps to reach
it come from its own curve (the first evaluation at or below the target, interpolated linearly with
the evaluation before it). Seconds per optimizer step are measured here, both recipes interleaved in
this one process on the same data (`common.interleave`): a step is the whole training step, batch
collation and masking included, without validation. Time to quality = steps x seconds per step; the
ratio is the speed-up (target >= 3). Both recipes use the same tokenizer (checked), so their losses
are in the same unit. A row also gives the default recipe's test scores (reports/eval/<family>.json).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import yaml
from hydra import compose, initialize_config_dir

from benchmarks.common import Row, interleave, median
from lmforge.curves import read_val_curve, steps_to
from lmforge.stage import Plan
from lmforge.structured import plain
from lmforge.training.datamodule import PretrainDataModule
from lmforge.training.module import PretrainModule
from lmforge.training.pretrain import prepare_run

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
TARGET = 3.0
FAMILIES = ("encoder", "decoder")


def pipeline_var(dvc_yaml: Path, name: str) -> Any:
    """A `vars:` entry of a dvc.yaml, e.g. the default pipeline's `families` (presets per family)."""
    entries = yaml.safe_load(dvc_yaml.read_text())["vars"]
    return next(v[name] for v in entries if isinstance(v, dict) and name in v)


def recipes() -> dict[str, dict[str, dict[str, str]]]:
    """{family: {"default": overrides, "v1": overrides}} as the two dvc.yaml files run them."""
    new = pipeline_var(ROOT / "dvc.yaml", "families")
    old = pipeline_var(ROOT / "pipelines/experiments/dvc.yaml", "recipe_v1")
    return {family: {"default": new[family], "v1": old[family]} for family in FAMILIES}


def stage_plan(entry_file: str, config_name: str, overrides: list[str]) -> Plan:
    """The validated plan of the stage `pipelines/<entry_file>` defines, composed from
    `conf/<config_name>.yaml` with `overrides` and no logger (what `dvc repro` runs, unlogged)."""
    import pipelines

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return pipelines.stage(Path(entry_file).stem).visible(
            compose(config_name=config_name, overrides=[*overrides, "logger=none"])
        )


def plan_of(recipe: dict[str, str]) -> Plan:
    """The pretrain stage's validated plan for one family's presets (what `dvc repro` runs)."""
    return stage_plan("pretrain.py", "config", [f"{group}={name}" for group, name in recipe.items()])


def curve(run_name: str) -> list[tuple[int, float]]:
    return read_val_curve(ROOT / "reports/pretrain" / run_name / "val_loss.csv")


def training_step(
    plan: Plan, swap: Callable[[torch.nn.Module], torch.nn.Module] | None = None
) -> Callable[[], torch.Tensor]:
    """One optimizer step of the recipe as the pretrain stage runs it: next batch of the training
    loader (collation and masking included), forward, backward, clipping, AdamW and the schedule.
    `swap` replaces the stage's objective by what it returns for it (benchmarks/linear_ce.py)."""
    job = prepare_run(plan)
    torch.manual_seed(job.seed)
    module = PretrainModule(
        job.model, plain(job.objective), plain(job.optim), max_steps=job.trainer.max_steps
    )
    if swap is not None:
        module.objective = swap(module.objective)
    module.train()
    data = PretrainDataModule(
        str(job.encoded_dir), job.objective, job.train, job.specials, job.vocab_size, job.seed
    )
    return optimizer_step(module, data, job.trainer.gradient_clip_val)


def optimizer_step(
    module: PretrainModule, data: PretrainDataModule, clip: float | None
) -> Callable[[], torch.Tensor]:
    """One optimizer step of `module` as Lightning runs it: the next batch of `data`'s training
    loader, forward, backward, clipping at `clip`, AdamW and the schedule."""
    optimization = module.configure_optimizers()
    optimizer, scheduler = optimization["optimizer"], optimization["lr_scheduler"]["scheduler"]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    batches = iter(data.loader("train", shuffle=True))

    def step() -> torch.Tensor:
        nonlocal batches
        try:
            batch = next(batches)
        except StopIteration:
            batches = iter(data.loader("train", shuffle=True))
            batch = next(batches)
        loss, _ = module(batch)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def family_row(family: str, recipe: dict[str, dict[str, str]], rounds: int) -> Row:
    plans = {name: plan_of(overrides) for name, overrides in recipe.items()}
    tokenizers = {name: plan.tokenizer.name for name, plan in plans.items()}
    if len(set(tokenizers.values())) != 1:
        raise SystemExit(f"time_to_quality {family}: recipes use tokenizers {tokenizers}; expected one")
    curves = {"default": curve(family), "v1": curve(f"v1_{family}")}
    target = curves["v1"][-1][1]  # the old recipe's final validation loss
    steps = {name: steps_to(points, target) for name, points in curves.items()}
    samples = interleave({name: training_step(plan) for name, plan in plans.items()}, rounds=rounds, warmup=3)
    per_step = {name: median(values) for name, values in samples.items()}
    hours = {name: (s * per_step[name] / 3600 if s is not None else None) for name, s in steps.items()}
    scores = json.loads((ROOT / "reports/eval" / f"{family}.json").read_text())
    extra: dict[str, Any] = {
        "target_val_loss": target,
        "tokenizer": tokenizers["default"],
        "steps_to_target": steps,
        "seconds_per_step": per_step,
        "seconds_to_target": {name: (h * 3600 if h is not None else None) for name, h in hours.items()},
        "default_final_val_loss": curves["default"][-1][1],
        "default_test": {
            k: scores[k] for k in ("test_loss", "test_accuracy", "test_perplexity") if k in scores
        },
    }
    reached = hours["default"] is not None
    return Row(
        group="time_to_quality",
        name=f"{family} to v1 final loss",
        ours=1 / hours["default"] if reached else 0.0,  # runs to the target per hour
        peer=1 / hours["v1"],
        unit="1/h",
        peer_name="recipe v1 (pipelines/experiments: pretrain_v1)",
        target=TARGET,
        extra=extra,
    )


def run(quick: bool = False) -> list[Row]:
    rows = [family_row(family, recipe, rounds=5 if quick else 20) for family, recipe in recipes().items()]
    for row in rows:
        e = row.extra
        steps = ", ".join(
            f"{k} {v:.0f}" if v is not None else f"{k} not reached" for k, v in e["steps_to_target"].items()
        )
        per = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in e["seconds_per_step"].items())
        print(
            f"  {row.name} {e['target_val_loss']:.3f}: steps to target {steps}; per step {per}; default test {e['default_test']}"
        )
    return rows
