"""Tables as data: per row and task, the seeds' scores, their statistics and the paired comparison.

Scores are percentages (x100). A task's score is its ``score`` in metrics.json (the mean of its
metrics, the GLUE rule), or the metric a table names for it, averaged over its dev splits. The
``average`` of a row is GLUE-style: the mean over the table's tasks of the per-task medians (and of
means); it is compared with the baseline through each seed's average over the tasks.
"""

from __future__ import annotations

from typing import Any

from hire.experiments.experiment import Experiment
from hire.experiments.layout import Row, Table
from hire.experiments.records import Records
from hire.experiments.stats import glue_average, paired, summarize


def task_score(record: dict[str, Any], metric: str = "score") -> float:
    """The record's score in percent: ``score``, or one metric averaged over the dev splits."""
    if metric == "score":
        return 100 * float(record["score"])
    values = [float(m[metric]) for m in record["dev"].values() if metric in m]
    if not values:
        raise ValueError(f"record {record.get('cell')}: no metric {metric!r} in its dev results")
    return 100 * sum(values) / len(values)


def row_scores(exp: Experiment, table: Table, row: Row, records: Records) -> dict[str, dict[int, float]]:
    """task -> seed -> score, for the row's cells that have records."""
    out: dict[str, dict[int, float]] = {}
    for task in table.tasks:
        ids = table.cells.get((row.key, task), ())
        out[task] = {exp.cell(cid).seed: task_score(records.by_cell[cid], table.metrics.get(task, "score"))
                     for cid in ids if cid in records.by_cell}
    return out


def seed_averages(scores: dict[str, dict[int, float]], tasks: tuple[str, ...]) -> dict[int, float]:
    """Each seed's average over the tasks, for seeds that have every task."""
    seeds = set.intersection(*(set(scores[t]) for t in tasks)) if tasks else set()
    return {s: sum(scores[t][s] for t in tasks) / len(tasks) for s in sorted(seeds)}


def _cell(scores: dict[int, float], expected: int, partner: dict[int, float] | None,
          partner_median: float | None) -> dict[str, Any]:
    ordered = dict(sorted(scores.items()))
    result: dict[str, Any] = {"cells": expected, **summarize(list(ordered.values())),
                              "scores": {str(s): v for s, v in ordered.items()}}
    if partner is not None:
        comparison = paired(ordered, partner)
        median = result["median"]
        comparison["median_difference"] = (median - partner_median if median is not None
                                           and partner_median is not None else None)
        result["vs_baseline"] = comparison
    return result


PRECISION_NAMES = {"no": "fp32"}


def task_precisions(table: Table, records: Records) -> dict[str, list[str]]:
    """task -> the precisions its recorded cells trained in (``fp32``, ``bf16``, ...), over every row."""
    return {task: sorted({PRECISION_NAMES.get(p, p) for (_, t), ids in table.cells.items() if t == task
                          for cid in ids if cid in records.by_cell
                          and (p := str(records.by_cell[cid].get("mixed_precision"))) != "None"})
            for task in table.tasks}


def aggregate_table(exp: Experiment, table: Table, records: Records) -> dict[str, Any]:
    """Everything a table shows, as JSON-ready data."""
    scores = {row.key: row_scores(exp, table, row, records) for row in table.rows}
    labels = {row.key: row.label for row in table.rows}
    medians = {key: {t: summarize(list(s[t].values()))["median"] for t in table.tasks} for key, s in scores.items()}
    rows = []
    for row in table.rows:
        mine, other = scores[row.key], scores.get(row.partner) if row.partner else None
        tasks = {t: _cell(mine[t], len(table.cells.get((row.key, t), ())), other[t] if other else None,
                          medians[row.partner][t] if row.partner else None) for t in table.tasks}
        of_medians = glue_average(medians[row.key], table.tasks)
        base_of_medians = glue_average(medians[row.partner], table.tasks) if row.partner else None
        average = _cell(seed_averages(mine, table.tasks), len(table.tasks),
                        seed_averages(other, table.tasks) if other else None, None)
        average["of_medians"] = of_medians
        average["of_means"] = glue_average({t: c["mean"] for t, c in tasks.items()}, table.tasks)
        if row.partner:
            average["vs_baseline"]["median_difference"] = (of_medians - base_of_medians if of_medians is not None
                                                           and base_of_medians is not None else None)
        rows.append({"label": row.label, "options": row.context,
                     "baseline": labels[row.partner] if row.partner else None, "tasks": tasks, "average": average})
    return {"table": table.name, "title": table.title, "tasks": list(table.tasks),
            "metrics": {t: table.metrics.get(t, "score") for t in table.tasks}, "baseline": table.baseline,
            "note": table.note, "precisions": task_precisions(table, records), "rows": rows}


def rounded(value: Any, digits: int = 6) -> Any:
    """Floats rounded everywhere in a JSON-ready structure (stable text across platforms)."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits) for v in value]
    return value
