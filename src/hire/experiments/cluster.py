"""``hire experiment run --executor slurm|local``: each cell of a grid as one job of a scheduler, through submitit.

The submitting command decides which cells to hand over (as the plain loop, :mod:`hire.experiments.loop`,
decides which to train: done and recorded cells are skipped, a done cell's record brought up to date), submits
one job per cell (with SLURM, one job array: ``--slurm_array_parallelism`` bounds how many run at once) and
returns; ``--wait`` waits for the jobs and reports each. A job (:class:`CellJob`) runs the very command the plain
loop runs for its cell (:func:`hire.experiments.loop.train_command`), its output going to the same log
(``<runs_dir>/<name>/logs/<cell-id>.log``), then writes the cell's record, as the plain loop does.

Preemption and time limits: SLURM signals a job before it stops it; submitit then calls :meth:`CellJob.checkpoint`,
which stops ``hire train`` (as Ctrl-C would) and hands submitit the same cell to requeue. The requeued job runs
the same command, and ``hire train`` resumes from its last checkpoint by itself. A job that reaches its time
limit is requeued the same way, up to ``MAX_TIMEOUTS`` times.

Who runs which cell is the scheduler's to say, not a lock's (a ``flock`` taken on one node is not seen on
another by many shared file systems): each submitted cell gets a job file, ``records/.jobs/<cell-id>.json``,
written atomically, naming its job. A cell whose job is queued or running, or whose job's state the scheduler
cannot tell, is not submitted again (and the plain loop leaves it alone); a cell whose job ended unfinished
(failed, cancelled, out of time) is submitted anew, its run resuming. A job that starts and finds its cell's job
file naming another job leaves the cell to that one. Records are written atomically under unique temporary
names (:func:`hire.experiments.records.write_atomic_bytes`), so jobs on many nodes never mix their files.
``hire train``'s own lock on ``<run>/.lock`` stays a guard between processes of one node.
"""

from __future__ import annotations

import os
import pickle
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from submitit.helpers import Checkpointable, DelayedSubmission

from hire.config import ConfigError
from hire.experiments.experiment import Experiment
from hire.experiments.jobs import EXECUTORS, job_file, job_states, read_job_file, write_job_file
from hire.experiments.loop import (
    Progress,
    _last_error,
    _record_score,
    _skip,
    child_env,
    interruptible,
    note_attempt,
    runner_lock,
    train_command,
)
from hire.experiments.records import collect_cell, records_dir
from hire.experiments.status import TO_TRAIN, CellStatus, cell_status, cell_statuses, matches_only

MAX_TIMEOUTS = 3  # how often a cell's job is requeued after reaching its time limit (preemptions do not count)
STOP_SECONDS = 60  # how long `hire train` has to stop after Ctrl-C before it is killed (SLURM gives 90 s)
POLL_SECONDS = 0.2  # how often a job looks whether its `hire train` ended
TERM_GRACE_SECONDS = 600  # how long a job whose `hire train` got SIGTERM waits for the scheduler to end it
# What sacct says of a job that has not ended: it runs, or waits (a requeued job waits again, under its own id).


