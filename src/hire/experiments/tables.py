"""Tables rendered from :mod:`hire.experiments.aggregate` data: Markdown (the paper's layout), CSV, JSON.

Markdown: heads as rows, tasks as columns; the median over seeds with the difference to the baseline's
median in brackets, as in the paper's Table 1 (``61.2 (+0.8)``), the best median of each column in bold;
then mean ± standard deviation; then the paired differences to the baseline with their bootstrap 95%
interval and Wilcoxon p-value. CSV: one line per row and task (and the average). All text is a function
of the data alone, so regenerating a report gives the same bytes.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from hire.reporting import markdown_table
from hire.tasktype import named_task

AVERAGE = "Avg"


# The per-run layer-weights table of a report (report.md, report.html).
WEIGHTS_TITLE = "Mean importance score per hidden state (dev)"
WEIGHTS_NOTE = ("Each run's layer weights averaged over the dev examples (h0 = the embeddings). *flat states*: how "
                "many states share the smallest mean weight (to 6 decimals); for HIRE's dynamic scores, 2 or more "
                "means that eq. 3's ReLU gave them alpha = 0 on every example: their scores died, and s is uniform "
                "over them.")


def signed(x: float | None) -> str:
    """``+0.8``, ``-0.2``; a difference that rounds to zero is ``+0.0``."""
    if x is None:
        return ""
    text = f"{x:+.1f}"
    return "+0.0" if text == "-0.0" else text


def number(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def metric_text(task: str, metric: str) -> str:
    """What a task's column holds: ``mcc``, ``accuracy/f1 mean``, or the metric a table chose."""
    if metric != "score":
        return metric
    try:
        names = named_task(task)[1]
    except ValueError:
        return "score"
    return names[0] if len(names) == 1 else f"mean of {'/'.join(names)}"


