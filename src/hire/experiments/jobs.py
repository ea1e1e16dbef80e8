"""The scheduler jobs of a grid's cells (``hire experiment run --executor``): each submitted cell's job file,
``records/.jobs/<cell-id>.json``, written atomically and naming its job, and what the scheduler (or, for
submitit's local executor, this machine) says of each job. Read by the submitting command
(:mod:`hire.experiments.cluster`) and by ``hire experiment status`` (:mod:`hire.experiments.status`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from hire.experiments.records import JOBS_FOLDER, json_bytes, write_atomic_bytes
from hire.experiments.spec import ExperimentError

EXECUTORS = ("slurm", "local")
RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING", "RESIZING"}
WAITING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "PREEMPTED", "READY"}


class JobState(NamedTuple):
    """A cell's scheduler job and what the scheduler (or, for the local executor, this machine) says of it:
    ``state`` is queued, running, ended or unknown (the scheduler cannot tell: treated as queued, so that the
    cell is never submitted twice); ``said`` is the scheduler's own word (PENDING, RUNNING, FAILED, ...)."""

    cell: str
    executor: str
    job_id: str
    state: str
    said: str
    file: Path  # the job file, records/.jobs/<cell-id>.json

    def describe(self) -> str:
        text = f"{self.executor} job {self.job_id} ({self.said})"
        if self.state == "unknown":
            text += f"; if the job is gone, delete {self.file} to submit the cell again"
        return text


def jobs_dir(records: Path) -> Path:
    return Path(records) / JOBS_FOLDER


def job_file(records: Path, cell_id: str) -> Path:
    return jobs_dir(records) / f"{cell_id}.json"


def read_job_file(path: Path) -> dict[str, Any] | None:
    """A job file's content (None where there is none); :class:`ExperimentError` naming a file that is not one
    (a job file is written in one rename, so only a hand can damage one)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        info = json.loads(text)
    except ValueError as err:
        problem = f"not valid JSON ({err})"
    else:
        missing = [k for k in ("cell", "executor", "job_id") if not isinstance(info, dict)
                   or not isinstance(info.get(k), str)]
        if not missing and info["executor"] in EXECUTORS:
            return info
        problem = (f"it has no {', '.join(missing)}" if missing else f"unknown executor {info['executor']!r}")
    raise ExperimentError(f"{path}: not a job file of `hire experiment run --executor` ({problem}); it names the "
                          "cell's scheduler job: delete it if no job of the cell is queued or running")


def write_job_file(records: Path, cell_id: str, executor: str, job_id: str, folder: Path) -> None:
    """Name the cell's job, atomically (the folder ignores itself in git: jobs are this checkout's)."""
    folder_path = jobs_dir(records)
    folder_path.mkdir(parents=True, exist_ok=True)
    if not (folder_path / ".gitignore").is_file():
        write_atomic_bytes(folder_path / ".gitignore", b"*\n")
    info = {"cell": cell_id, "executor": executor, "job_id": job_id, "folder": str(folder),
            "host": socket.gethostname(), "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_atomic_bytes(job_file(records, cell_id), json_bytes(info))


def _has_result(info: dict[str, Any]) -> bool:
    """Whether the job named in a job file has written its result (submitit does so when the job ends, not when
    it is requeued)."""
    from submitit.core.utils import JobPaths

    try:
        return bool(info.get("folder")) and JobPaths(info["folder"], info["job_id"], 0).result_pickle.exists()
    except OSError:
        return False


def _local_alive(pid: str) -> bool:
    """Whether the local executor's job ``pid`` (its controller process) still runs on this machine."""
    try:
        cmdline = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError):
        try:
            os.kill(int(pid), 0)
        except (OSError, ValueError):
            return False
        return True  # no /proc here: a live process of that id (pid reuse cannot be told apart)
    return b"submitit" in cmdline


def slurm_states(job_ids: list[str]) -> dict[str, str]:
    """What ``sacct`` says of each job (one call for all); a job it does not list is left out."""
    from submitit.slurm.slurm import SlurmInfoWatcher

    if not job_ids:
        return {}
    command = ["sacct", "-o", "JobID,State", "--parsable2"]
    for main in sorted({j.split("_")[0] for j in job_ids}):
        command += ["-j", main]
    try:
        out = subprocess.run(command, capture_output=True, timeout=120, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    info = SlurmInfoWatcher().read_info(out)
    return {j: (info[j].get("State") or "UNKNOWN").split()[0] for j in job_ids if j in info}


def job_states(records: Path) -> dict[str, JobState]:
    """Each submitted cell's job, by cell id, with its state: ``running``, ``queued`` or ``ended`` as the
    scheduler says (for the local executor: whether its process lives); where the scheduler does not know the
    job, ``ended`` if it wrote its result, else ``unknown`` (no accounting, a local job of another machine),
    which counts as queued."""
    files = {p: read_job_file(p) for p in sorted(jobs_dir(records).glob("*.json"))}
    infos = {p: i for p, i in files.items() if i is not None}  # None: removed since the folder was listed
    slurm = slurm_states([i["job_id"] for i in infos.values() if i["executor"] == "slurm"])
    here = socket.gethostname()
    out: dict[str, JobState] = {}
    for path, info in infos.items():
        job_id, executor = info["job_id"], info["executor"]
        if executor == "local":
            if info.get("host") != here:  # its process cannot be seen from here
                state, said = ("ended", "ENDED") if _has_result(info) else ("unknown", f"a job of {info.get('host')}")
            else:
                state, said = ("running", "RUNNING") if _local_alive(job_id) else ("ended", "ENDED")
        else:  # the scheduler's word first: a requeued job may find a result of an earlier attempt
            said = slurm.get(job_id, "UNKNOWN")
            state = ("running" if said in RUNNING else "queued" if said in WAITING else
                     "unknown" if said == "UNKNOWN" else "ended")
            if state == "unknown" and _has_result(info):
                state, said = "ended", "ENDED"
            elif state == "unknown":
                said = "state unknown: sacct does not list it"
        out[info["cell"]] = JobState(info["cell"], executor, job_id, state, said, path)
    return out
