"""The run folder: what it holds, when it may be reused, and the state that lets a run resume.

    config.yaml           the resolved configuration
    state.json            progress: step, best score, finished or not
    metrics.jsonl         one line per evaluation (every dev split's metrics)
    metrics.json          the final scores of the best model
    best/                 the best model (``HireModel.from_pretrained``) with its tokenizer
    checkpoint/           the latest resumable state (removed when the run finishes)
    predictions/*.jsonl   per-example outputs of the best model, with layer weights
    submission/           GLUE leaderboard files and their zip (GLUE tasks)
    tensorboard/          TensorBoard logs

A folder that holds another run (a different configuration, or a finished one) is never overwritten
unless ``--overwrite`` is given; an unfinished run with the same configuration resumes.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from hire.config import ConfigError, RunConfig

ARTEFACTS = ("config.yaml", "state.json", "metrics.jsonl", "metrics.json", "best", "checkpoint",
             "checkpoint.tmp", "checkpoint.old", "predictions", "submission", "tensorboard")


@dataclass
class RunState:
    step: int = 0
    best_score: float | None = None
    best_step: int | None = None
    bad_evals: int = 0
    loss_sum: float = 0.0
    loss_count: int = 0
    train_seconds: float = 0.0
    finished_training: bool = False
    finished: bool = False
    rng: list[int] | None = field(default=None, repr=False)

    def add_loss(self, loss: float) -> None:
        self.loss_sum += loss
        self.loss_count += 1

    def running_loss(self) -> float | None:
        return self.loss_sum / self.loss_count if self.loss_count else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunState:
        return cls(**values)

    def save(self, directory: Path) -> None:
        values = self.to_dict()
        values.pop("rng")
        (directory / "state.json").write_text(json.dumps(values, indent=2) + "\n")


def _comparable(values: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and key in ("data", "model", "train"):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        elif key not in ("overwrite",):
            flat[key] = value
    return flat


def prepare_run_dir(out: Path, cfg: RunConfig) -> RunState:
    """Create the folder, or find the run to resume in it; refuse to clobber another run."""
    if cfg.overwrite:
        for name in ARTEFACTS:
            path = out / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    if out.exists() and any(out.iterdir()):
        saved = out / "config.yaml"
        if not saved.is_file():
            raise ConfigError(f"--output_dir {out}: the folder is not empty and holds no run; "
                              "choose another folder or pass --overwrite")
        old, new = _comparable(yaml.safe_load(saved.read_text()) or {}), _comparable(cfg.to_dict())
        changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        if changed:
            raise ConfigError(f"--output_dir {out} holds a run with another configuration (differs in: "
                              f"{', '.join(changed)}); choose another folder or pass --overwrite")
        state = json.loads((out / "state.json").read_text()) if (out / "state.json").is_file() else {}
        if state.get("finished"):
            raise ConfigError(f"--output_dir {out} holds a finished run (see its metrics.json); "
                              "pass --overwrite to run it again")
        checkpoint = out / "checkpoint" / "trainer_state.json"
        if checkpoint.is_file():
            resumed = RunState.from_dict(json.loads(checkpoint.read_text()))
            _truncate_metrics(out / "metrics.jsonl", resumed.step)
            return resumed
        for name in ARTEFACTS[2:]:  # no checkpoint yet: start again from nothing
            path = out / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    cfg.save(out / "config.yaml")
    state = RunState()
    state.save(out)
    return state


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop evaluations logged after the checkpoint: the resumed run makes them again."""
    if path.is_file():
        lines = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= step]
        path.write_text("".join(ln + "\n" for ln in lines))


def cpu_has_fast_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_mixed_precision(choice: str) -> str:
    """``auto`` -> bf16 on GPUs and CPUs with fast bf16, fp16 on older GPUs, else no."""
    if choice != "auto":
        return choice
    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_fast_bf16() else "no"
