"""What each of the speedrun's knobs costs per training step, so an ablation can run them at equal CPU time.

    python -m benchmarks --only knob_cost     # about 3 minutes on a 2-core CPU; not in "all"

For the encoder and the decoder of dvc.yaml's `families`, the default recipe and the recipe with one
knob changed (`KNOBS`: Muon for the stacks' matrices, QK-norm, ReLU², zero-initialised residual
outputs, logit soft-capping, the warmup-stable-decay schedule, one value-embedding table read by the
first and the last layer, the skip connections from the embedding, training blocks that start at a
sentence or at a document) each run the pretrain stage's whole
training step (the time_to_quality benchmark's `training_step`: collation and masking, forward,
backward, clipping, the optimiser and the schedule), interleaved in this one process. The row's
ratio is the default's seconds per step over the knob's (below 1: the knob makes a step dearer).

`steps_at_equal_time` in the details report is how many steps of the knob's recipe take the CPU time
of the default recipe's `trainer.max_steps`: `scripts/ablation.py` reads it to set each run's length,
the knob study's method (docs/pretraining.md#knob-study), instead of timings copied into a script.
"""

from __future__ import annotations

from benchmarks.common import Row, interleave, median
from benchmarks.time_to_quality import plan_of, recipe_overrides, recipes, stage_plan, training_step

FAMILIES = ("decoder", "encoder")
# knob name -> pretrain overrides that switch it on, over the family's default recipe
KNOBS: dict[str, tuple[str, ...]] = {
    "muon": ("optim.algorithm=muon",),
    "qk_norm": ("model.qk_norm=true",),
    "relu2": ("model.activation=relu2",),
    "zero_init": ("model.zero_init_residual=true",),
    "softcap": ("model.logit_softcap=15",),
    "wsd": ("optim.schedule=wsd",),
    "value_embed": ("model.value_embeddings=1",),
    "x0_skip": ("model.embedding_skip=true",),
    "sentence_start": ("objective.block_start=sentence",),
    "doc_start": ("objective.block_start=document",),
}
# Knobs that leave a step's computation as it is (the initial weights, the rate's schedule, where the
# training blocks start): their rows measure only the benchmark's noise, and the ablation runs them for
# the default's steps.
SAME_STEP = frozenset({"zero_init", "wsd", "sentence_start", "doc_start"})


def family_overrides(family: str) -> list[str]:
    """The family's default recipe (dvc.yaml's `families`) as pretrain overrides."""
    return recipe_overrides(recipes()[family]["default"])


def default_max_steps(family: str) -> int:
    return plan_of(recipes()[family]["default"]).trainer.max_steps


def step_seconds(runs: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """{name: median seconds per training step} of each pretrain recipe (overrides), interleaved."""
    steps = {
        name: training_step(stage_plan("pretrain.py", "config", overrides))
        for name, overrides in runs.items()
    }
    return {name: median(values) for name, values in interleave(steps, rounds=rounds, warmup=3).items()}


def family_rows(family: str, rounds: int) -> list[Row]:
    base = family_overrides(family)
    per_step = step_seconds({"default": base, **{k: [*base, *o] for k, o in KNOBS.items()}}, rounds)
    max_steps = default_max_steps(family)
    rows = []
    for knob in KNOBS:
        rows.append(
            Row(
                group="knob_cost",
                name=f"{family} {knob}",
                ours=1 / per_step[knob],
                peer=1 / per_step["default"],
                unit="steps/s",
                peer_name=f"the default {family} recipe",
                extra={
                    "overrides": list(KNOBS[knob]),
                    "seconds_per_step": per_step[knob],
                    "default_seconds_per_step": per_step["default"],
                    "default_max_steps": max_steps,
                    "steps_at_equal_time": round(max_steps * per_step["default"] / per_step[knob]),
                },
            )
        )
    return rows


def run(quick: bool = False) -> list[Row]:
    rows = [row for family in FAMILIES for row in family_rows(family, rounds=5 if quick else 20)]
    for row in rows:
        e = row.extra
        print(
            f"  {row.name}: {e['seconds_per_step'] * 1000:.0f} ms against {e['default_seconds_per_step'] * 1000:.0f} ms "
            f"per step; {e['steps_at_equal_time']} steps in the time of {e['default_max_steps']}"
        )
    return rows
