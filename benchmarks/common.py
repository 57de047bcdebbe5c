"""What every benchmark shares: interleaved timing, the matmul peak, result rows and the JSON report.

The host drifts by +-20% within minutes, so a benchmark never compares numbers taken at different
times: `interleave` runs ours and the peer alternately, round after round, and the ratio of the
medians is what counts. MFU divides the FLOPs a step really does (counted from the shapes) by the
fp32 matmul peak measured in the same process (`matmul_peak`).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from lmforge.io import write_json

REPORTS = Path("reports/bench")


@dataclass
class Row:
    """One comparison: `ours` and `peer` in `unit` (higher is better), and their ratio."""

    group: str  # which report it belongs to (train_step, generation, ...)
    name: str  # what is compared, e.g. "gpt2 16x128"
    ours: float
    peer: float
    unit: str  # "tokens/s", "MB/s", ...
    peer_name: str  # e.g. "HF GPT2LMHeadModel"
    mfu_ours: float | None = None  # share of the measured matmul peak
    mfu_peer: float | None = None
    target: float | None = None  # the ratio the issue asks for, if any
    extra: dict[str, Any] = field(default_factory=dict)  # losses, token equality, shares ...

    @property
    def ratio(self) -> float:
        return self.ours / self.peer

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def interleave(
    fns: dict[str, Callable[[], Any]], *, rounds: int, warmup: int = 2, calls: int = 1
) -> dict[str, list[float]]:
    """Seconds per call of each function, measured round-robin: `rounds` samples of `calls` calls each.

    `warmup` untimed rounds first (allocator, caches, lazy init). The order inside a round alternates
    so neither side always runs right after the other's cache-warming.
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            start = time.perf_counter()
            for _ in range(calls):
                fns[name]()
            samples[name].append((time.perf_counter() - start) / calls)
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)


def matmul_peak(sizes: tuple[int, ...] = (1024, 2048), repeats: int = 5) -> float:
    """fp32 FLOP/s of the best square matmul over `sizes` (median of `repeats` runs each)."""
    best = 0.0
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b  # warm up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        best = max(best, 2 * n**3 / median(times))
    return best


def machine() -> dict[str, Any]:
    """Where the numbers came from: CPU model, threads, bf16 support, library versions."""
    cpu = ""
    flags: set[str] = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name") and not cpu:
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    info: dict[str, Any] = {
        "cpu": cpu or platform.processor(),
        "threads": torch.get_num_threads(),
        "native_bf16": bool(flags & {"avx512_bf16", "amx_bf16"}),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info


def write_report(
    group: str, rows: list[Row], peak: float, flat: dict[str, float] | None = None, **extra: Any
) -> Path:
    """reports/bench/<group>.json: flat numbers only (what `dvc metrics diff` compares), the rows' and
    any the group measured besides (`flat`); reports/bench/details/<group>.json: every row in full,
    the machine and the library versions."""
    path = REPORTS / f"{group}.json"
    metrics: dict[str, float] = {"matmul_peak_gflops": round(peak / 1e9, 1), **(flat or {})}
    for row in rows:
        key = row.name.replace(" ", "_")
        metrics[f"{key}.ratio"] = round(row.ratio, 3)
        metrics[f"{key}.ours"] = round(row.ours, 1)
        metrics[f"{key}.peer"] = round(row.peer, 1)
        if row.mfu_ours is not None:
            metrics[f"{key}.mfu_ours"] = round(row.mfu_ours, 3)
    write_json(path, metrics)
    write_json(
        REPORTS / "details" / f"{group}.json",
        {"machine": machine(), "rows": [row.as_dict() for row in rows], **extra},
    )
    return path
