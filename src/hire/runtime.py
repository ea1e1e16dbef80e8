"""Process-level settings for CPU training: its speed and its memory.

PyTorch on CPU takes every large tensor straight from the operating system (glibc ``mmap``) and hands it
back when freed, so each training step faults its activation buffers in again, page by page, and the
kernel zeroes every page first. For HIRE, whose recurrences keep several step-sized buffers, that costs
20-35% of a step (measured in benchmarks/). :func:`keep_freed_memory` tells glibc to serve large blocks
from its heap and keep freed memory for reuse, as a caching allocator would. The resident memory then
stays at the process's peak, which a training process reaches anyway.

The ``hire`` command and the benchmarks call it at start-up; Python users may call it themselves. Set
``HIRE_MALLOC_TUNING=0`` to leave the allocator alone. It does nothing off glibc (macOS, Windows, musl).

bf16 on CPU runs its matrix products through oneDNN, which caches a compiled kernel per operation and
shape (up to 1024 of them). Length-grouped batches bring a new shape almost every step, so the cache
rarely hits but keeps growing: a 12-layer (STS-B) and an 8-layer (MRPC) MiniLM copy with HIRE reached
11.7 and 11.1 GiB resident side by side, and the first was killed on a 24 GiB machine. With no cache, two
12-layer runs (STS-B and MRPC, resumed at steps 800 and 115) went side by side to their ends at 7.6 and
7.2 GiB at most, and a probe of 80 steps ended at 4.2 GiB against 5.8-6.1 GiB with the cache, same losses.
:func:`bound_kernel_cache` turns the cache off for the ``hire`` command, for about 1% of a length-grouped
step and 3-8% of a fixed-shape one (measured beside other runs on a 2-core AMD EPYC, so roughly).
Set ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` yourself to choose another size.
"""

from __future__ import annotations

import ctypes
import os

KERNEL_CACHE_VAR = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"  # read by oneDNN when it first builds a kernel
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


def bound_kernel_cache(capacity: int = 0) -> str:
    """Set oneDNN's kernel cache size unless the user has; call before torch runs its first CPU kernel.

    Returns the size in effect. oneDNN reads the variable once, so a later change does nothing.
    """
    return os.environ.setdefault(KERNEL_CACHE_VAR, str(capacity))
