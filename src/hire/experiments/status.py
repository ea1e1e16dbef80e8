"""Where an experiment stands: each cell done, running, started, left, or changed; time estimates.

    done     its run folder has metrics.json (and the configuration the experiment file gives it)
    recorded no run folder here, but a committed record of the cell (same configuration): a run finished on
             another machine or in an earlier checkout (run folders are not in git). It is not trained
             again; delete the record to train it here
    running  a process holds the folder's lock (``<run>/.lock``) right now, or another runner (with another
             runs_dir) has claimed the cell (``records/.claims/<cell-id>.lock``), or the scheduler says the cell's
             job (``hire experiment run --executor``, :mod:`hire.experiments.cluster`) is running
    queued   the cell's job waits in the scheduler's queue (submitted, or requeued after a preemption), or its
             state cannot be read (a cell is never submitted twice); shown only where there are such cells
    started  the folder is a run folder (it carries hire's marker) that holds an unfinished run: ``hire train``
             resumes it
    left     nothing yet (a folder that holds no run of hire's is no run: ``hire train`` refuses to write there,
             and says so when the cell runs)
    failed   left or started, but its last training failed: its log (``<runs_dir>/<name>/logs/<cell-id>.log``,
             named in the listing) ends in ``hire train``'s error or a traceback. A runner tries it again; shown only
             where there are such cells
    changed  the folder holds a run with another configuration (the file changed since): it is never
             overwritten; delete the folder to run the cell again

A cell's time is estimated from finished records of the same task and head (their median wall time,
else their training time): those made on this machine's device in the cell's precision where there are some,
else on this device, else on a device of the same kind (CPU or GPU) in the cell's precision, else on one of
those; else a default. Two CPUs are one device where they have the same name and do not differ in bf16 units
(an "AMD EPYC" with them runs HIRE several times faster than one without); the runner says where an estimate
came from when it is not this device in the cell's precision. A started cell's time
left is its own pace so far (training seconds per step, evaluations included, from its ``state.json``) times
the steps it has left: up to the median length of the finished records of its task and head (any device:
steps do not depend on it) where it has not passed that, else up to its step limit; and never less than early
stopping allows (``patience`` evaluations after its best step).
"""

from __future__ import annotations

import errno
import json
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from hire.experiments.experiment import Experiment
from hire.experiments.jobs import JobState, job_states
from hire.experiments.records import JOBS_FOLDER, read_record, run_config, run_dir
from hire.experiments.spec import (
    PRECISION,
    Cell,
    canonical,
    cell_differences,
    check_option,
    fail,
    record_differences,
)

STATES = ("done", "recorded", "running", "queued", "started", "left", "failed", "changed")
TO_TRAIN = ("left", "started", "failed")  # the states of the cells a runner trains (a failed one is tried again)
SHOWN_IF_ANY = ("queued", "failed")  # counted in the summary only where some cell is in them
NO_LOCKS = (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP)  # a file system that offers no flock at all


@dataclass(frozen=True)
class CellStatus:
    """Where one cell stands: ``state`` is one of :data:`STATES` (the module's docstring says what each means),
    ``run`` the cell's run folder."""

    cell: Cell
    run: Path
    state: str
    differences: tuple[str, ...] = ()  # for "changed": the options that differ
    job: str | None = None  # for a cell the scheduler runs or queues: its job, e.g. "slurm job 4242_0 (PENDING)"
    log: Path | None = None  # for "failed": the log that says why


def training_in(path: Path) -> bool:
    """Whether a run is training in ``path`` right now (:func:`hire.runs.folder_in_use`). On a file system that
    offers no locks, the folder's lock cannot tell: False (a cluster's scheduler tells running cells apart,
    :func:`cell_statuses`)."""
    from hire.runs import folder_in_use

    try:
        return folder_in_use(Path(path))
    except OSError as err:
        if err.errno in NO_LOCKS:
            return False
        raise


