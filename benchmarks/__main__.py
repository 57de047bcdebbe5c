"""Every benchmark in one process, one table: `python -m benchmarks` (a few minutes on 2 cores).

    python -m benchmarks                    # all groups, writes reports/bench/<group>.json
    python -m benchmarks --only train_step  # some groups
    python -m benchmarks --quick            # fewer rounds: a smoke run, numbers not written
    python -m benchmarks --compile          # train_step also runs ours under torch.compile
    python -m benchmarks --only data_scale  # the data stages at 10 MB, 100 MB, 1 GB (~40 min; not in "all")
    python -m benchmarks --only knob_cost   # seconds per step of each speedrun knob (~3 min; not in "all")

Ours and the peer of each row run interleaved in the same process (the host drifts +-20% within
minutes); the ratio is ours / peer, higher is better. MFU is the share of the fp32 matmul peak
measured at the start of the run. `transformers` is needed here only (`pip install -e .[dev]`).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # before tokenizers is imported

from benchmarks import (
    allocator,
    data_pipeline,
    data_scale,
    dvc_status,
    generation,
    knob_cost,
    lightning_overhead,
    linear_ce,
    norms,
    time_to_quality,
    tokenizers_bench,
    train_step,
)
from benchmarks.common import Row, machine, matmul_peak, write_report

GROUPS = {
    "train_step": lambda quick, peak, compiled: train_step.run(quick, peak=peak, compiled=compiled),
    "generation": lambda quick, peak, compiled: generation.run(quick),
    "tokenizers": lambda quick, peak, compiled: tokenizers_bench.run(quick),
    "lightning": lambda quick, peak, compiled: lightning_overhead.run(quick),
    "data": lambda quick, peak, compiled: data_pipeline.run(quick),
    "time_to_quality": lambda quick, peak, compiled: time_to_quality.run(quick),
    "allocator": lambda quick, peak, compiled: allocator.run(quick),
    "linear_ce": lambda quick, peak, compiled: linear_ce.run(quick),
    "dvc": lambda quick, peak, compiled: dvc_status.run(quick),
    "norms": lambda quick, peak, compiled: norms.run(quick),
    "data_scale": lambda quick, peak, compiled: data_scale.run(quick),  # rows and flat keys
    "knob_cost": lambda quick, peak, compiled: knob_cost.run(quick),
}
ON_REQUEST = ("data_scale", "knob_cost")  # groups that run only when --only names them


def fmt(value: float | None, pattern: str) -> str:
    return "" if value is None else format(value, pattern)


def table(rows: list[Row]) -> str:
    header = f"{'benchmark':34s} {'ours':>11s} {'peer':>11s} {'unit':9s} {'ratio':>6s} {'target':>6s} {'MFU':>9s}  peer"
    lines = [header, "-" * len(header)]
    for row in rows:
        mfu = f"{row.mfu_ours:.0%}/{row.mfu_peer:.0%}" if row.mfu_ours is not None else ""
        lines.append(
            f"{row.group + ' ' + row.name:34s} {row.ours:11.1f} {row.peer:11.1f} {row.unit:9s} "
            f"{row.ratio:6.2f} {fmt(row.target, '6.2f'):>6s} {mfu:>9s}  {row.peer_name}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(GROUPS), help="groups to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds; reports are not written")
    parser.add_argument("--compile", action="store_true", help="train_step: also ours under torch.compile")
    args = parser.parse_args()
    info = machine()
    peak = matmul_peak()
    print(
        f"{info['cpu']}, {info['threads']} threads, native bf16: {info['native_bf16']}, torch {info['torch']}"
    )
    print(f"fp32 matmul peak {peak / 1e9:.0f} GFLOP/s")
    rows: list[Row] = []
    for group in args.only or [g for g in GROUPS if g not in ON_REQUEST]:
        start = time.perf_counter()
        result = GROUPS[group](args.quick, peak, args.compile)
        group_rows, flat = result if isinstance(result, tuple) else (result, {})
        print(f"{group}: {time.perf_counter() - start:.0f} s", flush=True)
        if not args.quick:
            write_report(group, group_rows, peak, flat)
        rows += group_rows
    print(table(rows))


if __name__ == "__main__":
    main()
