"""``hire experiment run``: train an experiment's cells one after another, as ordinary ``hire train`` runs.

Each cell is ``python -m hire.cli train <its options> --output_dir <runs_dir>/<name>/<cell-id> --predict_test
false`` (a cell is compared on its dev scores, so no test-set prediction) in a subprocess whose output streams
to the terminal (and to ``<runs_dir>/<name>/logs/<cell-id>.log``).
Cells run one at a time by default: two torch processes on a small CPU slow each other down many times
over. ``jobs > 1`` trains that many cells at once, for a GPU that a small encoder leaves mostly idle; each
cell's output then goes to its log alone, and the runner says when a cell starts and ends. A lock on
``<runs_dir>/.runner.lock`` keeps a second runner out; runners with other runs_dirs share the experiment's
records, and a claim there on the cell it trains (:class:`~hire.experiments.status.CellClaim`) keeps them
from training the same cell twice. A finished cell
(``metrics.json``) is skipped, an unfinished one resumes (``hire train`` does that by itself), a cell
whose folder another process is training in is left alone, as is a cell whose scheduler job is queued or
running. After each cell its record is written. A failing cell is reported and the runner goes on
(``--stop_on_error`` stops it); the exit status is non-zero if any cell failed.

This loop is for one machine. ``--executor slurm|local`` hands each cell to a scheduler instead, as one job that
runs the same command (:mod:`hire.experiments.cluster`).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hire.experiments.experiment import Experiment
from hire.experiments.records import (
    RUNNER_FILE,
    collect_cell,
    json_bytes,
    read_record,
    records_dir,
    run_dir,
    write_if_changed,
)
from hire.experiments.spec import Cell, ExperimentError, default_options
from hire.experiments.status import (
    BASES,
    TO_TRAIN,
    CellClaim,
    CellStatus,
    Estimates,
    cell_status,
    cell_statuses,
    matches_only,
    this_device,
    training_in,
)
from hire.experiments.status import (
    progress as run_progress,
)


def cli_value(value: Any) -> str:
    """A resolved option as ``hire train`` reads it back (:func:`hire.options.parse_options`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, list):
        return ",".join(map(str, value))
    return repr(value) if isinstance(value, float) else str(value)


def train_command(cell: Cell, run: Path) -> list[str]:
    """The cell's ``hire train`` command: every option that differs from the defaults."""
    defaults = default_options()
    args = [arg for key, value in cell.options.items() if value != defaults.get(key)
            for arg in (f"--{key}", cli_value(value))]
    return [sys.executable, "-m", "hire.cli", "train", *args, "--output_dir", str(run), "--predict_test", "false"]


