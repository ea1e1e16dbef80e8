"""The harness of the bad-input tests: a world of small files and runs, a snapshot of it, and one case run
through the real ``hire`` command (exit status 2, one line naming the fault, no traceback, nothing changed).

``shared`` (a module-scoped fixture, offered to every test file by ``conftest.py``) holds the tiny encoder and
three saved models; ``check_fails_cleanly`` runs one case in a fresh world, through :func:`hire.cli.main` in this
process (``via`` "in-process": no interpreter and imports to pay per case) or as a real ``hire`` process (``via``
"subprocess", the slow run: what only a process shows, such as its exit status, stray log lines or warnings on its
stderr, a traceback at its exit).

A real process per case would pay the interpreter and its imports (seconds) every time, so the slow run's cases
run in processes forked from one that has imported them once (:class:`HireDriver`, ``tests/hire_driver.py``):
each its own process, with its own file descriptors 1 and 2, exit status and teardown, and no state carried over
from the case before; a case refused before torch is imported runs in a child of a driver that never imported
torch, as in a fresh ``hire``. The first case of each command in a session (``hire train``, ``hire experiment``,
...) also runs as a genuinely fresh process through the installed ``hire`` console script, and the two must agree
(exit status, stdout, stderr; progress bars' timings aside): the entry point itself is exercised, and the forked
processes are checked against it. The end-to-end tests run their ``hire`` processes through the same drivers
(:func:`hire_process`, with ``tests/killer.py``'s kill points armed in the child).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
import yaml
from tiny import save_tiny_encoder

from hire import build_model, load_tokenizer
from hire.config import DataConfig, ModelArgs, RunConfig, TrainConfig
from hire.data import DataError
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


def one_line_error(call, *words: str, error: type[Exception] = DataError) -> str:
    """Run ``call``: it must raise a one-line ``error`` whose message contains every word; returns the message."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message
    return message


