"""`trim_heap` hands the pages a freed allocation left in the heap back to the system."""

from __future__ import annotations

import ctypes
import platform

import pytest

from choir.daemon.heap import trim_heap

BLOCK = 64 * 1024
"""Below glibc's mmap threshold: these come from the heap, not from mmaps of their own."""
BLOCKS = 400


def resident_mb() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_heap_pages_leave_the_resident_set() -> None:
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
    for block in blocks:
        ctypes.memset(block, 1, BLOCK)  # resident
    pinned = libc.malloc(BLOCK)  # above them: free() alone cannot shrink the heap's top
    for block in blocks:
        libc.free(block)
    before = resident_mb()
    assert trim_heap()
    after = resident_mb()
    libc.free(pinned)
    assert before - after > BLOCKS * BLOCK / 2**20 / 2  # most of the ~25 MB freed
