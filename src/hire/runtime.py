"""Process-level settings for CPU training: its speed and its memory.

PyTorch on CPU takes every large tensor straight from the operating system (glibc ``mmap``) and hands it
back when freed, so each training step faults its activation buffers in again, page by page, and the
kernel zeroes every page first. HIRE's recurrences keep several step-sized buffers, so this costs it a
noticeable share of a step (``benchmarks/`` measures it). :func:`keep_freed_memory` tells glibc to serve large
blocks from its heap and keep freed memory for reuse, as a caching allocator would. The resident memory then
stays at the process's peak, which a training process reaches anyway.

The ``hire`` command and the benchmarks call it at start-up; Python users may call it themselves. Set
``HIRE_MALLOC_TUNING=0`` to leave the allocator alone. It does nothing off glibc (macOS, Windows, musl).

bf16 on CPU runs its matrix products through oneDNN, which caches a compiled kernel per operation and
shape (up to 1024 of them). Length-grouped batches bring a new shape almost every step, so the cache
rarely hits but keeps growing, until a long bf16 run (or two side by side) can run out of memory.
:func:`bound_kernel_cache` turns the cache off for the ``hire`` command: the losses are the same, and a step
costs a little more. Set ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` yourself to choose another size.
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