def train_stopped_after(argv: list[str], steps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hire train ARGV`` in this process, "dying" (``SystemExit(137)``) after ``steps`` optimiser steps, as after
    a kill; the slow tests kill real processes (``tests/killer.py``)."""
    import hire.training
    from hire.options import parse_options

    real_step, done = hire.training.training_step, []

    def dying(*a, **k):
        value = real_step(*a, **k)
        done.append(value)
        if len(done) == steps:
            raise SystemExit(137)
        return value

    monkeypatch.setattr(hire.training, "training_step", dying)
    with pytest.raises(SystemExit):
        hire.training.train(parse_options(argv))
    monkeypatch.setattr(hire.training, "training_step", real_step)


def script_refuses(main, argv: list[str], prefix: str, message: str, out: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    """A command's or script's ``main(argv)`` refuses: exit status 2, one line ``PREFIX: error: MESSAGE...`` on
    standard error, nothing written at ``out``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{prefix}: error: {message}"), err
    assert err.count("\n") == 1, err
    assert not out.exists()


def write_case_files(files: dict[str, str], places: dict[str, str]) -> None:
    """A table case's files: each name and text with its ``{tmp}``-style places filled in."""
    for name, text in files.items():
        path = Path(expand(name, places))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(expand(text, places))


def given_once(args: list[str]) -> list[str]:
    """A case's command line with each option once: a base command line with an option given again after it
    (``[*TRAIN, "--output_dir", "{tmp}/notes.txt"]``) keeps the later word, the base's is dropped (``hire`` refuses
    an option given twice). A repeatable option (``--encoder a --encoder b``) and ``--config`` stay as given; the
    command's options are read from the CLI itself (:attr:`hire.options.Command.options`)."""
    from typing import get_origin

    from hire.cli import all_commands
    from hire.config import RunConfig, option_fields

    named = {c.name: c for c in all_commands()}
    command = named.get(args[0]) if args else None
    if command is not None and getattr(command, "commands", ()) and len(args) > 1:
        command = {c.name: c for c in command.commands}.get(args[1])
    if getattr(command, "options", None) is None:  # getattr: a plugin's Command of an older hire
        return list(args)
    once, flags = set(), set()
    for name, tp, f in option_fields(command.options):
        if f.metadata.get("positional") or (get_origin(tp) is list and command.options is not RunConfig):
            continue  # positional, or repeatable
        once.add(f"--{f.metadata.get('flag') or name}")
        if tp is bool:
            flags.add(f"--{f.metadata.get('flag') or name}")
    spans: list[tuple[str | None, int, int]] = []  # (option, first word, after its value)
    i = 0
    while i < len(args):
        word = args[i]
        end = i + 1
        if word in once and (word not in flags or (i + 1 < len(args) and args[i + 1] in ("true", "false"))):
            end = i + 2
        spans.append((word.partition("=")[0] if word.startswith("--") else None, i, end))
        i = end
    last = {option: k for k, (option, _, _) in enumerate(spans) if option in once}
    return [w for k, (option, start, end) in enumerate(spans) if option not in last or last[option] == k
            for w in args[start:end]]



def run_hire(args: list[str], cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``hire ARGS`` in a fresh process, offline."""
    return subprocess.run([sys.executable, "-m", "hire.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=process_env(env))


def hire_script() -> list[str]:
    """The installed ``hire`` console script (the real entry point), or ``python -m hire.cli`` where there is none."""
    script = Path(sys.executable).parent / "hire"
    found = str(script) if script.is_file() else shutil.which("hire")
    return [found] if found else [sys.executable, "-m", "hire.cli"]


def process_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment :func:`run_hire` gives ``hire``: this process's, offline, with ``env`` on top."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}


class HireDriver:
    """A process that runs ``hire`` command lines, each in a child forked from it after its imports
    (``tests/hire_driver.py``): a real process per command line (its exit status, its file descriptors 1 and 2,
    its teardown) without an interpreter and its imports to pay each time. ``kind`` "light" has imported what every
    command does and hands a command line that needs torch back (:meth:`run` gives None); "heavy" has imported torch
    and transformers too. Stopped at exit."""

    DRIVER = Path(__file__).with_name("hire_driver.py")

    def __init__(self, env: dict[str, str], kind: str) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"hire-driver-{kind}-"))
        self.log = self.folder / "driver.log"
        self.log.touch()
        self.script = hire_script()
        self.cases = 0
        self.process = subprocess.Popen([sys.executable, str(self.DRIVER), str(self.log),
                                         str(Path(self.script[0]).parent), kind], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=self.folder, env=env,
                                        text=True, bufsize=1)
        ready = self._answer()
        imported = self.log.read_text(errors="replace")
        if not ready.get("ready") or imported:  # an import that prints would show in every case of a real process
            self.close()
            raise RuntimeError(f"tests/hire_driver.py did not start cleanly: {imported[-3000:]}")

    def _answer(self) -> dict:
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line:
            raise RuntimeError(f"tests/hire_driver.py ended: {self.log.read_text(errors='replace')[-3000:]}")
        return json.loads(line)

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300,
            kill: str | None = None) -> subprocess.CompletedProcess[str] | None:
        """``hire ARGS`` in ``cwd`` with exactly the environment ``env``, as :func:`run_hire` runs it (``kill``: a kill
        point of ``tests/killer.py``); None where a light driver's child was about to import torch (it stopped there,
        having written nothing)."""
        self.cases += 1
        out, err, reroute = (self.folder / f"{self.cases}.{end}" for end in ("out", "err", "reroute"))
        out.touch()  # what a command killed before it began wrote: nothing
        err.touch()
        argv = [self.script[-1] if len(self.script) == 1 else "hire", *args]
        case = {"argv": argv, "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err),
                "reroute": str(reroute), "timeout": timeout, "kill": kill}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(case) + "\n")
        self.process.stdin.flush()
        answer = self._answer()
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        out.unlink()
        err.unlink()
        if reroute.exists():
            reroute.unlink()
            return None
        if answer["timed_out"]:
            raise subprocess.TimeoutExpired(["hire", *args], timeout, stdout, stderr)
        return subprocess.CompletedProcess(["hire", *args], answer["returncode"], stdout, stderr)

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def same_output(one: subprocess.CompletedProcess[str], other: subprocess.CompletedProcess[str]) -> bool:
    """The same exit status, stdout and stderr, but for the timings of progress bars (``[00:00<00:00, 9.1it/s]``)."""
    def steady(text: str) -> str:
        return re.sub(r"\[[\d:]+<[^\]\r\n]*\]", "[time]", text)

    return (one.returncode, steady(one.stdout), steady(one.stderr)) == (
        other.returncode, steady(other.stdout), steady(other.stderr))


_DRIVERS: dict[tuple[str, tuple[tuple[str, str], ...]], HireDriver] = {}
_FRESH: set[str] = set()  # the commands already run as a fresh process in this session


def _close_drivers() -> None:
    while _DRIVERS:
        _DRIVERS.popitem()[1].close()


atexit.register(_close_drivers)


def hire_driver(env: dict[str, str], kind: str) -> HireDriver:
    """The session's :class:`HireDriver` of ``kind`` started with ``env`` (pytest's PYTEST_CURRENT_TEST aside),
    started now if there is none."""
    key = kind, tuple(sorted((k, v) for k, v in env.items() if k != "PYTEST_CURRENT_TEST"))  # pytest sets it per test
    if key not in _DRIVERS:
        _DRIVERS[key] = HireDriver(env, kind)
    return _DRIVERS[key]


def run_forked(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300,
               kill: str | None = None) -> subprocess.CompletedProcess[str]:
    """``hire ARGS`` in a process forked from the light driver, or from the heavy one where it needs torch."""
    result = hire_driver(env, "light").run(args, cwd, env, timeout, kill)
    result = result or hire_driver(env, "heavy").run(args, cwd, env, timeout, kill)
    assert result is not None  # a heavy driver hands nothing back
    return result


def hire_process(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, kill: str | None = None,
                 timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``hire ARGS`` as a real process, offline, for the end-to-end tests: its exit status, its stdout and stderr,
    killed at ``kill`` (a kill point of ``tests/killer.py``, e.g. ``step:5``) if given. Forked from a
    :class:`HireDriver` that imported torch and transformers once (a second where a fresh interpreter takes five);
    a fresh process where there is no ``fork``."""
    if not hasattr(os, "fork"):
        killer = Path(__file__).with_name("killer.py")
        cmd = [sys.executable, str(killer), kill, "--", *args] if kill else [sys.executable, "-m", "hire.cli", *args]
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env={**process_env(env), "PYTHONPATH": str(killer.parent)})
    return run_forked(list(args), cwd or Path.cwd(), process_env(env), timeout, kill)


