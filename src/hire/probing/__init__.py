"""Layer-wise probing (SPEC §6): what every hidden state of a frozen encoder knows.

``hire probe`` encodes a task once (:mod:`hire.lab.features`, cached), pools every hidden state
four ways (:mod:`hire.lab.pooling`), fits a linear probe on each (hidden state x pooling) and on
concatenations of layers (:mod:`~hire.probing.classifiers`, SentEval's protocol), and writes tables and
figures (:mod:`~hire.probing.tables`) drawn from ``results.json`` (:mod:`~hire.probing.grid`).
Tasks: GLUE, SentEval-style folders and users' files (:mod:`~hire.probing.tasks`); encoders: anything
``hire train`` reads or writes (:mod:`hire.lab.sources`).
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use, so that `hire --help` (which registers the probe commands) stays fast.
_EXPORTS = {
    "FeatureSet": "classifiers", "ProbeSettings": "classifiers", "design_matrix": "classifiers",
    "feature_sets": "classifiers", "pair_features": "classifiers",
    "CustomFiles": "tasks", "ProbeTask": "classifiers", "load_probe_task": "tasks",
    "ProbeOptions": "grid", "run_probe": "grid", "load_results": "grid",
    "write_probe_report": "tables",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hire.probing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hire.probing.{_EXPORTS[name]}"), name)
