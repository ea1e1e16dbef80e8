"""The precision ``hire evaluate`` and ``hire predict`` run in by default: the model's run's, read from the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import hire.hardware
from hire.commands import model_precision, recorded_precision
from hire.runs import mark_run_folder


def run_folder(root: Path, metrics: dict | None = None, state: dict | None = None) -> Path:
    """A run folder as far as the precision is read: the marker, best/ and the run's metrics or state."""
    root.mkdir(parents=True)
    mark_run_folder(root)
    (root / "best").mkdir()
    if metrics is not None:
        (root / "metrics.json").write_text(json.dumps(metrics))
    if state is not None:
        (root / "state.json").write_text(json.dumps(state))
    return root / "best"


def test_the_recorded_precision_is_the_runs(tmp_path: Path) -> None:
    finished = run_folder(tmp_path / "done", metrics={"mixed_precision": "bf16"}, state={"mixed_precision": "no"})
    assert recorded_precision(finished) == "bf16"  # the finished run's metrics first
    training = run_folder(tmp_path / "training", state={"mixed_precision": "bf16"})
    assert recorded_precision(training) == "bf16"  # a run still training: its state
    assert recorded_precision(run_folder(tmp_path / "old", metrics={"score": 1.0})) is None
    assert recorded_precision(run_folder(tmp_path / "odd", metrics={"mixed_precision": "fp8"})) is None
    broken = run_folder(tmp_path / "broken", state={"mixed_precision": "bf16"})
    (broken.parent / "metrics.json").write_text("{cut sho")
    assert recorded_precision(broken) == "bf16"
    shared = tmp_path / "shared" / "best"  # a folder named best/ outside a run
    shared.mkdir(parents=True)
    (shared.parent / "metrics.json").write_text(json.dumps({"mixed_precision": "bf16"}))
    assert recorded_precision(shared) is None
    assert recorded_precision(finished.parent) is None  # the run folder itself is no model


@pytest.mark.parametrize(("recorded", "cuda", "fast_bf16", "expected", "noted"), [
    ("bf16", False, True, "bf16", False),
    ("bf16", False, False, "no", True),  # emulated bf16 would be many times slower
    ("fp16", False, True, "no", True),  # fp16 needs a CUDA GPU
    ("no", False, True, "no", False),
])
def test_the_default_repeats_the_runs_precision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], recorded: str, cuda: bool,
                                               fast_bf16: bool, expected: str, noted: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(hire.hardware, "cpu_has_fast_bf16", lambda: fast_bf16)
    best = run_folder(tmp_path / "run", metrics={"mixed_precision": recorded})
    assert model_precision(best, None) == expected
    err = capsys.readouterr().err
    assert (f"trained in {recorded}" in err and "predicting in fp32" in err) == noted
    assert model_precision(best, "auto") == "auto"  # --mixed_precision given: it, whatever the run's
    assert model_precision(tmp_path, None) == "no"  # a model folder that is no run's best/: fp32