class CellClaim:
    """A runner's claim on a cell while it trains it: an exclusive lock on ``records/.claims/<cell-id>.lock``.

    Run folders are locked by ``hire train`` itself, but two runners with different runs_dirs train into
    different folders: without a claim, both could train the same cell (each decides what to run from the
    states it saw) and the later record would replace the earlier. The claim lives beside the records, which
    every runner of the experiment shares; the lock goes with the process that holds it, so a killed runner
    leaves no stale claim. The folder ignores itself in git.
    """

    def __init__(self, records: Path, cell_id: str) -> None:
        self.path = Path(records) / ".claims" / f"{cell_id}.lock"
        self._file: Any = None

    def acquire(self) -> bool:
        """Take the claim (:func:`hire.runs.take_lock`); False (and nothing held) if another process holds it."""
        from hire.runs import take_lock

        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / ".gitignore").is_file():
            (folder / ".gitignore").write_text("*\n")
        self._file = take_lock(self.path)
        return self._file is not None

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the file drops the lock; the file stays (removing it would race)
            self._file = None

    def held_elsewhere(self) -> bool:
        """Whether another process holds the claim right now."""
        from hire.runs import lock_held

        return lock_held(self.path)


def recorded(cell: Cell, records: Path | None) -> bool:
    """Whether ``records`` holds a record of ``cell`` with the configuration the experiment file gives it."""
    path = None if records is None else Path(records) / f"{cell.id}.json"
    if path is None or not path.is_file():
        return False
    return not record_differences(read_record(path), cell.options)


def cell_status(cell: Cell, run: Path, records: Path | None = None, claims: bool = True,
                job: JobState | None = None) -> CellStatus:
    """``claims``: whether a claim on the cell counts as running (not when this process holds it). ``job``: the
    state of the cell's scheduler job (:func:`hire.experiments.jobs.job_states`), if it has one."""
    from hire.runs import is_run_folder

    if job is not None and job.state != "ended":
        return CellStatus(cell, run, "running" if job.state == "running" else "queued", job=job.describe())
    if training_in(run) or (claims and records is not None and CellClaim(records, cell.id).held_elsewhere()):
        return CellStatus(cell, run, "running")
    if not is_run_folder(run):
        return CellStatus(cell, run, "recorded") if recorded(cell, records) else _left(cell, run, "left")
    if not (run / "config.yaml").is_file():
        return _left(cell, run, "started")  # marked, stopped before its configuration: `hire train` starts it
    differ = tuple(cell_differences(run_config(run), cell.options))
    if differ:
        return CellStatus(cell, run, "changed", differ)
    return CellStatus(cell, run, "done") if (run / "metrics.json").is_file() else _left(cell, run, "started")


def cell_log(run: Path, cell: Cell) -> Path:
    """Where a runner writes the output of a cell's training: ``<runs_dir>/<name>/logs/<cell-id>.log``, beside the
    cell's run folder ``<runs_dir>/<name>/<cell-id>``."""
    return run.parent / "logs" / f"{cell.id}.log"


