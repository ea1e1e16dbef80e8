"""What the records say about the runs themselves: progress, machines, precisions and training time."""

from __future__ import annotations

from typing import Any

from hire.experiments.aggregate import PRECISION_NAMES
from hire.experiments.experiment import Experiment
from hire.experiments.records import Records


def machine_name(machine: dict[str, Any] | None) -> str:
    """``NVIDIA H100 80GB HBM3`` or ``AMD EPYC (2 CPUs)``, with the torch version."""
    if not machine:
        return "unknown"
    device = machine.get("cuda_device") or machine.get("gpu") or machine.get("device")
    where = str(device) if device else f"{machine.get('cpu') or machine.get('processor') or 'CPU'} " \
                                     f"({machine.get('cpu_count', '?')} CPUs)"
    return where + (f", torch {machine['torch']}" if machine.get("torch") else "")


def _time(records: list[dict[str, Any]]) -> dict[str, Any]:
    train = [r["train_seconds"] for r in records if r.get("train_seconds") is not None]
    wall = [r["wall_seconds"] for r in records if r.get("wall_seconds") is not None]
    return {"cells": len(records), "train_seconds": round(sum(train), 1),
            "mean_train_seconds": round(sum(train) / len(train), 1) if train else None,
            "wall_seconds": round(sum(wall), 1) if wall else None}


def _precision(record: dict[str, Any]) -> str:
    """``fp32``, ``bf16``, ``fp16`` (``None`` where the record does not say)."""
    value = str(record.get("mixed_precision"))
    return PRECISION_NAMES.get(value, value)


def _adopted(records: list[dict[str, Any]]) -> dict[str, int]:
    """Source experiment -> how many of the records were taken from it (``hire experiment adopt``)."""
    sources = [str(r["adopted_from"].get("experiment")) for r in records if r.get("adopted_from")]
    return {name: sources.count(name) for name in sorted(set(sources))}


def adopted_text(summary: dict[str, Any]) -> str:
    """`` (3 of them trained once, for another experiment: table1-minilm 3)``, or nothing."""
    adopted = summary.get("adopted") or {}
    if not adopted:
        return ""
    return (f" ({sum(adopted.values())} of them trained once, for another experiment: "
            + ", ".join(f"{name} {n}" for name, n in adopted.items()) + ")")


def runs_summary(exp: Experiment, records: Records) -> dict[str, Any]:
    """Progress; per machine and per precision the cells and time; per task and head the time."""
    done = [records.by_cell[c.id] for c in exp.cells if c.id in records.by_cell]
    machines: dict[str, list[dict[str, Any]]] = {}
    precisions: dict[str, list[dict[str, Any]]] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in done:
        machines.setdefault(machine_name(r.get("machine")), []).append(r)
        precisions.setdefault(_precision(r), []).append(r)
        groups.setdefault(f"{r['task']} / {r['head']}", []).append(r)
    return {"experiment": exp.name, "cells": len(exp.cells), "with_records": len(done),
            "records_not_in_grid": sorted(records.not_in_grid),
            "records_with_changed_config": {k: v for k, v in sorted(records.stale.items())},
            "adopted": _adopted(done),
            "total": _time(done),
            "machines": {k: {**_time(v), "precisions": sorted({_precision(r) for r in v})}
                         for k, v in sorted(machines.items())},
            "precisions": {k: _time(v) for k, v in sorted(precisions.items())},
            "task_head": {k: _time(v) for k, v in sorted(groups.items())}}
