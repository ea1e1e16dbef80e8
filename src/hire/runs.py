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
    .hire-run             the marker: written by hire first, it makes the folder a run (:func:`is_run_folder`)
    .lock                 held (``flock``) by the process that trains in the folder

A folder is a run only if it carries the marker: a folder of the user's that happens to hold a
``config.yaml`` or a ``metrics.json`` is not one. A folder that holds another run (a different
configuration, or a finished one) is never overwritten unless ``--overwrite`` is given, and a folder that
holds something other than a run is never touched, ``--overwrite`` or not; an unfinished run with the same
configuration resumes, however its folder is named (relatively, with a trailing slash, or after a move: the
folder's own location never counts, and paths count as what they resolve to, :func:`config_differences`).
No command writes over a run's own files but ``hire train`` in its own folder (:func:`check_not_run_file`).

Crash safety. Every file is written to a temporary name and renamed into place, and a checkpoint is one
folder made complete before it replaces the previous one (``trainer_state.json`` is its last file).
When an evaluation finds a new best model, that model is saved *inside* the checkpoint and moved to
``best/`` only once the checkpoint is in place, so ``best/`` always belongs to the checkpoint's history.
:func:`recover` brings a folder left by a process killed at any point back to its last complete state.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from hire.checks import MARKER, OUTPUT_MARKER, ConfigError, is_run_folder, output_owner, replacing
from hire.config import RunConfig, option_fields
from hire.hardware import resolve_mixed_precision

CHECKPOINT, CHECKPOINT_TMP, CHECKPOINT_OLD = "checkpoint", "checkpoint.tmp", "checkpoint.old"
STAGED_BEST = "best"  # inside a checkpoint: the new best model, moved to <run>/best once the checkpoint is in
COMPLETE = "trainer_state.json"  # a checkpoint's last file: its presence means the checkpoint is whole
ARTEFACTS = ("config.yaml", "state.json", "metrics.jsonl", "metrics.json", "best", "best.old", CHECKPOINT,
             CHECKPOINT_TMP, CHECKPOINT_OLD, "predictions", "submission", "tensorboard")
LOCK = ".lock"


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
    mixed_precision: str | None = None  # what the run trains in (``auto`` resolved when it began)
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
        write_atomic(directory / "state.json", json.dumps(values, indent=2) + "\n")


# -- files -------------------------------------------------------------------------------------------
def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_text(text)


def remove(path: Path) -> None:
    """Remove a file, or a folder and what it holds; nothing where there is nothing."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _complete(checkpoint: Path) -> bool:
    return (checkpoint / COMPLETE).is_file()


def newest_checkpoint(out: Path) -> Path | None:
    """The checkpoint a run in ``out`` resumes from: the first complete one of ``checkpoint``, ``checkpoint.tmp``
    and ``checkpoint.old`` (see :func:`recover`); None where there is none."""
    return next((c for c in (out / CHECKPOINT, out / CHECKPOINT_TMP, out / CHECKPOINT_OLD) if _complete(c)), None)


def recover(out: Path) -> None:
    """Bring a run folder left by a killed process back to its last complete state (idempotent).

    Checkpoint: the newest complete one of ``checkpoint``, ``checkpoint.tmp`` (complete only if the kill
    came between its last file and its rename) and ``checkpoint.old`` (the previous one, kept until the
    new one is in place) becomes ``checkpoint``; the others are removed. Best model: a best model staged
    in the checkpoint replaces ``best/`` (``best.old`` is always a leftover).
    """
    ckpt, tmp, old = out / CHECKPOINT, out / CHECKPOINT_TMP, out / CHECKPOINT_OLD
    newest = newest_checkpoint(out)
    if newest is not None and newest != ckpt:
        remove(ckpt)
        newest.rename(ckpt)
    for leftover in (tmp, old):
        remove(leftover)
    promote_best(out)


def install_checkpoint(out: Path) -> None:
    """Put the complete ``checkpoint.tmp`` in the place of ``checkpoint`` (the previous one is kept as
    ``checkpoint.old`` until the new one is in), then move the best model it stages to ``best/``."""
    tmp, final, old = out / CHECKPOINT_TMP, out / CHECKPOINT, out / CHECKPOINT_OLD
    if _complete(final):
        remove(old)
        final.rename(old)
    else:
        remove(final)
    tmp.rename(final)
    remove(old)
    promote_best(out)


def promote_best(out: Path) -> None:
    """Move a best model staged in the checkpoint to ``best/`` (every intermediate state recovers)."""
    staged, best, old = out / CHECKPOINT / STAGED_BEST, out / "best", out / "best.old"
    if staged.is_dir() and _complete(out / CHECKPOINT):
        if best.exists():
            remove(old)
            best.rename(old)
        staged.rename(best)
    remove(old)


def truncate_metrics(path: Path, step: int) -> None:
    """Drop evaluations logged after the checkpoint (the resumed run makes them again), and a line cut
    short by a kill."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("step", step + 1) <= step:
            kept.append(line)
    write_atomic(path, "".join(ln + "\n" for ln in kept))


def run_finished(out: Path) -> bool:
    """True when ``out`` holds a finished run (its ``state.json`` says so; written after ``metrics.json``)."""
    try:
        return bool(json.loads((out / "state.json").read_text()).get("finished"))
    except (OSError, ValueError, AttributeError):
        return False


def run_of(path: Path | str) -> Path | None:
    """The run folder that ``path`` lies in (or is), if any: the nearest folder at or above it that is a run."""
    here = Path(path).expanduser().absolute()
    for folder in (here, *here.parents):
        try:
            if is_run_folder(folder):
                return folder
        except OSError:
            return None
    return None


def check_not_run_file(path: Path | str, option: str) -> None:
    """Refuse an output ``path`` (a file or folder a command would write) that is a run folder, or lies in one
    of a run's own files or folders (``ARTEFACTS``, the marker, the lock): only ``hire train`` writes those.
    A new path beside them in the run folder (``RUN/eval-RTE``) is allowed. Raises :class:`ConfigError`."""
    here = Path(path).expanduser().absolute()
    run = run_of(here)
    if run is None:
        return
    if here == run or here.relative_to(run).parts[0] in (*ARTEFACTS, MARKER, LOCK):
        what = "is the run folder" if here == run else f"belongs to the run in {run}"
        raise ConfigError(f"{option} {path}: {what}, whose files only `hire train` writes; choose another path")


def mark_run_folder(out: Path) -> None:
    """Write the marker (first, into an empty folder) that makes ``out`` a run folder."""
    from hire import __version__

    write_atomic(out / MARKER, json.dumps({"hire": __version__}) + "\n")


def mark_output_folder(out: str | Path, command: str) -> Path:
    """Create a lab command's output folder (or take the one it has) and write its marker, :data:`OUTPUT_MARKER`
    naming ``command``, before the command's first file: a later run of the same command recognises the folder
    as its own (:func:`hire.checks.check_own_folder`), any other command as not its own. Call it where the first
    file is written, never earlier (a command refused before that leaves nothing behind). Returns the folder."""
    from hire import __version__

    folder = Path(out).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    if output_owner(folder) != command:
        write_atomic(folder / OUTPUT_MARKER, json.dumps({"command": command, "hire": __version__}) + "\n")
    return folder


# -- the lock ----------------------------------------------------------------------------------------
def take_lock(path: Path, note: bool = True) -> IO[str] | None:
    """An exclusive ``flock`` on ``path``, taken without waiting: the open file, which holds the lock until it
    is closed (the operating system releases it when the process ends, however it ends, so a killed process
    never leaves a stale lock), or None if another process holds it. ``note``: write this process's pid in it."""
    f = path.open("a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    except OSError as err:  # a file system that refuses locks says so without naming the file
        f.close()
        if err.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err.errno, "the file system refuses file locks (flock); use a folder on one that "
                          "allows them", str(path)) from err
        raise
    if note:
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}\n")
        f.flush()
    return f