@dataclass(frozen=True)
class ClusterOptions:
    """How the cells' jobs are submitted (``hire experiment run --executor ...``)."""

    executor: str  # slurm or local
    timeout_min: int = 240  # each job's time limit; a cell that needs longer is requeued and resumes
    gpus_per_job: int = 1
    cpus_per_job: int | None = None  # None: the scheduler's default
    mem_gb: float | None = None
    partition: str | None = None
    array_parallelism: int | None = None  # SLURM: at most this many cells at once (None: submitit's 256)
    slurm_options: dict[str, str] = field(default_factory=dict)  # any other sbatch option, e.g. account, qos

    def check(self, submitting: bool = True) -> None:
        """Every option in range, and (``submitting``) the executor usable here, before anything is written
        (ConfigError naming the option)."""
        if self.executor not in EXECUTORS:
            raise ConfigError(f"--executor: expected slurm or local, not {self.executor!r}")
        for name, value, least in (("timeout_min", self.timeout_min, 1), ("gpus_per_job", self.gpus_per_job, 0),
                                   ("cpus_per_job", self.cpus_per_job, 1),
                                   ("slurm_array_parallelism", self.array_parallelism, 1)):
            if value is not None and value < least:
                raise ConfigError(f"--{name}: expected {least} or more, not {value}")
        if self.mem_gb is not None and not self.mem_gb > 0:  # not NaN either
            raise ConfigError(f"--mem_gb: expected more than 0, not {self.mem_gb}")
        if self.executor == "local":
            given = [name for name, value in (("slurm_partition", self.partition), ("slurm_option", self.slurm_options),
                                              ("slurm_array_parallelism", self.array_parallelism)) if value]
            if given:
                raise ConfigError(f"--{given[0]}: only with --executor slurm")
            gpus = local_gpus() if self.gpus_per_job else []
            if gpus and self.gpus_per_job > len(gpus):
                raise ConfigError(f"--gpus_per_job {self.gpus_per_job}: this machine has {len(gpus)} GPU(s)")
        elif submitting and (shutil.which("sbatch") is None or shutil.which("srun") is None):
            raise ConfigError("--executor slurm: `sbatch` or `srun` is not on this machine's PATH; submit from a "
                              "machine of the SLURM cluster (a login node)")


def parse_slurm_options(values: list[str] | None) -> dict[str, str]:
    """``--slurm_option KEY=VALUE`` (repeatable): sbatch options submitit has no name for (account, qos,
    constraint, ...); the key as sbatch spells it, with - or _."""
    options: dict[str, str] = {}
    for text in values or []:
        key, sep, value = text.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not key or not value.strip():
            raise ConfigError(f"--slurm_option: expected KEY=VALUE (e.g. account=my-project), not {text!r}")
        options[key.replace("_", "-")] = value.strip()
    return options


def local_gpus() -> list[int]:
    """The GPUs this machine lets its processes see: ``CUDA_VISIBLE_DEVICES`` where it is set, else every GPU
    torch finds (none without CUDA)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [int(x) for x in visible.split(",") if x.strip().isdigit()]
    try:
        import torch

        return list(range(torch.cuda.device_count()))
    except Exception:  # no usable CUDA: no GPUs to hand out
        return []


# -- the job -----------------------------------------------------------------------------------------
class CellFailed(RuntimeError):
    """A cell's job ended without a finished run: the message says why and where its log is."""


@dataclass(frozen=True)
class CellSpec:
    """Everything a cell's job needs, pickled with it: the experiment as submitted, the cell, its command."""

    experiment: Experiment
    cell_id: str
    run: Path
    exp_dir: Path
    log: Path
    command: tuple[str, ...]
    cwd: Path  # where the command was made: relative paths in it (an encoder, data files) are read from there
    executor: str


