"""Process-level settings that make CPU training fast.

PyTorch on CPU takes every large tensor straight from the operating system (glibc ``mmap``) and hands it
back when freed, so each training step faults its activation buffers in again, page by page, and the
kernel zeroes every page first. For HIRE, whose recurrences keep several step-sized buffers, that costs
20-35% of a step (measured in benchmarks/). :func:`keep_freed_memory` tells glibc to serve large blocks
from its heap and keep freed memory for reuse, as a caching allocator would. The resident memory then
stays at the process's peak, which a training process reaches anyway.

The ``hire`` command and the benchmarks call it at start-up; Python users may call it themselves. Set
``HIRE_MALLOC_TUNING=0`` to leave the allocator alone. It does nothing off glibc (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)
_done = False


def keep_freed_memory() -> bool:
    """Serve large allocations from glibc's heap and never trim it; True if the setting took effect."""
    global _done
    if _done or os.environ.get("HIRE_MALLOC_TUNING", "1") == "0":
        return _done
    try:
        libc = ctypes.CDLL("libc.so.6")
        _done = bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):  # not glibc
        _done = False
    return _done
