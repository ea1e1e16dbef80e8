"""The machine a run trains and is measured on: whether the CPU has bf16 units, the mixed precision ``auto``
resolves to here, and the description (processor, cores, accelerator, library versions) every result records."""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path
from typing import Any

from hire.checks import ConfigError


@functools.cache
def cpuinfo() -> str | None:
    """/proc/cpuinfo (the processor's name and feature flags), read once; None where there is none (not Linux)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return None


def cpu_has_fast_bf16() -> bool:
    flags = cpuinfo() or ""
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_mixed_precision(choice: str, option: str = "--mixed_precision") -> str:
    """``auto`` -> bf16 on GPUs and CPUs with fast bf16, fp16 on older GPUs, else no.

    ``fp16`` needs a CUDA GPU: without one, Accelerate would run in fp32 while the run records fp16, so it is a
    :class:`ConfigError` naming ``option`` (the option that gave ``choice``). An explicit ``bf16`` on a Linux CPU
    without bf16 units warns: torch emulates it there, many times slower than fp32
    (``benchmarks/results/cpu-2core-avx2`` measures it).
    """
    import torch

    if choice == "fp16" and not torch.cuda.is_available():
        raise ConfigError(f"{option} fp16: needs a CUDA GPU, and there is none here; on a CPU use bf16, no or auto")
    if choice == "bf16" and not torch.cuda.is_available() and cpuinfo() is not None and not cpu_has_fast_bf16():
        warnings.warn("mixed precision bf16 on a CPU without bf16 units (neither avx512_bf16 nor amx_bf16 in "
                      "/proc/cpuinfo): torch emulates bf16 here, tens of times slower than fp32; mixed precision "
                      "'auto' picks fp32 on this CPU", RuntimeWarning, stacklevel=2)
    if choice != "auto":
        return choice
    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_fast_bf16() else "no"


def machine() -> dict[str, Any]:
    """What a result was measured on: processor, cores, accelerator, library versions."""
    import platform

    import torch
    import transformers

    names = [line.split(":", 1)[1].strip() for line in (cpuinfo() or "").splitlines() if line.startswith("model name")]
    cpu = names[0] if names else platform.processor() or platform.machine()
    info: dict[str, Any] = {"cpu": cpu, "cpu_count": os.cpu_count(), "fast_bf16_cpu": cpu_has_fast_bf16(),
                            "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                            "transformers": transformers.__version__, "python": platform.python_version()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = torch.cuda.device_count()
    return info
