"""The checks every lab command makes before any work: its output folder, its encoders, its device, its number
grids. Each raises a one-line :class:`~hire.config.ConfigError` naming the option at fault, which the ``hire``
command's handler prints (exit status 2), so a bad option costs no encoding and no fitting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hire.config import ConfigError
from hire.options import split_words


def positive_numbers(option: str, text: str) -> tuple[float, ...]:
    """A grid option (``--c_grid 0.01,0.1,1``): positive numbers separated by commas; ConfigError otherwise."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"{option}: expected numbers separated by commas, not {text!r}") from None
    if not values or any(not v > 0 for v in values):  # not > 0: NaN is no strength either
        raise ConfigError(f"{option}: expected positive numbers separated by commas, not {text!r}")
    return values


def encoders_and_labels(encoder_words: list[str], label_words: list[str], option: str = "--encoder",
                        ) -> tuple[list[str], list[str]]:
    """The encoders (``option``'s words) and ``--labels``, checked: at least one encoder, a distinct name for
    each."""
    encoders, labels = split_words(encoder_words), split_words(label_words)
    if not encoders:
        raise ConfigError(f"{option}: give at least one encoder (hub name, folder, run folder or saved model)")
    if labels and len(labels) != len(encoders):
        raise ConfigError(f"--labels: {len(labels)} names for {len(encoders)} encoders")
    if len(set(labels or encoders)) < len(encoders):
        raise ConfigError("--labels: give each encoder a distinct name" if labels else
                          f"{option}: the same encoder twice")
    return encoders, labels


def check_results_dir(output_dir: str, option: str = "--output_dir", command: str | None = None,
                      writes: Sequence[str] = (), own: Callable[[Path], bool] | None = None) -> None:
    """A folder the command may write its results in, and none of a training run's own files
    (:func:`hire.runs.check_not_run_file`): checked before any work. With ``command``, the folder is also new,
    empty or that command's own output (:func:`hire.checks.check_own_folder`: ``writes`` are the names it writes
    there, ``own`` recognises its output from before markers): no command writes over a file it did not create."""
    from hire.checks import check_output_folder, check_own_folder
    from hire.runs import check_not_run_file

    check_output_folder(output_dir, option)
    check_not_run_file(output_dir, option)
    if command is not None:
        check_own_folder(output_dir, option, command, writes, own)


def results_of(command: str, key: str | None = None, value: Any = None) -> Callable[[Path], bool]:
    """Recognise a folder that ``hire {command}`` wrote before output folders carried a marker: its
    ``results.json`` is a JSON object holding ``key`` (equal to ``value`` where one is given)."""
    def own(folder: Path) -> bool:
        try:
            results = json.loads((folder / "results.json").read_text())
        except (OSError, ValueError):
            return False
        return isinstance(results, dict) and key in results and (value is None or results[key] == value)

    return own


def check_encoders(encoders: list[str], option: str = "--encoder", max_length: int | None = None) -> None:
    """Every encoder of ``option`` loadable (:func:`hire.lab.sources.check_source`), and, given ``max_length``
    (``--max_length``), taking that many tokens (:func:`hire.config.check_max_length`, the check of ``hire train``
    and ``hire predict``), before any work."""
    from hire.config import check_max_length
    from hire.lab.sources import check_source, encoder_config, resolve_source

    for spec in encoders:
        check_source(spec, option)
        if max_length is not None:
            try:
                check_max_length(max_length, encoder_config(resolve_source(spec)), "--max_length")
            except ConfigError as err:
                raise ConfigError(f"{err} ({option} {spec})" if len(encoders) > 1 else str(err)) from None


_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def resolve_device(choice: str, option: str = "--device") -> str:
    """``--device``, the one check of every lab command's: ``auto`` is cuda where there is a CUDA device, else cpu;
    otherwise cpu, cuda or cuda:N of a CUDA device that is here. The lab's encoding and fitting run on a CPU or a
    CUDA GPU: any other torch device (meta, which holds no data; mps; xpu) is refused here, before any work, rather
    than fail in the middle of it. A ConfigError names the option and what to give."""
    if choice != "auto" and not _DEVICE.fullmatch(choice):
        raise ConfigError(f"{option} {choice}: expected auto, cpu, cuda or cuda:N (the encoders run and the probes "
                          "fit on a CPU or a CUDA GPU)")
    if choice == "cpu":
        return choice
    import torch

    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        raise ConfigError(f"{option} {choice}: no CUDA device here; give {option} cpu (or auto)")
    count, index = torch.cuda.device_count(), int(choice.partition(":")[2] or 0)
    if index >= count:
        raise ConfigError(f"{option} {choice}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    return choice


def forward_precision(choice: str, device: str) -> str:
    """``--mixed_precision`` of the encoder's forward passes on ``device``
    (:func:`hire.hardware.resolve_mixed_precision`); fp16 is a ConfigError on CPU."""
    from hire.hardware import resolve_mixed_precision

    precision = resolve_mixed_precision(choice)
    if device == "cpu" and precision == "fp16":
        raise ConfigError("--mixed_precision fp16: not on CPU (use bf16 or no)")
    return precision


def feature_cache(choice: str | None) -> str:
    """``--cache_dir`` (default: :func:`hire.lab.features.default_cache_dir`), checked as a folder the
    command may write in."""
    from hire.lab.features import default_cache_dir

    cache_dir = str(Path(choice or default_cache_dir()).expanduser())
    check_results_dir(cache_dir, "--cache_dir")
    return cache_dir
