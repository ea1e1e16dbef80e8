"""What the lab's commands write in their output folder: ``results.json``, checked by one reader
(:class:`ResultsFormat`), saved whole after every finished piece (:func:`save_results`), with the machine it was
made on (:func:`machine`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hire.lab.files import atomic_write

RESULTS = "results.json"


def save_results(results: dict[str, Any], out: Path) -> None:
    """``out``/results.json, written atomically (an interrupted write leaves the earlier file)."""
    text = json.dumps(results, indent=2) + "\n"
    atomic_write(out / RESULTS, lambda f: f.write(text.encode()))


def device_name(device: str) -> str:
    """``device`` as a results file records it: a CUDA device with its name (``cuda (NVIDIA H100 ...)``)."""
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return device


def machine(device: str) -> dict[str, Any]:
    """The machine a lab command ran on, as training runs record it (:func:`hire.hardware.machine`: the CPU, its
    bf16 units, the library versions), and the ``device`` it encoded and fitted on (:func:`device_name`)."""
    from hire.hardware import machine as run_machine

    return {**run_machine(), "device": device_name(device)}


@dataclass(frozen=True)
class ResultsFormat:
    """What a lab command's ``results.json`` holds, so that one reader checks the file of every command that
    writes one: the ``command`` (``probe``), its ``format`` tag, the ``parts`` it must have (key -> JSON type),
    and ``complete``, whether those parts hold what the report is drawn from (``lacking`` names them)."""

    command: str
    format: str
    parts: dict[str, type]
    complete: Callable[[dict[str, Any]], bool]
    lacking: str

    def load(self, output_dir: str | Path) -> dict[str, Any]:
        """The results in ``output_dir`` (:meth:`read`), to draw the report from."""
        path, run = Path(output_dir) / RESULTS, f"hire {self.command}"
        if not path.is_file():
            what = "a folder" if path.is_dir() else "no"
            raise FileNotFoundError(f"{output_dir}: {what} {RESULTS} (run `{run} --output_dir {output_dir}` first)")
        return self.read(path, f"run the `{run}` command that made it again with --overwrite to write it afresh "
                         "(cached features are reused)")

    def read(self, path: Path, repair: str) -> dict[str, Any]:
        """``path`` as the command writes it; ValueError naming the file, what is wrong and ``repair`` (what
        writes it afresh) for a file that is not one: not JSON or cut short, not an object, another format, or
        missing a part the report is drawn from."""
        from hire.reporting import read_json

        results, problem = read_json(path)
        if problem is None:
            problem = self._problem(results)
            if problem is None:
                return results
        raise ValueError(f"{path}: {problem}; {repair}")

    def _problem(self, results: Any) -> str | None:
        """What makes ``results`` no results record of the command (None: nothing)."""
        run = f"`hire {self.command}`"
        if not isinstance(results, dict):
            return f"a JSON {type(results).__name__}, not {run} results (an object)"
        if results.get("format") != self.format:
            return f"not a {run} results file (format {results.get('format')!r}, not {self.format!r})"
        for key, tp in self.parts.items():
            if not isinstance(results.get(key), tp):
                return f"incomplete: its {key} is {'missing' if key not in results else repr(results[key])[:60]}"
        return None if self.complete(results) else f"incomplete: its {self.lacking} lack what {run} writes"