class CellJob(Checkpointable):
    """One cell as a submitit job: train it with the plain loop's command, then write its record.

    Submitit calls :meth:`checkpoint` when the scheduler is about to stop the job (preemption, time limit):
    ``hire train`` is stopped and the same cell is requeued; the requeued job resumes the run."""

    def __init__(self, spec: CellSpec) -> None:
        self.spec = spec
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False  # Ctrl-C sent: a second one would cut its clean stop short

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}  # a running process is this job's alone

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.spec, self._proc, self._stopping = state["spec"], None, False

    def __call__(self) -> dict[str, Any]:
        spec = self.spec
        cell = spec.experiment.cell(spec.cell_id)
        records = records_dir(spec.exp_dir)
        job_id = _this_job_id()
        if job_id is not None:
            owner = read_job_file(job_file(records, cell.id))
            if owner is not None and owner["job_id"] != job_id:
                print(f"{cell.id}: left to {owner['executor']} job {owner['job_id']} (its job file names it)")
                return {"cell": cell.id, "outcome": "left to another job"}
            write_job_file(records, cell.id, spec.executor, job_id, _job_folder())
        s = cell_status(cell, spec.run, records, claims=False)
        if s.state == "done":
            collect_cell(spec.experiment, cell, spec.run, spec.exp_dir)
            return {"cell": cell.id, "outcome": "done already"}
        if s.state == "recorded":
            return {"cell": cell.id, "outcome": "recorded already"}
        if s.state == "changed":
            raise CellFailed(f"{cell.id}: {spec.run} holds a run with another configuration (differs in: "
                             f"{', '.join(s.differences)}); delete the folder to run the cell as the experiment "
                             "file says")
        if s.state == "running":
            raise CellFailed(f"{cell.id}: a process is training in {spec.run} right now")
        print(f"{cell.id}: training{' (resuming)' if s.state == 'started' else ''}; log: {spec.log}", flush=True)
        t0 = time.monotonic()
        try:
            code = self._train()
        finally:  # also when submitit ends the job after checkpoint(): `hire train` stops before this process
            self._stop_training()
            note_attempt(spec.run, time.monotonic() - t0)
        if code == 0 and (spec.run / "metrics.json").is_file():
            collect_cell(spec.experiment, cell, spec.run, spec.exp_dir)
            print(f"{cell.id}: finished ({_record_score(spec.exp_dir, cell.id)})", flush=True)
            return {"cell": cell.id, "outcome": "finished"}
        if code == -signal.SIGTERM:
            # The scheduler is ending the job (a preemption without the early signal, a cancel): SLURM sends
            # SIGTERM to every process of the job, and kills this one shortly. A result written now would say
            # the job ended while SLURM may requeue it; without one, the job's state is the scheduler's word.
            print(f"{cell.id}: `hire train` was stopped by SIGTERM; waiting for the scheduler to end the job",
                  flush=True)
            time.sleep(TERM_GRACE_SECONDS)
        raise CellFailed(f"{cell.id}: failed (exit {code}): {_last_error(spec.log)}; full log: {spec.log}")

    def _train(self) -> int:
        """Run the cell's command, its output appended to the cell's log; its exit status. The process is
        polled, not waited for: the preemption signal's handler (:meth:`checkpoint`) must never find a wait
        of this thread holding the process's lock."""
        spec = self.spec
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        with spec.log.open("ab") as sink:
            sink.write(f"$ {shlex.join(spec.command)}\n".encode())
            sink.flush()
            self._proc = subprocess.Popen(list(spec.command), stdout=sink, stderr=subprocess.STDOUT,
                                          env=child_env(), cwd=spec.cwd, preexec_fn=interruptible)
        while (code := self._proc.poll()) is None:
            time.sleep(POLL_SECONDS)
        return code

    def _interrupt(self) -> None:
        """Ctrl-C to ``hire train`` (once): it stops at its next step, and resumes from its last checkpoint."""
        if self._proc is not None and not self._stopping and self._proc.poll() is None:
            self._stopping = True
            self._proc.send_signal(signal.SIGINT)

    def _stop_training(self) -> None:
        """Stop ``hire train`` if it still runs: Ctrl-C, and a kill if it has not stopped after ``STOP_SECONDS``."""
        proc = self._proc
        if proc is None:
            return
        self._interrupt()
        try:
            proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._proc, self._stopping = None, False

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Called by submitit (in its signal handler) when the job is preempted or reaches its time limit:
        interrupt ``hire train`` and requeue the same cell, as a fresh job of the same spec (the run folder holds
        the progress). Submitit then ends this process, and :meth:`__call__` waits for ``hire train`` to stop."""
        self._interrupt()
        return DelayedSubmission(CellJob(self.spec))


def _this_job_id() -> str | None:
    """The scheduler's id of the job this process runs in (None outside a submitit job)."""
    try:
        from submitit import JobEnvironment

        return str(JobEnvironment().job_id)
    except (RuntimeError, KeyError):  # not in a job
        return None


def _job_folder() -> Path:
    return Path(os.environ.get("SUBMITIT_FOLDER", "."))