def lock_holder(path: Path, default: str) -> str:
    """What the lock's holder wrote in it (its pid), else ``default``."""
    try:
        return path.read_text().strip() or default
    except OSError:
        return default


def lock_held(path: Path) -> bool:
    """Whether another process holds the lock on ``path`` right now."""
    if not path.is_file():
        return False
    f = take_lock(path, note=False)
    if f is None:
        return True
    f.close()
    return False


class RunLock:
    """An exclusive lock (:func:`take_lock`) on ``<run>/.lock``, held while a process trains in the folder."""

    def __init__(self, out: Path):
        self.path = out / LOCK
        self.file: IO[str] | None = None

    def acquire(self) -> RunLock:
        self.file = take_lock(self.path)
        if self.file is None:
            raise ConfigError(f"--output_dir {self.path.parent} is in use by a run in progress "
                              f"({lock_holder(self.path, 'another process')}); wait for it to finish, or choose "
                              "another folder")
        return self

    def release(self) -> None:
        if self.file is not None:
            self.file.close()  # closing the descriptor releases the lock
            self.file = None


def folder_in_use(out: Path) -> bool:
    """Whether a process is training in ``out`` right now (its lock is held)."""
    return lock_held(Path(out) / LOCK)


# -- deciding what to do with a folder ---------------------------------------------------------------
# Options that name files or folders: compared as the paths they resolve to (``runs/x`` and ``./runs/x/`` are one).
PATH_OPTIONS = ("data.data_dir", "data.train_file", "data.dev_file", "data.test_file", "model.encoder",
                "model.init_from")
