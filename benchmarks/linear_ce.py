"""The fused linear + cross-entropy on the default decoder's training step: tried, measured.

    python -m benchmarks --only linear_ce      # about 40 seconds on a 2-core CPU

The default decoder (dvc.yaml's `families`: 2 layers x 64 wide, 8,192-entry BPE, batches of 32 x 128)
spends most of its counted FLOPs in the vocabulary projection, and the step materialises its
4,096 x 8,192 logits and their gradient (128 MiB each) in full. A fused linear + cross-entropy
(Liger-Kernel's `FusedLinearCrossEntropy`, Wijmans et al. 2024 "Cut your losses") never holds them:
for each chunk of rows it projects the hidden states, takes the log-sum-exp, the argmax and the
softmax, writes the gradient of that chunk's logits in place and turns it at once into the
gradients of the hidden states and of the projection (two matmuls), so the logits of only one chunk
exist at a time. The forward pass leaves the gradients ready, as `objectives/losses.py` does.

That op is `objectives/losses.py`'s `linear_cross_entropy`, used by every objective when
`objective.loss_chunk` is set (its values and gradients equal `F.linear` + `F.cross_entropy` to float
rounding, tests/objectives/test_linear_ce.py). The benchmark runs the default decoder's whole
training step (the time_to_quality benchmark's `training_step`: collation, forward, backward,
clipping, AdamW, schedule) with `loss_chunk=null` (the head's logits, then `token_cross_entropy`)
and with several chunk sizes, interleaved in one process; the ratio is seconds per step of the
logits path over the fused one's.

The same comparison runs on the scaling sweep's smallest and largest grid cells (dvc.yaml's
`scaling_sweep`: 1,024-entry byte-level BPE, batches of 8 x 64, d_model 16 and 80), where the logits
are 512 x 1,024 (2 MiB) and a step is a few milliseconds: there the fused op's extra operations per
chunk could cost more than the memory traffic it saves, so its default chunk is measured there too.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.common import Row, interleave, median
from benchmarks.time_to_quality import optimizer_step, plan_of, recipes, stage_plan, training_step
from lmforge.objectives import CausalLMObjective
from lmforge.scaling import cell as cells_mod
from lmforge.scaling.sweep import Sweep, make_sweep
from lmforge.training.module import PretrainModule

CHUNKS = (64, 128, 256, 512, 1024)  # rows per chunk: 1,024 x 8,192 fp32 logits are 32 MiB


def objective(chunk: int | None):
    """The stage's causal LM objective -> the same objective with `loss_chunk=chunk` (None: logits)."""
    return lambda stage: CausalLMObjective(stage.label_smoothing, chunk)


def scaling_steps(sweep: Sweep, chunk: int | None) -> dict[str, Callable[[], object]]:
    """{cell name: one training step} for the sweep's smallest and largest grid cells, as
    `scaling.cell.train` builds them (model, objective with `loss_chunk=chunk`, AdamW and schedule,
    the sweep's data module)."""
    setting = sweep.setting._replace(objective=dataclasses.replace(sweep.setting.objective, loss_chunk=chunk))
    grid = [c for c in sweep.cells if c.kind == "grid" and c.seed == setting.seed]
    smallest = min(grid, key=lambda c: (c.params_total, c.steps))
    largest = max(grid, key=lambda c: (c.params_total, -c.steps))
    steps = {}
    for cell in (smallest, largest):
        torch.manual_seed(cell.seed)
        optim = dataclasses.replace(setting.optim, lr=cell.lr)
        module = PretrainModule(cell.model, setting.objective, optim, cell.steps)
        module.train()
        data = cells_mod.datamodule(setting, Path(tempfile.mkdtemp(prefix="linear_ce_")), cell.seed)
        steps[cell.name] = optimizer_step(module, data, setting.trainer.gradient_clip_val)
    return steps


def scaling_rows(quick: bool) -> list[Row]:
    """The default chunk against the logits path on the sweep's smallest and largest cells."""
    sweep = make_sweep(stage_plan("scaling_sweep.py", "scaling", []))  # the default sweep, checked once
    default = sweep.setting.objective.loss_chunk  # the chunk the sweep's cells train with
    logits, fused = scaling_steps(sweep, None), scaling_steps(sweep, default)
    steps = {**{f"logits {n}": s for n, s in logits.items()}, **{f"fused {n}": s for n, s in fused.items()}}
    samples = interleave(steps, rounds=5 if quick else 60, warmup=3)
    per_step = {name: median(values) for name, values in samples.items()}
    return [
        row(f"scaling cell {name}, chunk {default}", per_step[f"fused {name}"], per_step[f"logits {name}"])
        for name in logits
    ]


def row(name: str, fused: float, logits: float) -> Row:
    """A report row from seconds per step: the fused loss's against the head logits'."""
    return Row(
        group="linear_ce",
        name=name,
        ours=1 / fused,
        peer=1 / logits,
        unit="steps/s",
        peer_name="head logits + token_cross_entropy (objective.loss_chunk=null)",
        extra={"seconds_per_step": {"fused": fused, "stage": logits}},
    )


def run(quick: bool) -> list[Row]:
    plan = plan_of(recipes()["decoder"]["default"])
    torch.manual_seed(0)
    steps = {
        "stage": training_step(plan, swap=objective(None)),
        **{f"fused{c}": training_step(plan, swap=objective(c)) for c in CHUNKS},
    }
    samples = interleave(steps, rounds=3 if quick else 30, warmup=2)
    per_step = {name: median(values) for name, values in samples.items()}
    return [
        row(f"decoder step, chunk {c}", per_step[f"fused{c}"], per_step["stage"]) for c in CHUNKS
    ] + scaling_rows(quick)
