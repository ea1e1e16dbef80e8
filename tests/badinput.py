"""The harness of the bad-input tests: a world of small files and runs, a snapshot of it, and one case run
through the real ``hire`` command (exit status 2, one line naming the fault, no traceback, nothing changed).

``shared`` (a module-scoped fixture, offered to every test file by ``conftest.py``) holds the tiny encoder and
three saved models; ``check_fails_cleanly`` runs one case in a fresh world, through :func:`hire.cli.main` in this
process (``via`` "in-process": no interpreter and imports to pay per case) or as the real ``hire`` process
(``via`` "subprocess", the slow run: what only a process shows, such as stray log lines on its stderr).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from tiny import save_tiny_encoder

from hire import build_model, load_tokenizer
from hire.config import DataConfig, ModelArgs, RunConfig, TrainConfig
from hire.runs import mark_run_folder

TEXTS = ["a fine film", "a dull film", "good fun", "bad acting", "great", "awful", "not bad", "not good"]
LABELS = ["pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg"]


def table(header: str, rows: list[str]) -> str:
    return header + "\n" + "".join(row + "\n" for row in rows)


def write_world(root: Path, encoder: Path) -> None:
    """The files every case may name: data, a user's file, a folder, a finished run of ``TRAIN``."""
    rows = [f"{t},{y}" for t, y in zip(TEXTS, LABELS, strict=True)]
    (root / "train.csv").write_text(table("sentence,label", rows))
    (root / "dev.csv").write_text(table("sentence,label", rows[:4]))
    (root / "dev_typo.csv").write_text(table("sentence,label", [*rows[:2], "so so,positive", rows[3]]))
    (root / "pairs.csv").write_text(table("first,second,label", [f"{t},{t},{y}" for t, y in zip(TEXTS, LABELS,
                                                                                             strict=True)]))
    (root / "input.csv").write_text(table("sentence,label", rows[4:]))
    (root / "empty.csv").write_text("")
    (root / "header_only.csv").write_text("sentence,label\n")
    (root / "bad.yaml").write_text("train:\n  lr: [1, 2\n")
    (root / "unknown.yaml").write_text("train:\n  lrr: 0.1\n")
    (root / "flat.yaml").write_text("train: 5\n")
    (root / "nan.yaml").write_text("train:\n  lr: .nan\n")
    (root / "bare_no.yaml").write_text("train:\n  mixed_precision: no\n")
    (root / "notes.txt").write_text("mine\n")
    (root / "folder").mkdir()
    done = root / "done"
    (done / "best").mkdir(parents=True)
    (done / "best" / "config.json").write_text('{"head": "last-layer"}\n')
    data = DataConfig(task="custom", train_file=str(root / "train.csv"), dev_file=str(root / "dev.csv"))
    model = ModelArgs(encoder=str(encoder), head="last-layer")
    RunConfig(str(done), data=data, model=model, train=TrainConfig(mixed_precision="no")).save(done / "config.yaml")
    mark_run_folder(done)
    (done / "state.json").write_text('{"step": 3, "finished": true}\n')
    metrics = {"task": "train", "head": "last-layer", "dev": {"dev": {"accuracy": 0.5, "score": 0.5}}, "score": 0.5,
               "steps": 3, "best_step": 3, "train_seconds": 1.0, "mixed_precision": "no"}
    (done / "metrics.json").write_text(json.dumps(metrics) + "\n")


def save_run(root: Path, encoder: Path, data: dict, labels: list[str]) -> Path:
    """A run folder as training leaves it, as far as predict and evaluate read it: config.yaml and best/."""
    model = build_model(str(encoder), head="last-layer", num_labels=len(labels), label_names=labels)
    model.save_pretrained(root / "best", load_tokenizer(str(encoder)))
    (root / "config.yaml").write_text(yaml.safe_dump({"data": data, "model": {"head": "last-layer"}}))
    return root / "best"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shared")
    enc = save_tiny_encoder(root / "encoder", TEXTS)
    return {
        "root": root,
        "enc": enc,
        "single": save_run(root / "single", enc, {"task": "custom", "text_columns": ["sentence"]}, ["neg", "pos"]),
        "pair": save_run(root / "pair", enc, {"task": "custom", "text_columns": ["first", "second"]}, ["neg", "pos"]),
        "sst2": save_run(root / "sst2", enc, {"task": "SST-2"}, ["0", "1"]),
    }


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its kind, and for files their bytes' hash and modification time."""
    state: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        if path.name == ".lock":  # a run folder's lock file (hire.runs.RunLock) stays, by design
            continue
        if path.is_file():
            state[str(path)] = ("file", hashlib.sha1(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        else:
            state[str(path)] = ("dir",)
    return state


def expand(text: str, places: dict[str, str]) -> str:
    for key, value in places.items():
        text = text.replace("{" + key + "}", value)
    return text



def run_hire(args: list[str], cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``hire ARGS`` in a fresh process, offline."""
    return subprocess.run([sys.executable, "-m", "hire.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                                                **(env or {})})


def call_hire(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``hire ARGS`` through :func:`hire.cli.main` in this process, as :func:`run_hire` runs it in a fresh one: in
    ``cwd``, offline, its stdout and stderr captured, warnings printed to that stderr (as Python does outside
    pytest, which records them; deprecations left out, as Python leaves them out outside ``__main__``), its exit
    status that of ``sys.exit``; the working folder, the environment and the warning filters are restored."""
    from hire.cli import main

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None,
             line: str | None = None) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})})
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            warnings.showwarning = show
            try:
                code = main(list(args))
            except SystemExit as exit_:  # the option parser's exit, as the process would end
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                if isinstance(exit_.code, str):
                    print(exit_.code, file=sys.stderr)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["hire", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(params=["in-process", pytest.param("subprocess", marks=pytest.mark.slow)])
def via(request: pytest.FixtureRequest) -> str:
    """How a bad-input case runs ``hire``: every case runs in this process, and again as a real process in the
    slow run."""
    return request.param


def check_fails_cleanly(args: list[str], message: str, shared: dict[str, Path], tmp_path: Path,
                        via: str = "in-process") -> None:
    """Run one case in a fresh world under ``tmp_path``, ``via`` "in-process" (:func:`call_hire`) or "subprocess"
    (:func:`run_hire`): exit status 2, one error line that contains ``message`` ({tmp}, {enc}, ... expanded), no
    traceback, and nothing created, changed or removed."""
    if "/dev/full" in args and not (Path("/dev/full").exists() and stat.S_ISCHR(os.stat("/dev/full").st_mode)):
        pytest.skip("no /dev/full device here")
    write_world(tmp_path, shared["enc"])
    places = {"tmp": str(tmp_path), **{k: str(v) for k, v in shared.items()}}
    before = snapshot(tmp_path), snapshot(shared["root"])
    result = (run_hire if via == "subprocess" else call_hire)([expand(a, places) for a in args], tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.strip()]  # progress bars aside, one line
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) <= 3, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines and lines[-1].startswith(f"hire {args[0]}: error: "), result.stderr[-3000:]
    assert [line for line in lines if line.startswith("hire ") and "error:" in line] == lines[-1:]
    assert expand(message, places) in lines[-1]
    after = snapshot(tmp_path), snapshot(shared["root"])
    changed = sorted(k for a, b in zip(before, after, strict=True) for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    assert not changed, f"created, changed or removed: {changed}"


