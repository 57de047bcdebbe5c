"""Keep freed memory in the process, so that a training step does not page-fault its tensors back in.

A training step allocates the same large tensors every step: a small decoder's logits and their
gradient are 4,096 x 8,192 floats (128 MiB) each. glibc's malloc serves any block above its mmap
threshold (128 KiB, raised dynamically to at most 32 MiB) with a fresh `mmap` and returns it with
`munmap` when PyTorch frees it, so the next step takes a page fault for every 4 KiB of it and the
kernel zeroes each page again: about 70,000 faults per step for the default decoder. Raising the
mmap threshold and the heap's trim threshold keeps those blocks in the heap, where the next step
reuses them. The same is what PyTorch's CPU performance guides get by preloading jemalloc or
tcmalloc, done here with glibc's own `mallopt` so nothing needs installing. Numbers do not change
(only where memory comes from); `benchmarks/allocator.py` measures the step time with and without.

Memory that a process freed stays its own until it exits (its peak stays resident), which is what a
training process wants. Where the C library is not glibc (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

KEEP_BELOW = 1 << 30  # blocks up to 1 GiB come from the heap and stay there when freed


def keep_freed_memory(limit: int = KEEP_BELOW) -> bool:
    """Serve blocks below `limit` bytes from the heap and never trim it; True where glibc took both."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # no C library found, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    limit = min(int(limit), 2**31 - 1)  # mallopt takes a C int
    return bool(mallopt(M_MMAP_THRESHOLD, limit)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
