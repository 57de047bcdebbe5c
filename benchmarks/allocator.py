"""Pretraining step time with freed memory kept in the process and without: tried, not kept.

    python -m benchmarks --only allocator      # about 6 minutes: 3 rounds x 2 settings x 3 families

glibc serves a block above its mmap threshold (at most 32 MiB) with a fresh `mmap` and unmaps it when
PyTorch frees it, so each training step page-faults its largest tensors back in (a decoder's logits
and their gradient are 4,096 x 8,192 floats, 128 MiB each): about 70,000 faults per step for the
default decoder. `keep_freed_memory` raises glibc's mmap and trim thresholds with `mallopt` (what
PyTorch's CPU guides get by preloading jemalloc or tcmalloc), so those blocks stay in the heap.
The faults go, but the gain is a few percent of a step, and the heap then only grows: a freed block
that a small allocation has split cannot take the next block of its size, and nothing is returned
to the system (docs/speed.md). So no stage uses it; this benchmark keeps the measurement.

The setting is process-wide and cannot be undone inside a process, so each sample is its own Python
process (`python -m benchmarks.allocator FAMILY KEEP STEPS`): it builds the family's default
pretraining step (dvc.yaml's `families`, as `time_to_quality` builds it), runs 3 untimed steps, then
times STEPS steps and counts the page faults they take. The two settings alternate, round after
round, and the ratio of the median seconds per step is the speed-up; the losses are the same in
both (checked: the allocator only decides where memory comes from).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import resource
import subprocess
import sys
import time

from benchmarks.common import Row, median

FAMILIES = ("encoder", "decoder", "encoder_decoder")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc's malloc.h)


def keep_freed_memory(limit: int = 1 << 30) -> bool:
    """Serve blocks below `limit` bytes from the heap and never trim it; True where glibc took both."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):  # no C library found, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, min(limit, 2**31 - 1))) and bool(
        mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    )


def sample(family: str, keep: bool, steps: int) -> dict[str, float]:
    """One process's median seconds per step and page faults per step, and its last step's loss."""
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
    if keep and not keep_freed_memory():
        raise SystemExit("allocator: glibc's mallopt is not available here")
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