def columns(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(header, key) pairs: the tasks, then the average where there are several."""
    cols = [(t, t) for t in data["tasks"]]
    return [*cols, (AVERAGE, AVERAGE)] if len(cols) > 1 else cols


def cell_of(row: dict[str, Any], key: str) -> dict[str, Any]:
    return row["average"] if key == AVERAGE else row["tasks"][key]


def median_of(row: dict[str, Any], key: str) -> float | None:
    cell = cell_of(row, key)
    return cell["of_medians"] if key == AVERAGE else cell["median"]


def median_cell(row: dict[str, Any], key: str, best: float | None, seeds: int) -> str:
    cell, value = cell_of(row, key), median_of(row, key)
    if value is None:
        return f"– (0/{cell['cells']})" if key != AVERAGE else "–"
    text = number(value)
    if best is not None and round(value, 1) == round(best, 1):
        text = f"**{text}**"
    difference = cell.get("vs_baseline", {}).get("median_difference")
    if difference is not None:
        text += f" ({signed(difference)})"
    n = cell["n"] if key != AVERAGE else min((c["n"] for c in row["tasks"].values()), default=0)
    return text + (f" n={n}" if n != seeds else "")


def spread_cell(row: dict[str, Any], key: str) -> str:
    cell = cell_of(row, key)
    if key == AVERAGE:
        return number(cell["of_means"])
    if cell["mean"] is None:
        return "–"
    return number(cell["mean"]) + (f" ± {cell['std']:.1f}" if cell["std"] is not None else "")


def paired_cell(row: dict[str, Any], key: str) -> str:
    comparison = cell_of(row, key).get("vs_baseline")
    if not comparison or not comparison["n"]:
        return "–"
    ci = comparison["ci95"]
    interval = f" [{signed(ci[0])}, {signed(ci[1])}]" if ci else ""
    return (f"{signed(comparison['mean'])}{interval}, {comparison['wilcoxon']}; median "
            f"{signed(comparison['median'])} (n={comparison['n']})")


def best_medians(data: dict[str, Any]) -> dict[str, float | None]:
    """Per column, the best median (bold in the table); none where the table has one row."""
    rows = data["rows"]
    return {k: max((v for r in rows if (v := median_of(r, k)) is not None), default=None) if len(rows) > 1 else None
            for _, k in columns(data)}


def typical_seeds(data: dict[str, Any]) -> int:
    """The number of seeds most cells were declared with (the ``n=`` note)."""
    counts = [c["cells"] for r in data["rows"] for c in r["tasks"].values()]
    return max(set(counts), key=counts.count) if counts else 0


def precision_text(precisions: dict[str, list[str]]) -> str:
    """``Precision: bf16.``, or, where they differ, which tasks trained in which precision, and which tasks mix
    precisions among their own cells (seeds or rows trained on different machines)."""
    kinds = {" and ".join(p) for p in precisions.values() if p}
    if not kinds:
        return ""
    mixed = [t for t, p in precisions.items() if len(p) > 1]
    within = f"the cells of {', '.join(mixed)} differ in precision (by seed or row)" if mixed else ""
    if len(kinds) == 1:
        return f"Precision: {kinds.pop()}" + (f": {within}." if within else ".")
    groups = {kind: [t for t, p in precisions.items() if " and ".join(p) == kind] for kind in sorted(kinds)}
    return ("Precision: " + "; ".join(f"{kind} ({', '.join(tasks)})" for kind, tasks in groups.items())
            + ": the table mixes precisions across tasks" + (f", and {within}." if within else "."))


def markdown(data: dict[str, Any]) -> str:
    """The table in Markdown: medians, mean ± std, paired differences."""
    cols, seeds = columns(data), typical_seeds(data)
    header = ["Model", *(h for h, _ in cols)]
    rows, best = data["rows"], best_medians(data)
    baselines = sorted({r["baseline"] for r in rows if r["baseline"]})
    if len(baselines) == 1:
        brackets = f"; in brackets the difference to the median of the baseline ({baselines[0]})"
    elif baselines:  # one baseline per head (e.g. each head on the original encoder): the paired table names it
        brackets = (f"; in brackets the difference to the median of the row's own baseline, named in the paired "
                    f"differences below ({'; '.join(baselines)})")
    else:
        brackets = ""
    out = [f"## {data['title']}", "",
           f"Dev scores x100, median of n={seeds} seeds{brackets}; the best median of each column in bold.", ""]
    out += markdown_table(header, [[_escape(r["label"]), *(median_cell(r, k, best[k], seeds) for _, k in cols)]
                                   for r in rows], align="lr")
    scores = "; ".join(f"{t}: {metric_text(t, m)}" for t, m in data["metrics"].items())
    out += ["", f"Scores: {scores}." + (f" {AVERAGE}: mean over the tasks (GLUE-style)." if len(cols) > 1 else "")
            + f" n={seeds} seeds per cell; a cell with fewer says so (n=k)."
            + "".join(f" {text}" for text in (precision_text(data.get("precisions", {})), data["note"]) if text)]
    out += ["", "### Mean ± standard deviation over seeds", ""]
    out += markdown_table(header, [[_escape(r["label"]), *(spread_cell(r, k) for _, k in cols)] for r in rows],
                          align="lr")
    compared = [r for r in rows if r["baseline"]]
    if compared:
        out += ["", "### Paired differences to the baseline", "",
                "Same seed = same data order: per-seed differences, their mean with a bootstrap 95% interval "
                "(10,000 resamples), the Wilcoxon signed-rank p-value (n/a below 5 pairs) and their median.", ""]
        out += markdown_table(["Model", *(h for h, _ in cols)],
                              [[_escape(f"{r['label']} − {r['baseline']}"), *(paired_cell(r, k) for _, k in cols)]
                               for r in compared], align="lr")
    return "\n".join(out) + "\n"


CSV_FIELDS = ("table", "row", "baseline", "task", "metric", "cells", "n", "median", "mean", "std", "min", "max",
              "median_difference", "paired_n", "paired_median", "paired_mean", "ci95_low", "ci95_high",
              "wilcoxon_p", "scores")


def _f(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def csv_text(data: dict[str, Any]) -> str:
    """One line per row and task (and the row's average over the tasks)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for row in data["rows"]:
        for header, key in columns(data):
            cell = cell_of(row, key)
            c = cell.get("vs_baseline") or {}
            ci = c.get("ci95") or [None, None]
            writer.writerow([data["table"], row["label"], row["baseline"] or "", header,
                             data["metrics"].get(key, "score"), cell["cells"], cell["n"], _f(median_of(row, key)),
                             _f(cell["mean"]), _f(cell["std"]), _f(cell["min"]), _f(cell["max"]),
                             _f(c.get("median_difference")), c.get("n", ""), _f(c.get("median")), _f(c.get("mean")),
                             _f(ci[0]), _f(ci[1]), _f(c.get("wilcoxon_p")),
                             ";".join(f"{s}:{v:.4f}" for s, v in cell["scores"].items())])
    return buffer.getvalue()
