"""Freed heap handed back to the system after a one-off large load.

glibc's malloc keeps what a process frees for reuse: the pages a big temporary allocation freed
stay in choird's resident memory for good, unless nothing lies above them in the heap. A load
that peaks once — the local embedder's tokenizer parses a JSON vocabulary of ~10 MB into
its own structures, then frees the parse — leaves megabytes choird will not need again;
`malloc_trim(0)` returns every whole free page of every arena (~2-4 MB there). Elsewhere than
glibc (musl, macOS) there is no such call, and nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


def trim_heap() -> bool:
    """Return the heap's free pages to the system; False where libc cannot be asked to."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]
