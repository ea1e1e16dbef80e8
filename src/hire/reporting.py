"""Tables from run folders: results are read from the files runs wrote, never from memory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from hire.data.examples import DataError
from hire.data.glue import GLUE_TASKS
from hire.sharing import markdown_table  # the one table writer; see there why it lives in sharing


def collect_runs(run_dirs: list[Path]) -> list[dict[str, Any]]:
    """One row per run: its ``metrics.json`` (:func:`read_run_metrics`) and the run folder."""
    rows = []
    for run in run_dirs:
        path = run / "metrics.json"
        if not path.is_file():
            raise DataError(f"{run}: no metrics.json (the run has not finished)")
        rows.append({"run": str(run), **read_run_metrics(path)})
    return rows


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# What a finished run's metrics.json holds, as far as the tables read it: key -> (is the value right, in words).
_FINAL: dict[str, tuple[Any, str]] = {
    "task": (lambda v: isinstance(v, str), "a string"),
    "head": (lambda v: isinstance(v, str), "a string"),
    "dev": (lambda v: isinstance(v, dict) and v and all(
        isinstance(m, dict) and m and all(_number(x) for x in m.values()) for m in v.values()),
        "a JSON object of dev splits, each of metric -> number"),
    "score": (_number, "a number"),
    "steps": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "train_seconds": (_number, "a number"),
    "mixed_precision": (lambda v: isinstance(v, str), "a string"),
}


def read_json(path: Path) -> tuple[Any, str | None]:
    """The JSON value in ``path`` and None, or None and what is wrong with the file (``not UTF-8 text``, ``not
    valid JSON, cut short or damaged (line 3, column 1: ...)``): for the readers of results files, which add
    the file's name and what writes it afresh."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8")), None
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except json.JSONDecodeError as err:
        return None, f"not valid JSON, cut short or damaged (line {err.lineno}, column {err.colno}: {err.msg})"


def read_run_metrics(path: Path) -> dict[str, Any]:
    """A finished run's ``metrics.json`` (the best model's final scores, as ``hire train`` writes it), checked:
    a :class:`DataError` naming the file and what is wrong (not JSON, cut short, not an object, a key missing
    or of the wrong type), never a traceback where the table reads it."""
    try:
        final = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text, not the metrics.json that hire train writes") from None
    except json.JSONDecodeError as err:
        ends = err.pos >= len(err.doc.rstrip()) or err.msg.startswith("Unterminated string")
        cut = " (cut short?)" if ends else ""
        raise DataError(f"{path}: not valid JSON{cut}: {err.msg} at line {err.lineno}, column {err.colno}") from None
    if not isinstance(final, dict):
        kind = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}.get(type(final), "a number")
        raise DataError(f"{path}: {kind}, not the JSON object of final scores that hire train writes")
    missing = [key for key in _FINAL if key not in final]
    if missing:
        raise DataError(f"{path}: not the metrics.json that hire train writes (no {', '.join(missing)})")
    for key, (ok, what) in _FINAL.items():
        if not ok(final[key]):
            raise DataError(f"{path}: {key} must be {what}, not {json.dumps(final[key])[:80]}")
    return final


def csv_table(rows: list[list[str]]) -> str:
    """Rows of text cells (the header first) as CSV text, one line each ending in a newline."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def runs_table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table: one row per run, its dev metrics (x100), the score and the training time."""
    metric_names: list[str] = []
    for row in rows:
        for split, metrics in row["dev"].items():
            for name in metrics:
                key = f"{split}/{name}" if len(row["dev"]) > 1 else name
                if key not in metric_names and name != "score":
                    metric_names.append(key)
    header = ["run", "task", "head", *metric_names, "score", "steps", "train time", "precision"]
    lines = []
    for row in rows:
        values = []
        for key in metric_names:
            split, _, name = key.rpartition("/")
            metrics = row["dev"][split] if split else next(iter(row["dev"].values()))
            values.append(f"{100 * metrics[name]:.2f}" if name in metrics else "")
        lines.append([Path(row["run"]).name, row["task"], row["head"], *values, f"{100 * row['score']:.2f}",
                      str(row["steps"]), f"{row['train_seconds'] / 60:.1f} min", row["mixed_precision"]])
    return "\n".join(markdown_table(header, lines) + glue_scores(rows))


def glue_scores(rows: list[dict[str, Any]]) -> list[str]:
    """Per head, the GLUE score (mean of task scores) over the GLUE tasks its runs cover (two at least)."""
    from hire.metrics import glue_score  # scipy and scikit-learn: only where a table is made

    by_head: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["task"] in GLUE_TASKS and row["task"] != "AX":  # MNLI's score is already the m/mm mean
            by_head.setdefault(row["head"], {})[row["task"]] = row["score"]
    lines = [f"GLUE score of {head} over {len(tasks)} tasks ({', '.join(tasks)}): {100 * glue_score(tasks):.2f}"
             for head, tasks in by_head.items() if len(tasks) > 1]
    return ["", *lines] if lines else []
