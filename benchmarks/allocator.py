"""Pretraining step time with freed memory kept in the process (lmforge.allocator) and without.

    python -m benchmarks --only allocator      # about 6 minutes: 3 rounds x 2 settings x 3 families

The setting is process-wide and cannot be undone inside a process, so each sample is its own Python
process (`python -m benchmarks.allocator FAMILY KEEP STEPS`): it builds the family's default
pretraining step (dvc.yaml's `families`, as `time_to_quality` builds it), runs 3 untimed steps, then
times STEPS steps and counts the page faults they take. The two settings alternate, round after
round, and the ratio of the median seconds per step is the speed-up; the losses are the same in
both (checked: the allocator only decides where memory comes from).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from benchmarks.common import Row, median

FAMILIES = ("encoder", "decoder", "encoder_decoder")


def sample(family: str, keep: bool, steps: int) -> dict[str, float | list[float]]:
    """One process's seconds per step, page faults per step and the last step's loss."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.allocator", family, str(int(keep)), str(steps)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(quick: bool = False) -> list[Row]:
    rounds, steps = (1, 3) if quick else (3, 12)
    rows = []
    for family in FAMILIES:
        samples: dict[bool, list[dict]] = {True: [], False: []}
        for r in range(rounds):
            for keep in (True, False) if r % 2 == 0 else (False, True):
                samples[keep].append(sample(family, keep, steps))
        per_step = {keep: median([s["seconds"] for s in found]) for keep, found in samples.items()}
        faults = {keep: median([s["faults"] for s in found]) for keep, found in samples.items()}
        losses = {keep: found[0]["loss"] for keep, found in samples.items()}
        if losses[True] != losses[False]:
            raise SystemExit(f"allocator {family}: losses differ with and without: {losses}")
        rows.append(
            Row(
                group="allocator",
                name=f"{family} pretrain step",
                ours=1 / per_step[True],
                peer=1 / per_step[False],
                unit="steps/s",
                peer_name="glibc malloc defaults",
                extra={
                    "seconds_per_step": {"kept": per_step[True], "glibc_default": per_step[False]},
                    "page_faults_per_step": {"kept": faults[True], "glibc_default": faults[False]},
                    "loss_after_steps": losses[True],
                },
            )
        )
        print(
            f"  {family}: {per_step[True] * 1000:.0f} ms/step kept, {per_step[False] * 1000:.0f} ms default; "
            f"page faults per step {faults[True]:.0f} / {faults[False]:.0f}",
            flush=True,
        )
    return rows


def worker(family: str, keep: bool, steps: int) -> None:
    if keep:
        from lmforge.allocator import keep_freed_memory

        keep_freed_memory()
    import torch

    from benchmarks.time_to_quality import ROOT, pipeline_var, plan_of, training_step

    step = training_step(plan_of(pipeline_var(ROOT / "dvc.yaml", "families")[family]))
    for _ in range(3):
        loss = step()
    seconds, faults = [], []
    for _ in range(steps):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        loss = step()
        seconds.append(time.perf_counter() - start)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(
        json.dumps(
            {"seconds": median(seconds), "faults": median(faults), "loss": float(torch.as_tensor(loss))}
        )
    )


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]))
