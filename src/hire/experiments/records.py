"""Records: one small JSON file per finished cell, from which every table and figure is drawn.

``experiments/<name>/records/<cell-id>.json`` holds the run's resolved configuration, its final dev
metrics, steps, training time, precision, the machine, the per-evaluation dev curve and the mean layer
weights of each dev split. Per-example layer weights are kept only where Figure 2 needs them, in
``<cell-id>.layer_weights.json.gz``. Records are committed: ``hire experiment report`` needs nothing
else, so anyone can regenerate the tables and figures. Files are written deterministically (sorted keys,
gzip without a timestamp), only when their content changes, and atomically (:func:`write_atomic_bytes`: many
jobs of a cluster may write records into one shared folder at once). Every command reads a record through
:func:`read_record`: a file that is not one (cut short, a JSON list, ``{}``) is one error naming it, never a
record of some other configuration. Only a run folder (:func:`hire.runs.is_run_folder`) is read as a cell's run.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tqdm.auto import tqdm

from hire.experiments.experiment import Experiment
from hire.experiments.spec import RUNNER_OWNED, Cell, ExperimentError, cell_differences, record_differences
from hire.runs import is_run_folder

RUNNER_FILE = "experiment.json"  # written by the runner into a run folder: wall time over attempts
JOBS_FOLDER = ".jobs"  # records/.jobs/<cell-id>.json: the cell's scheduler job (hire.experiments.cluster)
RECORD_KEYS = {"cell": str, "config": dict, "score": (int, float)}  # what every record holds (make_record)
REPAIR = ("`hire experiment collect EXPERIMENT.yaml` rewrites a cell's record from its run folder; where there is "
          "none, delete the file (the cell is then trained again) or restore it from git")


def read_record(path: Path) -> dict[str, Any]:
    """The record in ``path``; :class:`ExperimentError` naming the file, what is wrong and what repairs it when
    the file is not a record (not JSON, cut short, a list, an object without a cell, configuration or score)."""
    from hire.reporting import read_json

    path = Path(path)
    record, problem = read_json(path)
    if problem is None:
        if not isinstance(record, dict):
            problem = f"a JSON {type(record).__name__}, not a record (an object)"
        else:
            missing = [key for key in RECORD_KEYS if key not in record]
            wrong = [key for key, tp in RECORD_KEYS.items() if key in record and (
                not isinstance(record[key], tp) or isinstance(record[key], bool))]
            if not missing and not wrong:
                return record
            problem = (f"not a record: it has no {', '.join(missing)}" if missing else
                       f"not a record: its {wrong[0]} is {record[wrong[0]]!r}")
    raise ExperimentError(f"{path}: {problem}; {REPAIR}")


def run_config(run: Path) -> Any:
    """A run folder's ``config.yaml`` as saved (None where it does not read as YAML: it then differs from every
    cell, :func:`hire.experiments.spec.cell_differences`)."""
    try:
        return yaml.safe_load((run / "config.yaml").read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def finished_run(run: Path) -> bool:
    """Whether ``run`` is a run folder (it carries the marker) that holds a finished run's ``metrics.json``."""
    return is_run_folder(run) and (run / "metrics.json").is_file()


def run_dir(runs_dir: Path, exp: Experiment, cell: Cell) -> Path:
    return Path(runs_dir) / exp.name / cell.id


def records_dir(exp_dir: Path) -> Path:
    return Path(exp_dir) / "records"


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write ``data`` unless the file already holds it (unchanged files keep their time stamps), atomically
    (:func:`write_atomic_bytes`)."""
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic_bytes(path, data)
    return True


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that every reader sees the old file or the new one, never a mix, however
    many processes on however many machines write it at once: each writer writes its own temporary file beside
    ``path`` (named after its host, process and a random part, created exclusively) and renames it over ``path``
    in one step. A rename within a folder is atomic on local and network file systems alike, and needs no lock
    (a lock taken on one node of a cluster is not seen on another by many shared file systems). The last
    rename wins; writers of one cell's record write the same content. The temporary file is removed on failure
    and never matches ``*.json``."""
    tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with tmp.open("xb") as f:  # exclusive: never someone else's temporary file
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no file name and mtime 0: the same content always gives the same bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
        gz.write(data)
    return buffer.getvalue()


def machine_info() -> dict[str, Any]:
    """This machine, for runs whose metrics.json has no ``machine`` (marked ``source: collected``)."""
    from hire.hardware import machine

    return {**machine(), "source": "collected"}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def dev_curve(run: Path) -> list[dict[str, Any]]:
    """Every evaluation of the run: step, epoch, training loss, selection score and dev metrics."""
    return [{"step": e["step"], "epoch": e.get("epoch"), "train_loss": e.get("train_loss"),
             "score": e.get("selection_score"), "dev": e.get("dev", {})} for e in _jsonl(run / "metrics.jsonl")]


def layer_weights(run: Path, splits: list[str]) -> dict[str, dict[str, Any]]:
    """Per dev split, the layer weights averaged over its examples (heads that weight layers)."""
    out = {}
    for split in splits:
        rows = [r["layer_weights"] for r in _jsonl(run / "predictions" / f"{split}.jsonl") if r.get("layer_weights")]
        if rows:
            width = len(rows[0])
            mean = [round(sum(r[i] for r in rows) / len(rows), 6) for i in range(width)]
            out[split] = {"n": len(rows), "mean": mean}
    return out