# Options that never make a run another one: they say where the run is (``output_dir``: the folder may be
# given relatively, with a trailing slash, or moved), or what happens to the folder or after training.
NOT_THE_RUN = ("output_dir", "overwrite", "predict_test")


def _comparable(name: str, value: Any) -> Any:
    """An option's value as two runs are compared: a path resolved (a hub name, which names no local path, as it
    is), anything else as it is."""
    if name in PATH_OPTIONS and isinstance(value, str) and value:
        from hire.checks import path_kind, real_path

        if name != "model.encoder" or path_kind(value) is not None:
            return real_path(value)
    return value


def config_differences(saved: Path, cfg: RunConfig) -> dict[str, tuple[Any, Any]]:
    """The options in which the run saved in ``saved`` (its ``config.yaml``) differs from ``cfg``, each with the
    saved value and ``cfg``'s; every option (saved value None) where the file does not read as a configuration.
    ``NOT_THE_RUN`` do not count; paths count as what they resolve to (:func:`_comparable`)."""
    names = [name for name, _, _ in option_fields(RunConfig) if name not in NOT_THE_RUN]
    try:
        old = RunConfig.from_dict(yaml.safe_load(saved.read_text()) or {})
    except (yaml.YAMLError, UnicodeDecodeError):
        old = None
    return {name: (None if old is None else old.get(name), cfg.get(name)) for name in names
            if old is None or _comparable(name, old.get(name)) != _comparable(name, cfg.get(name))}


def _differences_text(differences: dict[str, tuple[Any, Any]]) -> str:
    shown = [f"{name} (the run's {old!r}, now {new!r})" for name, (old, new) in list(differences.items())[:3]]
    more = len(differences) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def check_output_dir(out: Path) -> None:
    """Refuse, before anything is written, a folder that is a file or holds something other than a run."""
    if str(out).strip() in ("", "."):
        raise ConfigError("--output_dir: give a folder of its own for the run (not the working folder)")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--output_dir {out}: is a file, not a folder")
    if out.is_dir() and not is_run_folder(out) and any(p.name != LOCK for p in out.iterdir()):
        raise ConfigError(f"--output_dir {out}: the folder is not empty and holds no run of hire's (no {MARKER} "
                          "marker); choose another folder (--overwrite replaces runs only, never other files)")