def run_as_process(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``hire ARGS`` as a real process: forked from a :class:`HireDriver`; the first command line of each command in
    the session also as a fresh process through the console script, which the forked one must match."""
    if not hasattr(os, "fork"):  # no forking here: a fresh process each time
        return run_hire(args, cwd, timeout=timeout)
    env = process_env()
    forked = run_forked(args, cwd, env, timeout)
    if not args or args[0] in _FRESH:
        return forked
    _FRESH.add(args[0])
    fresh = subprocess.run([*hire_script(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           env=env, stdin=subprocess.DEVNULL)
    assert same_output(forked, fresh), (
        f"the forked hire process differs from a fresh one:\nfresh ({fresh.returncode}): {fresh.stdout[-1500:]}"
        f"{fresh.stderr[-1500:]}\nforked ({forked.returncode}): {forked.stdout[-1500:]}{forked.stderr[-1500:]}")
    return fresh


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
    (:func:`run_as_process`): exit status 2, one error line that contains ``message`` ({tmp}, {enc}, ... expanded), no
    traceback, and nothing created, changed or removed."""
    if "/dev/full" in args and not (Path("/dev/full").exists() and stat.S_ISCHR(os.stat("/dev/full").st_mode)):
        pytest.skip("no /dev/full device here")
    write_world(tmp_path, shared["enc"])
    places = {"tmp": str(tmp_path), **{k: str(v) for k, v in shared.items()}}
    before = snapshot(tmp_path), snapshot(shared["root"])
    result = (run_as_process if via == "subprocess" else call_hire)([expand(a, places) for a in args], tmp_path)
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