def failed_log(log: Path) -> bool:
    """Whether the last training in ``log`` failed: its last lines hold ``hire train: error: ...`` or a traceback
    (an interrupted run ends in ``hire train: interrupted``, and resumes: it is no failure)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            tail = f.read().decode(errors="replace")
    except OSError:
        return False
    lines = [ln.strip() for ln in tail.replace("\r", "\n").splitlines() if ln.strip()]
    if not lines or lines[-1].startswith("hire train: interrupted"):
        return False
    return lines[-1].startswith("hire train: error:") or any(ln.startswith("Traceback") for ln in lines[-40:])


def _left(cell: Cell, run: Path, state: str) -> CellStatus:
    """A cell not trained to its end: ``state`` (left or started), or failed where its log says so."""
    log = cell_log(run, cell)
    return CellStatus(cell, run, "failed", log=log) if failed_log(log) else CellStatus(cell, run, state)


def cell_statuses(exp: Experiment, runs_dir: Path, records: Path | None = None) -> list[CellStatus]:
    """Every cell's state; with ``records`` (the experiment's records folder) a cell that has no run folder
    here but a matching committed record is ``recorded`` rather than ``left``, and a cell with a scheduler job
    that has not ended is ``queued`` or ``running`` (one query to the scheduler for all of them)."""
    jobs = scheduled_jobs(records)
    return [cell_status(c, run_dir(runs_dir, exp, c), records, job=jobs.get(c.id)) for c in exp.cells]


def scheduled_jobs(records: Path | None) -> dict[str, JobState]:
    """The scheduler jobs of an experiment's cells, by cell id (:func:`hire.experiments.jobs.job_states`);
    empty, at no cost, where no cell was ever submitted to a scheduler."""
    if records is None or not (Path(records) / JOBS_FOLDER).is_dir():
        return {}

    return job_states(Path(records))


def parse_only(exp: Experiment, values: Sequence[str] | None) -> dict[str, list[Any]]:
    """``--only key=value`` filters: the same key given twice means either value; keys combine with and.
    ``cell=<id>`` picks cells by id."""
    only: dict[str, list[Any]] = {}
    for text in values or []:
        key, sep, raw = text.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not key:
            fail("--only", "", f"expected key=value (e.g. data.task=RTE), not {text!r}")
        value = raw.strip() if key == "cell" else check_option(Path("--only"), "", key, raw.strip())
        only.setdefault(key, []).append(value)
    for key, values in only.items():  # a value no cell has would select nothing, and say nothing
        have = {canonical(c.id if key == "cell" else c.options[key]): c.id if key == "cell" else c.options[key]
                for c in exp.cells}
        missing = next((v for v in values if canonical(v) not in have), None)
        if missing is not None:
            shown = sorted({str(v) for v in have.values()})
            more = f", ... ({len(shown)} in all)" if len(shown) > 12 else ""
            fail("--only", "", f"no cell of the experiment has {key}={missing}; its cells have "
                               f"{key}={', '.join(shown[:12])}{more}")
    return only


def matches_only(cell: Cell, only: dict[str, list[Any]] | None) -> bool:
    for key, values in (only or {}).items():
        mine = cell.id if key == "cell" else cell.options[key]
        if canonical(mine) not in {canonical(v) for v in values}:
            return False
    return True


class Device(NamedTuple):
    """Where a run trained: its GPU's name, else its processor's; whether that is a GPU; what a precision setting
    of ``auto`` resolves to there (None: unknown); and, for a CPU, whether it has bf16 matrix units (None: unknown).

    Processors of one name differ: an "AMD EPYC" with bf16 units runs HIRE several times faster than one without
    (``benchmarks/results/cpu-2core-avx2``), so two CPUs are the same device only where they do not differ in that.
    """

    name: str
    gpu: bool
    auto: str | None = None
    bf16_units: bool | None = None

    def precision(self, setting: str) -> str | None:
        return self.auto if setting == "auto" else setting

    def same(self, other: Device | None) -> bool:
        """Whether ``other`` is this device: the same name, and not known to differ in bf16 units."""
        return (other is not None and other.name == self.name
                and (None in (other.bf16_units, self.bf16_units) or other.bf16_units == self.bf16_units))


def device_of(machine: dict[str, Any] | None) -> Device | None:
    """The device a record's run trained on (None where the record does not say)."""
    if not machine or not (machine.get("gpu") or machine.get("cpu")):
        return None
    gpu = bool(machine.get("gpu"))
    units = None if gpu or machine.get("fast_bf16_cpu") is None else bool(machine["fast_bf16_cpu"])
    return Device(machine.get("gpu") or machine["cpu"], gpu, None, units)


#: Where a cell's time estimate comes from, best first (:meth:`Estimates.basis`).
BASES = ("this device in its precision", "this device in another precision", "another device in its precision",
         "another device in another precision", "no record")