# -- submitting --------------------------------------------------------------------------------------
def make_executor(options: ClusterOptions, folder: Path, name: str) -> Any:
    """The submitit executor: SLURM with its options, or the local one (every job at once on this machine)."""
    import submitit

    if options.executor == "slurm":
        executor: Any = submitit.SlurmExecutor(folder, max_num_timeout=MAX_TIMEOUTS)
        params: dict[str, Any] = {"job_name": name, "time": options.timeout_min, "stderr_to_stdout": True,
                                  "ntasks_per_node": 1}
        if options.gpus_per_job:
            params["gpus_per_node"] = options.gpus_per_job
        if options.cpus_per_job is not None:
            params["cpus_per_task"] = options.cpus_per_job
        if options.mem_gb is not None:
            params["mem"] = f"{options.mem_gb:g}GB"
        if options.partition:
            params["partition"] = options.partition
        if options.array_parallelism is not None:
            params["array_parallelism"] = options.array_parallelism
        if options.slurm_options:
            params["additional_parameters"] = dict(options.slurm_options)
        executor.update_parameters(**params)
        return executor
    executor = submitit.LocalExecutor(folder, max_num_timeout=MAX_TIMEOUTS)
    executor.update_parameters(timeout_min=options.timeout_min, gpus_per_node=0, tasks_per_node=1,
                               stderr_to_stdout=True)
    return executor


def _submit(executor: Any, options: ClusterOptions, jobs: list[CellJob]) -> list[Any]:
    """One array on SLURM; on this machine one job after another, each with its own GPUs (round robin)."""
    if options.executor == "slurm":
        return list(executor.submit_array(jobs))
    gpus, out = local_gpus(), []
    for i, job in enumerate(jobs):
        mine = [gpus[(i * options.gpus_per_job + k) % len(gpus)] for k in range(options.gpus_per_job)] if gpus else []
        executor.update_parameters(gpus_per_node=len(mine), visible_gpus=mine)
        out.append(executor.submit(job))
    return out


def submit_experiment(exp: Experiment, runs_dir: Path, exp_dir: Path, options: ClusterOptions, *,
                      max_runs: int | None = None, only: dict[str, list[Any]] | None = None, wait: bool = False,
                      dry_run: bool = False, experiment_file: str | None = None,
                      say: Callable[[str], None] = print, poll_seconds: float | None = None) -> int:
    """Submit the cells not done, not queued and not running, one job each; returns 0, or 1 if a cell cannot run
    (its folder holds another configuration) or, with ``wait``, a job failed."""
    options.check(submitting=not dry_run)
    runs_dir, exp_dir = Path(runs_dir).absolute(), Path(exp_dir).absolute()
    records = records_dir(exp_dir)
    folder = runs_dir / exp.name / "submitit"
    with nullcontext() if dry_run else runner_lock(runs_dir, required=False):  # one submitter at a time
        statuses = [s for s in cell_statuses(exp, runs_dir, records) if matches_only(s.cell, only)]
        progress, todo = Progress(), []
        for s in statuses:
            if s.state in ("done", "recorded", "running", "queued", "changed"):
                _skip(exp, s, exp_dir, progress, dry_run, say)
            elif max_runs is None or len(todo) < max_runs:
                todo.append(s)
        waiting = sum(s.state in ("running", "queued") for s in statuses)
        left = sum(s.state in TO_TRAIN for s in statuses) - len(todo)
        say(f"{exp.name}: {len(statuses)} cells selected: {progress.already_done} done, {waiting} queued or "
            f"running, {len(todo)} to submit" + (f" ({left} more left: --max_runs {max_runs})" if left else ""))
        if dry_run:
            for s in todo:
                say(f"would submit {s.cell.id}: {shlex.join(train_command(s.cell, s.run))}")
            return 1 if progress.failed else 0
        submitted: list[tuple[CellStatus, Any]] = []
        if todo:
            cwd = Path.cwd()
            for s in todo:  # a job that ended unfinished: its file goes, so that the new job owns the cell
                job_file(records, s.cell.id).unlink(missing_ok=True)
            cell_jobs = [CellJob(CellSpec(exp, s.cell.id, s.run.absolute(), exp_dir, _log(runs_dir, exp, s),
                                          tuple(train_command(s.cell, s.run.absolute())), cwd, options.executor))
                         for s in todo]
            jobs = _submit(make_executor(options, folder, f"hire-{exp.name}"), options, cell_jobs)
            for s, job in zip(todo, jobs, strict=True):
                write_job_file(records, s.cell.id, options.executor, str(job.job_id), folder)
                say(f"{s.cell.id}: submitted as {options.executor} job {job.job_id}")
                submitted.append((s, job))
    if submitted:
        status = shlex.join(["hire", "experiment", "status", experiment_file or str(exp.path), "--runs_dir",
                             str(runs_dir), "--experiments_dir", str(exp_dir.parent), "--list"])
        say(f"{exp.name}: {len(submitted)} cells submitted; progress: {status}; cell logs: "
            f"{runs_dir / exp.name / 'logs'}; job logs: {folder}")
    if not wait or not submitted:
        return 1 if progress.failed else 0
    try:
        failed = wait_for(submitted, exp_dir, say, poll_seconds or (2.0 if options.executor == "local" else 60.0))
    except KeyboardInterrupt:  # this process stops waiting; the jobs are the scheduler's (or this machine's)
        say(going_on(exp.name, options.executor, [job for _, job in submitted if not job.done()]))
        return 130
    say(f"{exp.name}: {len(submitted) - len(failed)} cells finished now, {len(failed)} failed"
        + (f" ({', '.join(failed)})" if failed else ""))
    return 1 if failed or progress.failed else 0


