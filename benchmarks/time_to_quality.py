"""Time to quality: how much sooner the default pretraining recipe reaches each older recipe's final loss.

    python -m benchmarks --only time_to_quality      # about a minute; reads the two pipelines' curves

For the encoder and the decoder, each older recipe (`OLDER`: recipe v2, the default before v3, and
recipe v1, the one before it; the `pretrain_old` stage of pipelines/experiments/dvc.yaml) and the default one (the `pretrain` stage of dvc.yaml) each left a
validation curve. A row's target is the older recipe's final validation loss; each recipe's steps to
reach it come from its own curve (the first evaluation at or below the target, interpolated linearly
with the evaluation before it). Seconds per optimizer step are measured here, all the family's
recipes interleaved in this one process on the same data (`common.interleave`): a step is the whole
training step, batch collation and masking included, without validation. Time to quality = steps x
seconds per step; the ratio is the speed-up (the target is `OLDER`'s). All recipes use the same
tokenizer (checked), so their losses are in the same unit. A row also gives the default recipe's test
scores (reports/eval/<family>.json).
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
from lmforge.training.datamodule import PretrainDataModule
from lmforge.training.module import PretrainModule
from lmforge.training.pretrain import PretrainPlan, prepare_run

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
FAMILIES = ("encoder", "decoder")
# The older recipes, each family's run `<name>_<family>` of pipelines/experiments/dvc.yaml's
# `pretrain_old` (its `old_recipes` var), and the speed-up the default must reach on each (issue 54: >= 2x v2, so >= 7x v1).
OLDER = {"v2": 2.0, "v1": 7.0}


def pipeline_var(dvc_yaml: Path, name: str) -> Any:
    """A `vars:` entry of a dvc.yaml, e.g. the default pipeline's `families` (presets per family)."""
    entries = yaml.safe_load(dvc_yaml.read_text())["vars"]
    return next(v[name] for v in entries if isinstance(v, dict) and name in v)


def recipes() -> dict[str, dict[str, dict[str, str]]]:
    """{family: {"default": presets, "v2": presets, "v1": presets}} as the two dvc.yaml files run them."""
    new = pipeline_var(ROOT / "dvc.yaml", "families")
    old = pipeline_var(ROOT / "pipelines/experiments/dvc.yaml", "old_recipes")
    return {
        family: {"default": new[family], **{n: old[f"{n}_{family}"] for n in OLDER}} for family in FAMILIES
    }


def stage_plan(entry_file: str, config_name: str, overrides: list[str]) -> Plan:
    """The validated plan of the stage `pipelines/<entry_file>` defines, composed from
    `conf/<config_name>.yaml` with `overrides` and no logger (what `dvc repro` runs, unlogged)."""
    import pipelines

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return pipelines.stage(Path(entry_file).stem).visible(
            compose(config_name=config_name, overrides=[*overrides, "logger=none"])
        )


def recipe_overrides(recipe: dict[str, str]) -> list[str]:
    """A family's presets ({group: preset}) as pretrain overrides (`group=preset`)."""
    return [f"{group}={name}" for group, name in recipe.items()]


def plan_of(recipe: dict[str, str]) -> PretrainPlan:
    """The pretrain stage's validated plan for one family's presets (what `dvc repro` runs)."""
    plan = stage_plan("pretrain.py", "config", recipe_overrides(recipe))
    assert isinstance(plan, PretrainPlan)
    return plan


def curve(run_name: str) -> list[tuple[int, float]]:
    return read_val_curve(ROOT / "reports/pretrain" / run_name / "val_loss.csv")


def training_step(
    plan: PretrainPlan, swap: Callable[[torch.nn.Module], torch.nn.Module] | None = None
) -> Callable[[], torch.Tensor]:
    """One optimizer step of the recipe as the pretrain stage runs it: next batch of the training
    loader (collation and masking included), forward, backward, clipping, AdamW and the schedule.
    `swap` replaces the stage's objective by what it returns for it (benchmarks/linear_ce.py)."""
    job = prepare_run(plan, plan.model)
    torch.manual_seed(job.seed)
    module = PretrainModule(job.model, job.objective, job.optim, job.trainer.max_steps)
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


def family_rows(family: str, recipe: dict[str, dict[str, str]], rounds: int) -> list[Row]:
    """One row per older recipe: how much sooner the default reaches its final validation loss."""
    plans = {name: plan_of(overrides) for name, overrides in recipe.items()}
    tokenizers = {name: plan.tokenizer.name for name, plan in plans.items()}
    if len(set(tokenizers.values())) != 1:
        raise SystemExit(f"time_to_quality {family}: recipes use tokenizers {tokenizers}; expected one")
    curves = {name: curve(family if name == "default" else f"{name}_{family}") for name in recipe}
    samples = interleave({name: training_step(plan) for name, plan in plans.items()}, rounds=rounds, warmup=3)
    per_step = {name: median(values) for name, values in samples.items()}
    scores = json.loads((ROOT / "reports/eval" / f"{family}.json").read_text())
    rows = []
    for old, target_ratio in OLDER.items():
        target = curves[old][-1][1]  # the older recipe's final validation loss
        steps = {name: steps_to(curves[name], target) for name in ("default", old)}
        seconds = {name: (s * per_step[name] if s is not None else None) for name, s in steps.items()}
        extra: dict[str, Any] = {
            "target_val_loss": target,
            "tokenizer": tokenizers["default"],
            "steps_to_target": steps,
            "seconds_per_step": {name: per_step[name] for name in ("default", old)},
            "seconds_to_target": seconds,
            "default_final_val_loss": curves["default"][-1][1],
            "default_test": {
                k: scores[k] for k in ("test_loss", "test_accuracy", "test_perplexity") if k in scores
            },
        }
        reached = seconds["default"] is not None
        rows.append(
            Row(
                group="time_to_quality",
                name=f"{family} to {old} final loss",
                ours=3600 / seconds["default"] if reached else 0.0,  # runs to the target per hour
                peer=3600 / seconds[old],
                unit="1/h",
                peer_name=f"recipe {old} (pipelines/experiments: pretrain_old@{old}_{family})",
                target=target_ratio,
                extra=extra,
            )
        )
    return rows


def run(quick: bool = False) -> list[Row]:
    rows = [
        row
        for family, recipe in recipes().items()
        for row in family_rows(family, recipe, rounds=5 if quick else 20)
    ]
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