@dataclass
class Estimates:
    """Seconds per cell by (task, head), from finished records: the median over the records made on ``device``
    (this machine, :meth:`Device.same`) in the precision the cell resolves to here, else on this device in any
    precision, else on a device of the same kind or one the record does not name (a GPU's minutes are a CPU's hours)
    in the cell's precision, else on one of those in any precision, else ``default`` (:data:`BASES` names these;
    :meth:`basis` says which one a cell's estimate comes from). Without a ``device``, the median over all records.
    Where records of the cell's own setting (every option the record names, but the seed: a pairwise loss, a frozen
    encoder) are there, only they count, in the same order; the steps of a started cell likewise."""

    by_group: dict[tuple[str, str], list[tuple[Device | None, str | None, float]]]
    default: float
    device: Device | None = None
    steps: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # the records' lengths in steps
    # (the record's options but its seed, its device, precision, seconds or None, steps or None)
    settings: list[tuple[dict[str, Any], Device | None, str | None, float | None, int | None]] = field(
        default_factory=list)

    @classmethod
    def from_records(cls, folder: Path, default_minutes: float, device: Device | None = None) -> Estimates:
        groups: dict[tuple[str, str], list[tuple[Device | None, str | None, float]]] = {}
        steps: dict[tuple[str, str], list[int]] = {}
        settings: list[tuple[dict[str, Any], Device | None, str | None, float | None, int | None]] = []
        for path in sorted(Path(folder).glob("*.json")):
            r = read_record(path)
            # keyed as a cell names its task: the option's value (conll2003), not the record's display name
            # (CoNLL-2003), which is the same only for GLUE's tasks
            task = ((r.get("config") or {}).get("data") or {}).get("task") or r.get("task")
            seconds = r.get("wall_seconds") or r.get("train_seconds")
            if seconds:
                groups.setdefault((task, r.get("head")), []).append(
                    (device_of(r.get("machine")), r.get("mixed_precision"), float(seconds)))
            if r.get("steps"):
                steps.setdefault((task, r.get("head")), []).append(int(r["steps"]))
            options = r.get("options")
            if isinstance(options, dict) and options:
                settings.append(({k: v for k, v in options.items() if k != "train.seed"},
                                 device_of(r.get("machine")), r.get("mixed_precision"),
                                 float(seconds) if seconds else None, int(r["steps"]) if r.get("steps") else None))
        return cls(groups, 60 * default_minutes, device, steps, settings)

    def _same_setting(self, cell: Cell) -> list[tuple[Device | None, str | None, float | None, int | None]]:
        """The records of ``cell``'s own setting: every option a record names but the seed has the cell's value."""
        return [(d, p, t, n) for options, d, p, t, n in self.settings
                if all(k in cell.options and cell.options[k] == v for k, v in options.items())]

    def known(self, cell: Cell) -> bool:
        """Whether the estimate for ``cell`` comes from records (not the default)."""
        return self._found(cell) is not None

    def seconds(self, cell: Cell) -> float:
        found = self._found(cell)
        return self.default if found is None else found[0]

    def basis(self, cell: Cell) -> str:
        """Where :meth:`seconds` of ``cell`` comes from: one of :data:`BASES` ("records" where no device is known)."""
        found = self._found(cell)
        return BASES[-1] if found is None else "records" if self.device is None else BASES[found[1]]

    def seconds_left(self, status: CellStatus) -> float:
        """What ``status``'s cell has left to train: for a started (or running) cell whose folder says how far
        it got, its own pace times its steps left (see the module's docstring); else :meth:`seconds`."""
        return self.left_after(status.cell, progress(status))

    def left_after(self, cell: Cell, got: RunProgress | None) -> float:
        """:meth:`seconds_left` of ``cell`` from its progress ``got`` (None: not started), read once by the caller."""
        if got is None:
            return self.seconds(cell)
        lengths = [n for *_, n in self._same_setting(cell) if n] or self.steps.get((cell.task, cell.head))
        typical = statistics.median(lengths) if lengths else None
        end = typical if typical is not None and typical > got.step else got.limit
        if end is None:
            return self.seconds(cell)
        end = max(end, got.earliest or 0)
        end = min(end, got.limit or end)
        return got.seconds / got.step * max(end - got.step, 0)

    def _found(self, cell: Cell) -> tuple[float, int] | None:
        """(seconds, the index in :data:`BASES` of where they come from) of ``cell``, or None: no record."""
        own = [(d, p, t) for d, p, t, _ in self._same_setting(cell) if t]
        return self._median(own, cell) or self._median(self.by_group.get((cell.task, cell.head), []), cell)

    def _median(self, values: list[tuple[Device | None, str | None, float]], cell: Cell) -> tuple[float, int] | None:
        here = self.device
        if here is None:
            tiers = [[t for _, _, t in values]]
        else:
            precision = here.precision(str(cell.options.get(PRECISION, "auto")))
            kind = [(d, p, t) for d, p, t in values if d is None or d.gpu == here.gpu]
            tiers = [[t for d, p, t in values if here.same(d) and p == precision],
                     [t for d, _, t in values if here.same(d)],
                     [t for _, p, t in kind if p == precision],
                     [t for *_, t in kind]]
        return next(((statistics.median(times), i) for i, times in enumerate(tiers) if times), None)


class RunProgress(NamedTuple):
    step: int  # the steps done
    seconds: float  # the training seconds they took (evaluations included)
    limit: int | None  # the run's step limit (train.max_steps, else epochs x steps per epoch), None if unknown
    earliest: int | None = None  # the earliest step early stopping can end it at: patience evaluations after its best


def progress(status: CellStatus) -> RunProgress | None:
    """:func:`run_progress` of a started (or running) cell's folder; None for a cell in any other state."""
    return run_progress(status.run) if status.state in ("started", "running", "queued", "failed") else None


