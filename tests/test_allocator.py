"""lmforge.allocator: a large block freed and allocated again comes back without page faults.

Each case runs in its own Python process (the setting is process-wide and would change the test
process). A 64 MiB block is above glibc's largest dynamic mmap threshold (32 MiB), so by default each
allocation maps fresh pages: 16,384 faults of 4 KiB when written; kept in the heap, the second
allocation reuses pages already faulted in.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)

PROBE = """
import json, resource, sys
import torch
if sys.argv[1] == "1":
    from lmforge.allocator import keep_freed_memory
    assert keep_freed_memory()
def written():
    block = torch.empty(16 * 1024 * 1024)  # 64 MiB of float32
    block.fill_(1.0)
    return float(block[-1])
written()  # first use: its pages fault in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
value = written()
print(json.dumps({"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, "value": value}))
"""


def faults(keep: bool) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(int(keep))], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_freed_block_comes_back_without_faults():
    kept = faults(keep=True)
    assert kept["value"] == 1.0
    assert kept["faults"] < 1_000  # a few pages of Python's own, not the block's 16,384


def test_without_it_the_same_block_faults_in_again():
    # the self-test: the probe can see the faults the setting removes
    default = faults(keep=False)
    assert default["value"] == 1.0
    assert default["faults"] >= 16_384 * 0.9


def test_it_does_nothing_where_the_c_library_is_not_found(monkeypatch):
    from lmforge import allocator

    monkeypatch.setattr(allocator.ctypes.util, "find_library", lambda name: "/no/such/libc.so")
    assert allocator.keep_freed_memory() is False