def going_on(name: str, executor: str, jobs: list[Any]) -> str:
    """What Ctrl-C on ``--wait`` leaves: the jobs that go on training, and how to stop them (a local job's
    controller stops its ``hire train`` on SIGINT, which resumes from its checkpoint when the cell runs again)."""
    if not jobs:
        return f"{name}: interrupted; every submitted job had ended"
    ids = " ".join(str(job.job_id) for job in jobs)
    stop = f"kill -INT {ids}" if executor == "local" else f"scancel {ids}"
    return (f"{name}: interrupted: no longer waiting, but {len(jobs)} submitted job(s) go on training ({executor} "
            f"job {ids}); stop them with `{stop}` (each resumes when the cell runs again)")


def _log(runs_dir: Path, exp: Experiment, s: CellStatus) -> Path:
    return runs_dir / exp.name / "logs" / f"{s.cell.id}.log"


def wait_for(submitted: list[tuple[CellStatus, Any]], exp_dir: Path, say: Callable[[str], None],
             poll_seconds: float) -> list[str]:
    """Wait for every job, saying how each ended; the ids of the cells whose jobs failed."""
    pending, failed = dict(enumerate(submitted)), []
    while pending:
        for key, (s, job) in list(pending.items()):
            if not job.done():
                continue
            del pending[key]
            ok, text = job_outcome(job)
            if ok:
                say(f"=== {s.cell.id}: {text} ({_record_score(exp_dir, s.cell.id)})")
            else:
                failed.append(s.cell.id)
                say(text)
        if pending:
            time.sleep(poll_seconds)
    return failed


def job_outcome(job: Any) -> tuple[bool, str]:
    """How a job that is done ended: (True, what it did: finished, done already, ...) or (False, why it failed:
    its exception's last line, or where its log is)."""
    try:
        with job.paths.result_pickle.open("rb") as f:
            outcome, value = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError):
        return False, f"job {job.job_id}: ended without a result (state {job.state}); its log: {job.paths.stdout}"
    if outcome == "success":
        return True, str(value.get("outcome", "finished")) if isinstance(value, dict) else "finished"
    lines = [ln.strip() for ln in str(value).splitlines() if ln.strip()]
    last = lines[-1] if lines else "no message"
    return False, (last.split(": ", 1)[1] if last.startswith(f"{__name__}.CellFailed: ")
                   else f"job {job.job_id}: {last}")


__all__ = ["CellJob", "CellSpec", "ClusterOptions", "job_states", "submit_experiment"]