def example_weights(run: Path, split: str, n: int) -> dict[str, Any] | None:
    """The first ``n`` dev examples' layer weights (Figure 2, right), or None without weights."""
    rows = [r for r in _jsonl(run / "predictions" / f"{split}.jsonl")[:n] if r.get("layer_weights")]
    if not rows:
        return None
    return {"split": split, "guids": [r["guid"] for r in rows], "labels": [r.get("label") for r in rows],
            "weights": [r["layer_weights"] for r in rows]}


def make_record(exp: Experiment, cell: Cell, run: Path) -> dict[str, Any]:
    from hire.saved_model import read_run_metrics

    final = read_run_metrics(run / "metrics.json")  # checked: one line naming a damaged file
    config = run_config(run) or {}  # collect() only gets here for a config.yaml that matches the cell
    for key in RUNNER_OWNED:
        config.pop(key, None)
    runner = json.loads((run / RUNNER_FILE).read_text()) if (run / RUNNER_FILE).is_file() else {}
    splits = list(final.get("dev", {}))
    return {"experiment": exp.name, "cell": cell.id, "options": {k: cell.options[k] for k in exp.identity},
            "config": config, "task": final.get("task", cell.task), "head": final.get("head", cell.head),
            "encoder": final.get("encoder"), "dev": final.get("dev", {}), "score": final["score"],
            "best_step": final.get("best_step"), "steps": final.get("steps"),
            "train_seconds": final.get("train_seconds"), "wall_seconds": runner.get("wall_seconds"),
            "mixed_precision": final.get("mixed_precision"), "machine": final.get("machine") or machine_info(),
            "curve": dev_curve(run), "layer_weights": layer_weights(run, splits),
            # labelled test splits scored once with the best model (CoNLL-2003's); never chose anything
            **({"held_out": final["held_out"]} if final.get("held_out") else {})}


def wants_examples(exp: Experiment, cell: Cell) -> bool:
    f = exp.figure2
    return f is not None and cell.id in f.cells.get(f.examples_task, ())


def collect_cell(exp: Experiment, cell: Cell, run: Path, exp_dir: Path) -> bool:
    """(Re)write the cell's record (and Figure 2's per-example weights); True if a file changed."""
    record = make_record(exp, cell, run)
    folder = records_dir(exp_dir)
    changed = write_if_changed(folder / f"{cell.id}.json", json_bytes(record))
    if wants_examples(exp, cell) and record["dev"]:
        assert exp.figure2 is not None
        examples = example_weights(run, next(iter(record["dev"])), exp.figure2.examples)
        if examples is not None:
            data = gzip_bytes(json.dumps({"cell": cell.id, **examples}, sort_keys=True).encode())
            changed |= write_if_changed(folder / f"{cell.id}.layer_weights.json.gz", data)
    return changed


def collect(exp: Experiment, runs_dir: Path, exp_dir: Path) -> dict[str, list[str]]:
    """Records of every finished cell whose run folder matches its configuration."""
    result: dict[str, list[str]] = {"written": [], "unchanged": [], "changed_config": [], "unfinished": []}
    for cell in tqdm(exp.cells, desc="collect records", leave=False, disable=len(exp.cells) < 20):
        run = run_dir(runs_dir, exp, cell)
        if not finished_run(run):
            result["unfinished"].append(cell.id)
        elif cell_differences(run_config(run), cell.options):
            result["changed_config"].append(cell.id)
        else:
            result["written" if collect_cell(exp, cell, run, exp_dir) else "unchanged"].append(cell.id)
    return result


def read_examples(exp_dir: Path, cell_id: str) -> dict[str, Any] | None:
    path = records_dir(exp_dir) / f"{cell_id}.layer_weights.json.gz"
    return read_examples_file(path) if path.is_file() else None


def read_examples_file(path: Path) -> dict[str, Any]:
    """Figure 2's per-example weights of a cell (``<cell-id>.layer_weights.json.gz``); :class:`ExperimentError`
    naming the file (and what repairs it) for one that is damaged."""
    try:
        examples = json.loads(gzip.decompress(path.read_bytes()))
    except (EOFError, gzip.BadGzipFile, UnicodeDecodeError, ValueError) as err:
        raise ExperimentError(f"{path}: damaged ({err}); {REPAIR}") from None
    if not isinstance(examples, dict) or not isinstance(examples.get("weights"), list):
        raise ExperimentError(f"{path}: not a cell's per-example layer weights (no weights); {REPAIR}")
    return examples


@dataclass
class Records:
    """The records of an experiment's cells, and those left out (with why)."""

    by_cell: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_in_grid: list[str] = field(default_factory=list)  # records of cells the file no longer declares
    stale: dict[str, list[str]] = field(default_factory=dict)  # cell -> options that differ from the file


def load_records(exp: Experiment, exp_dir: Path) -> Records:
    """Every record of ``exp``; one whose configuration no longer matches the file is left out."""
    records, ids = Records(), {c.id for c in exp.cells}
    for path in sorted(records_dir(exp_dir).glob("*.json")):
        record = read_record(path)
        cid = record["cell"]
        if cid not in ids:
            records.not_in_grid.append(cid)
            continue
        differ = record_differences(record, exp.cell(cid).options)
        if differ:
            records.stale[cid] = differ
        else:
            records.by_cell[cid] = record
    return records