def run_progress(run: Path) -> RunProgress | None:
    """How far an unfinished run in ``run`` got, from its ``state.json``; its step limit from its saved
    configuration, and the steps per epoch from its first end-of-epoch evaluation in ``metrics.jsonl``.
    None where the folder holds no step yet (or files that cannot be read)."""
    from hire.runs import RunState

    try:
        state = RunState.from_dict(json.loads((run / "state.json").read_text()))
        step, seconds = int(state.step or 0), float(state.train_seconds or 0.0)
        train = (yaml.safe_load((run / "config.yaml").read_text()) or {}).get("train") or {}
    except (OSError, ValueError, TypeError, yaml.YAMLError, AttributeError):
        return None
    if step <= 0 or seconds <= 0:
        return None
    per_epoch = _steps_per_epoch(run / "metrics.jsonl")
    limit = train.get("max_steps") or (train.get("epochs") and per_epoch and round(train["epochs"] * per_epoch))
    interval = train.get("eval_every") or per_epoch
    patience, best = train.get("patience"), state.best_step
    earliest = round(best + patience * interval) if patience and interval and best else None
    return RunProgress(step, seconds, int(limit) if limit else None, earliest)


def _steps_per_epoch(metrics: Path) -> float | None:
    """Steps per epoch, from the first evaluation in ``metrics`` that logged its epoch (None: none yet). Read
    line by line, skipping lines that do not parse: a started run killed mid-write leaves its last line cut
    short (:func:`hire.runs.truncate_metrics` drops it on resume), so the strict reader the records use
    would fail on exactly the runs this reads."""
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("epoch") and row.get("step"):
            return row["step"] / row["epoch"]
    return None


def this_device() -> Device | None:
    """This machine's device as :func:`device_of` names a record's, with what ``auto`` precision resolves to."""
    from hire.hardware import machine, resolve_mixed_precision

    device = device_of(machine())
    return None if device is None else device._replace(auto=resolve_mixed_precision("auto"))


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def status_report(exp: Experiment, statuses: list[CellStatus], estimates: Estimates, listing: bool = False
                  ) -> list[str]:
    """Counts per state, per (task, head), the estimated time left and (``listing``) every cell."""
    counts = {s: sum(c.state == s for c in statuses) for s in STATES}
    shown = [s for s in STATES if s not in SHOWN_IF_ANY or counts[s]]  # queued: only where a scheduler holds cells
    got = {c.cell.id: progress(c) for c in statuses}  # each started cell's folder, read once
    left = sum(estimates.left_after(c.cell, got[c.cell.id]) for c in statuses
               if c.state in (*TO_TRAIN, "running", "queued"))
    lines = [f"{exp.name} ({exp.path}): {len(statuses)} cells: " + ", ".join(f"{counts[s]} {s}" for s in shown)
             + f"; about {_hours(left)} left"]
    groups: dict[tuple[str, str], list[CellStatus]] = {}
    for c in statuses:
        groups.setdefault((c.cell.task, c.cell.head), []).append(c)
    width = max([len(f"{t} {h}") for t, h in groups] + [10])
    lines.append(f"  {'task head':{width}s} " + " ".join(f"{s:>7s}" for s in shown) + "  min/cell")
    for (task, head), cs in groups.items():
        known = estimates.known(cs[0].cell)
        per_cell = f"{estimates.seconds(cs[0].cell) / 60:8.1f}" + ("" if known else " (default)")
        lines.append(f"  {task + ' ' + head:{width}s} " + " ".join(f"{sum(c.state == s for c in cs):7d}"
                                                                for s in shown) + per_cell)
    if listing:
        lines += [f"  {c.state:8s} {c.cell.id}" + _detail(c, got[c.cell.id], estimates) for c in statuses]
    return lines


def _detail(c: CellStatus, got: RunProgress | None, estimates: Estimates) -> str:
    """What the listing says after a cell's id: how a changed one differs, how far a started one got."""
    if c.differences:
        return f"  (differs in {', '.join(c.differences)})"
    if c.log is not None:
        return f"  (see its log: {c.log})"
    job = f"{c.job}: " if c.job else ""
    if got is None:
        return f"  ({c.job})" if c.job else ""
    return (f"  ({job}step {got.step}" + (f" of at most {got.limit}" if got.limit else "")
            + f", {_hours(got.seconds)} so far, about {_hours(estimates.left_after(c.cell, got))} left)")


def print_status(exp: Experiment, runs_dir: Path, records: Path, default_minutes: float,
                 only: dict[str, list[Any]] | None, listing: bool, say: Callable[[str], None] = print) -> int:
    statuses = [s for s in cell_statuses(exp, runs_dir, records) if matches_only(s.cell, only)]
    estimates = Estimates.from_records(records, default_minutes, this_device())
    for line in status_report(exp, statuses, estimates, listing):
        say(line)
    return 0
