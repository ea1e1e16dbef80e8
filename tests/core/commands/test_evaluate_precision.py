"""The precision and length ``hire evaluate`` and ``hire predict`` run at by default: the model's run's."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
import yaml

import hire.hardware
from hire.commands import model_precision, recorded_precision
from hire.runs import mark_run_folder
from hire.saved_model import trained_max_length


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


@pytest.mark.parametrize(("recorded", "cuda", "fast_bf16", "expected"), [
    ("bf16", False, True, "bf16"),
    ("bf16", False, False, "no"),  # emulated bf16 would be many times slower
    ("fp16", False, True, "no"),  # fp16 needs a CUDA GPU
    ("no", False, True, "no"),
    ("fp16", True, False, "fp16"),
    ("bf16", True, False, "no"),  # a GPU without bf16
    ("bf16", True, True, "bf16"),
])
def test_the_default_repeats_the_runs_precision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: str,
                                               cuda: bool, fast_bf16: bool, expected: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: fast_bf16)
    monkeypatch.setattr(hire.hardware, "cpu_has_fast_bf16", lambda: fast_bf16)
    best = run_folder(tmp_path / "run", metrics={"mixed_precision": recorded})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert model_precision(best, None) == expected
    said = [str(w.message) for w in caught]
    if expected != recorded:
        assert len(said) == 1 and f"its run trained in {recorded}" in said[0] and "predicting in fp32" in said[0]
    else:
        assert said == []
    assert model_precision(best, "auto") == "auto"  # --mixed_precision given: it, whatever the run's
    assert model_precision(tmp_path, None) == "no"  # a model folder that is no run's best/: fp32


def test_the_default_max_length_is_the_runs(tmp_path: Path) -> None:
    best = run_folder(tmp_path / "run")
    (best.parent / "config.yaml").write_text(yaml.safe_dump({"data": {"task": "RTE", "max_length": 48},
                                                             "model": {"head": "hire"}}))
    assert trained_max_length(best, {"head": "hire"}) == 48
    assert trained_max_length(best, {"head": "last-layer"}) is None  # the run's config is not this model's
    assert trained_max_length(tmp_path, {"head": "hire"}) is None  # no run beside it
    (best.parent / "config.yaml").write_text("data: [1, 2\n")
    assert trained_max_length(best, {"head": "hire"}) is None