def prepare_run_dir(out: Path, cfg: RunConfig) -> RunState:
    """Create the folder, or find the run to resume in it; refuse to clobber another run.

    Call it holding the folder's :class:`RunLock`. Nothing is removed before the decision is made, and
    only a run's own files (``ARTEFACTS``) are ever removed.
    """
    check_output_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "config.yaml"
    if not is_run_folder(out):
        mark_run_folder(out)  # an empty folder (check_output_dir): the marker first, then the run's files
    elif saved.is_file():
        recover(out)
        changed = config_differences(saved, cfg)
        checkpoint = out / CHECKPOINT / COMPLETE
        has_results = checkpoint.is_file() or (out / "best").exists() or (out / "metrics.json").exists()
        if cfg.overwrite:
            pass  # replace the run: its files go below
        elif changed and has_results:
            raise ConfigError(f"--output_dir {out} holds a run with another configuration (differs in "
                              f"{_differences_text(changed)}); choose another folder, or add --overwrite to delete "
                              "that run (its checkpoint and results) and start this one")
        elif run_finished(out):
            raise ConfigError(f"--output_dir {out} holds a finished run (see its metrics.json); "
                              "add --overwrite to delete it and run again")
        elif not changed and checkpoint.is_file():
            resumed = RunState.from_dict(json.loads(checkpoint.read_text()))
            truncate_metrics(out / "metrics.jsonl", resumed.step)
            return resumed
        # Start from nothing: an overwrite, a run that never reached its first checkpoint, or one that
        # failed before any result (a corrected command may then change its configuration).
        for name in ARTEFACTS:
            remove(out / name)
    write_atomic(saved, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    state = RunState()
    state.save(out)
    return state


def checkpoint_precision(out: Path) -> str | None:
    """The precision recorded in the checkpoint a run in ``out`` would resume from (read only, nothing moved);
    None without one, or from a version that did not record it."""
    checkpoint = newest_checkpoint(out)
    if checkpoint is None:
        return None
    try:
        return json.loads((checkpoint / COMPLETE).read_text()).get("mixed_precision")
    except (OSError, ValueError, AttributeError):
        return None  # an unreadable checkpoint: resuming from it fails later, with its own error


def run_precision(out: Path, cfg: RunConfig) -> str:
    """The precision a run in ``out`` trains in: its ``--train.mixed_precision`` resolved on this machine,
    except that ``auto`` is resolved once, when the run begins. A run resumed from its checkpoint goes on in
    the precision it began in, whichever machine it resumes on (exact resume), and says so where this machine
    would pick another."""
    here = resolve_mixed_precision(cfg.train.mixed_precision, "--train.mixed_precision")
    saved = out / "config.yaml"
    resumes = (cfg.train.mixed_precision == "auto" and not cfg.overwrite and is_run_folder(out) and saved.is_file()
               and not config_differences(saved, cfg))
    began = checkpoint_precision(out) if resumes else None
    if began is None or began == here:
        return here
    if began == "fp16":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"--output_dir {out}: the run began in mixed precision 'fp16' on a GPU (what 'auto' "
                              "picked there) and can go on only in it, on a CUDA GPU; resume it on one, or add "
                              "--overwrite to start it again here")
    warnings.warn(f"--output_dir {out}: the run began in mixed precision '{began}' (what 'auto' picked on the "
                  f"machine it began on) and goes on in it, although 'auto' picks '{here}' on this machine; "
                  f"--overwrite starts it again in '{here}'", RuntimeWarning, stacklevel=2)
    return resolve_mixed_precision(began)  # which warns where this CPU only emulates bf16