def _last_error(log: Path) -> str:
    """The line of the log that says why a run failed (``hire train: error: ...`` or the last one)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").replace("\r", "\n").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln.lower() or "Error" in ln]
    return (errors or lines or ["no output"])[-1][:400]


def child_env() -> dict[str, str]:
    """The environment a cell's ``hire train`` runs in: this one, its output unbuffered (a log shows each line as
    it comes), tokenizers without their own threads unless asked for."""
    return {**os.environ, "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "false")}


def interruptible() -> None:
    """In a child before it starts: Ctrl-C back to its default. A process started in the background by a shell
    without job control (`cmd &` in a script, nohup) inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt, so `hire train` would not stop at a Ctrl-C (`kill -INT`, a cluster's preemption)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stream(cmd: list[str], log: Path, echo: bool = True) -> int:
    """Run ``cmd``, its output going to ``log`` and (``echo``) to the terminal; returns its exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = child_env()
    terminal = getattr(sys.stdout, "buffer", None)
    with log.open("ab") as sink:
        sink.write(f"$ {shlex.join(cmd)}\n".encode())
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=interruptible)
        assert proc.stdout is not None
        try:
            while chunk := proc.stdout.read1(65536):
                sink.write(chunk)
                if not echo:
                    continue
                if terminal is not None:
                    terminal.write(chunk)
                    terminal.flush()
                else:
                    sys.stdout.write(chunk.decode(errors="replace"))
            return proc.wait()
        except KeyboardInterrupt:  # the child has the signal too: let it stop cleanly (it can resume)
            proc.wait()
            raise


def note_attempt(run: Path, seconds: float) -> None:
    """Add this attempt's wall time to ``<run>/experiment.json`` (the time estimates use it)."""
    from hire.runs import is_run_folder

    if not is_run_folder(run):
        return  # never write into a folder that is no run of hire's (a user's folder, or `hire train` refused it)
    path = run / RUNNER_FILE
    try:
        info = json.loads(path.read_text())
        attempts, wall = int(info["attempts"]), float(info["wall_seconds"])
    except (OSError, ValueError, TypeError, KeyError):  # none yet (or not ours to read): count from this attempt
        attempts, wall = 0, 0.0
    write_if_changed(path, json_bytes({"attempts": attempts + 1, "wall_seconds": round(wall + seconds, 1)}))


@contextmanager
def runner_lock(runs_dir: Path, required: bool = True) -> Iterator[None]:
    """One runner at a time under ``runs_dir`` (it alone decides which cells train, and how many at once).
    ``required=False`` (a scheduler's submitter, whose jobs the scheduler keeps apart): where the file system
    offers no locks at all, go on without one."""
    from hire.experiments.status import NO_LOCKS
    from hire.runs import lock_holder, take_lock

    runs_dir.mkdir(parents=True, exist_ok=True)
    path = runs_dir / ".runner.lock"
    try:
        lock = take_lock(path)
    except OSError as err:
        if required or err.errno not in NO_LOCKS:
            raise
        yield
        return
    if lock is None:
        raise ExperimentError(f"{runs_dir}: another `hire experiment run` is at work there "
                              f"({lock_holder(path, 'a running process')}); wait for it to finish")
    with lock:
        yield


@dataclass
class Progress:
    """What one ``run`` did, and the time it has spent (or, in a dry run, would have)."""

    started: int = 0
    finished: int = 0
    already_done: int = 0
    failed: list[str] = field(default_factory=list)
    planned_seconds: float = 0.0
    clock: float = field(default_factory=time.monotonic)

    def spent(self) -> float:
        return time.monotonic() - self.clock + self.planned_seconds


def run_experiment(exp: Experiment, runs_dir: Path, exp_dir: Path, *, max_runs: int | None = None,
                   time_budget: float | None = None, only: dict[str, list[Any]] | None = None,
                   stop_on_error: bool = False, default_minutes: float = 30.0, dry_run: bool = False,
                   jobs: int = 1, say: Callable[[str], None] = print) -> int:
    """Advance the grid; returns 0, or 1 if a cell failed. ``dry_run``: say what would run, run nothing.
    ``jobs``: how many cells train at once (a time budget then counts wall time from the start)."""
    if jobs < 1:
        raise ValueError(f"jobs: expected 1 or more, got {jobs}")
    runs_dir, exp_dir = Path(runs_dir), Path(exp_dir)
    parallel = jobs > 1 and not dry_run
    # Every record read (a damaged one is an error naming it) before the runner's lock file is made.
    estimates = Estimates.from_records(records_dir(exp_dir), default_minutes, this_device())
    with nullcontext() if dry_run else runner_lock(runs_dir), \
            ThreadPoolExecutor(jobs) if parallel else nullcontext() as pool:
        statuses = [s for s in cell_statuses(exp, runs_dir, records_dir(exp_dir)) if matches_only(s.cell, only)]
        todo = sum(s.state in TO_TRAIN for s in statuses)
        done = sum(s.state in ("done", "recorded") for s in statuses)
        say(f"{exp.name}: {len(statuses)} cells selected: {done} done, {todo} to run")
        progress = Progress()
        running: dict[Future[bool], CellStatus] = {}

        def finish(block: bool) -> None:
            """Reap the cells that ended (``block``: wait for one first) and say how each went."""
            ended, _ = wait(running, return_when=FIRST_COMPLETED) if block and running else (
                [f for f in running if f.done()], None)
            for future in ended:
                s = running.pop(future)
                if future.result():
                    progress.finished += 1
                    say(f"=== {s.cell.id}: finished ({_record_score(exp_dir, s.cell.id)})")
                else:
                    progress.failed.append(s.cell.id)

        for s in statuses:
            finish(block=False)
            if s.state in ("done", "recorded", "running", "queued", "changed"):
                _skip(exp, s, exp_dir, progress, dry_run, say)
                if s.state == "changed" and stop_on_error:
                    break
                continue
            if max_runs is not None and progress.started >= max_runs:
                say(f"--max_runs {max_runs} reached; {todo - progress.started} cells left")
                break
            while len(running) >= jobs:  # only with jobs > 1: wait for a free slot
                finish(block=True)
            if stop_on_error and progress.failed:
                say("stopping (--stop_on_error)")
                break
            estimate = estimates.seconds_left(s)
            left = None if time_budget is None else time_budget * 60 - progress.spent()
            if left is not None and estimate > left:
                say(f"stopping before {s.cell.id}: it takes about {estimate / 60:.0f} min, "
                    f"{max(left, 0) / 60:.0f} min of the time budget are left")
                break
            claim = None
            if not dry_run:  # another runner (another runs_dir) may have taken or finished the cell since
                claim = CellClaim(records_dir(exp_dir), s.cell.id)
                if not claim.acquire():
                    say(f"{s.cell.id}: another runner is training it right now; left alone")
                    continue
                s = cell_status(s.cell, s.run, records_dir(exp_dir), claims=False)
                if s.state not in TO_TRAIN:
                    claim.release()
                    _skip(exp, s, exp_dir, progress, dry_run, say)
                    continue
            progress.started += 1
            if parallel:
                assert pool is not None
                log = _log(runs_dir, exp, s)
                say(f"=== [{progress.started}/{todo}] {s.cell.id}{_resuming(s)}: started, about "
                    f"{estimate / 60:.0f} min ({len(running) + 1} of {jobs} at once); log: {log}")
                cmd = train_command(s.cell, s.run)
                running[pool.submit(_train_and_record, exp, s, cmd, log, exp_dir, False, say, claim)] = s
            elif dry_run:
                progress.planned_seconds += estimate
                say(f"would run {s.cell.id} ({_about(estimates, s, estimate)}): "
                    f"{shlex.join(train_command(s.cell, s.run))}")
            elif _run_one(exp, s, runs_dir, exp_dir, progress.started, todo, _about(estimates, s, estimate), say,
                          claim):
                progress.finished += 1
            else:
                progress.failed.append(s.cell.id)
                if stop_on_error:
                    say("stopping (--stop_on_error)")
                    break
        while running:
            finish(block=True)
        p = progress
        say(f"{exp.name}: {p.finished} cells finished now, {p.already_done} were done already, {len(p.failed)} failed"
            + (f" ({', '.join(p.failed)})" if p.failed else "") + f"; {time.monotonic() - p.clock:.0f} s")
        return 1 if p.failed else 0


def _skip(exp: Experiment, s: CellStatus, exp_dir: Path, progress: Progress, dry_run: bool,
          say: Callable[[str], None]) -> None:
    """A cell not to train: done (its record is brought up to date), running elsewhere, queued as a scheduler's
    job, or changed."""
    if s.state == "done":
        if not dry_run:
            collect_cell(exp, s.cell, s.run, exp_dir)
        progress.already_done += 1
    elif s.state == "recorded":
        progress.already_done += 1  # its committed record stands; no run folder here to collect from
    elif s.state == "running":
        where = (f"{s.job} is training it" if s.job else f"a process is training in {s.run}"
                 if training_in(s.run) else "another runner is training it")
        say(f"{s.cell.id}: {where} right now; left alone")
    elif s.state == "queued":
        say(f"{s.cell.id}: waiting in the scheduler's queue as {s.job}; left alone")
    else:
        progress.failed.append(s.cell.id)
        say(f"{s.cell.id}: error: {s.run} holds a run with another configuration (differs in: "
            f"{', '.join(s.differences)}); delete the folder to run the cell as the experiment file says")


def _about(estimates: Estimates, s: CellStatus, seconds: float) -> str:
    """"about 62 min", and where that comes from when it is not this device's records in the cell's precision (a
    CPU without bf16 units can take several times what one with them took) nor a started cell's own pace."""
    basis = BASES[0] if run_progress(s) is not None else estimates.basis(s.cell)
    note = {BASES[0]: "", "records": "", BASES[-1]: ", no record yet: --default_minutes"}.get(
        basis, f", from records of {basis}")
    return f"about {seconds / 60:.0f} min{note}"


def _run_one(exp: Experiment, s: CellStatus, runs_dir: Path, exp_dir: Path, number: int, total: int,
             about: str, say: Callable[[str], None], claim: CellClaim | None = None) -> bool:
    """Train one cell (resuming it if it started before) and write its record; True if it finished. ``about``:
    its time estimate, in words."""
    cmd, log = train_command(s.cell, s.run), _log(runs_dir, exp, s)
    say(f"\n=== [{number}/{total}] {s.cell.id}{_resuming(s)}: {about}\n$ {shlex.join(cmd)}")
    return _train_and_record(exp, s, cmd, log, exp_dir, True, say, claim)


def _log(runs_dir: Path, exp: Experiment, s: CellStatus) -> Path:
    return runs_dir / exp.name / "logs" / f"{s.cell.id}.log"


def _resuming(s: CellStatus) -> str:
    return " (resuming)" if s.state == "started" else ""


def _train_and_record(exp: Experiment, s: CellStatus, cmd: list[str], log: Path, exp_dir: Path, echo: bool,
                      say: Callable[[str], None], claim: CellClaim | None = None) -> bool:
    """Train the cell, its output to ``log`` (and the terminal with ``echo``), and write its record; True if it
    finished. The claim on the cell is released at the end, the record written. With several cells at once,
    this runs in a worker thread: each cell writes only its own files."""
    try:
        t0 = time.monotonic()
        try:
            code = stream(cmd, log, echo=echo)
        finally:
            note_attempt(s.run, time.monotonic() - t0)
        if code == 0 and (s.run / "metrics.json").is_file():
            collect_cell(exp, s.cell, s.run, exp_dir)
            return True
        say(f"{s.cell.id}: failed (exit {code}): {_last_error(log)}\n  full log: {log}")
        return False
    finally:
        if claim is not None:
            claim.release()


def _record_score(exp_dir: Path, cell_id: str) -> str:
    """The finished cell's dev score as its record holds it, for the runner's one-line report."""
    path = records_dir(exp_dir) / f"{cell_id}.json"
    score = read_record(path)["score"] if path.is_file() else None
    return "dev score " + ("n/a" if score is None else f"{100 * score:.2f}")


__all__ = ["child_env", "cli_value", "interruptible", "note_attempt", "run_dir", "run_experiment", "stream",
           "train_command"]
