"""Tables from run folders: results are read from the files runs wrote, never from memory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from hire.data.examples import DataError
from hire.data.glue import GLUE_TASKS
from hire.model.sharing import markdown_table  # the one table writer; see there why it lives in sharing
from hire.saved_model import read_run_metrics


def collect_runs(run_dirs: list[Path]) -> list[dict[str, Any]]:
    """One row per run: its ``metrics.json`` (:func:`read_run_metrics`) and the run folder."""
    rows = []
    for run in run_dirs:
        path = run / "metrics.json"
        if not path.is_file():
            raise DataError(f"{run}: no metrics.json (the run has not finished)")
        rows.append({"run": str(run), **read_run_metrics(path)})
    return rows


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


def csv_table(rows: list[list[str]]) -> str:
    """Rows of text cells (the header first) as CSV text, one line each ending in a newline."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


# Metrics that count things (a tagger's scored words, a split's examples ...): shown as whole numbers, never x100.
COUNTS = frozenset({"words", "examples", "sentences", "questions", "candidates", "entities", "support", "tokens"})
SETTINGS = ("score", "steps", "train time", "mixed precision")  # the columns after the metrics


def metric_cell(name: str, value: Any) -> str:
    """A dev metric as the table shows it: a count (:data:`COUNTS`, or a whole number written as one) as an
    integer, a rate x100 with two decimals."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if name in COUNTS or isinstance(value, int):
        return str(round(value))
    return f"{100 * value:.2f}"


def runs_table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table: one row per run, its dev metrics (rates x100, counts as they are), the score, the steps,
    the training time and the mixed-precision setting. Every column has its own header: a metric named as one of
    the settings' columns (a tagger's ``precision``) is headed ``dev NAME``."""
    metric_names: list[str] = []
    for row in rows:
        for split, metrics in row["dev"].items():
            for name in metrics:
                key = f"{split}/{name}" if len(row["dev"]) > 1 else name
                if key not in metric_names and name != "score":
                    metric_names.append(key)
    headers = [f"dev {key}" if key in ("run", "task", "head", *SETTINGS) else key for key in metric_names]
    header = ["run", "task", "head", *headers, *SETTINGS]
    lines = []
    for row in rows:
        values = []
        for key in metric_names:
            split, _, name = key.rpartition("/")
            metrics = row["dev"][split] if split else next(iter(row["dev"].values()))
            values.append(metric_cell(name, metrics[name]) if name in metrics else "")
        lines.append([Path(row["run"]).name, row["task"], row["head"], *values, f"{100 * row['score']:.2f}",
                      str(row["steps"]), f"{row['train_seconds'] / 60:.1f} min", row["mixed_precision"]])
    return "\n".join(markdown_table(header, lines) + glue_scores(rows))


def is_runs_table(line: str) -> bool:
    """Whether ``line`` (a file's first) is the header of a table :func:`runs_table` made (``hire report
    --markdown`` writes a file again only where it wrote it)."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return cells[:3] == ["run", "task", "head"] and cells[-2:] in (["train time", "precision"],
                                                                   ["train time", "mixed precision"])


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
