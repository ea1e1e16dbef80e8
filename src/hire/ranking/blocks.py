"""One (scorer, loss) block of the rank probe's grid: every feature set's cell, scored on dev and test
(:func:`run_block`), and the best cell by dev MAP (:func:`best_cell`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hire.data.ranking import RankingExample
from hire.metrics import ranking_metrics
from hire.probing.classifiers import feature_sets
from hire.ranking.data import Candidates
from hire.ranking.features import SplitData, feature_groups, gather, standardise_splits
from hire.ranking.scorers import cosine_group
from hire.ranking.settings import FitSettings
from hire.ranking.train import fit_group


def _metrics(examples: list[RankingExample], scores: np.ndarray) -> dict[str, float]:
    return {k: float(v) for k, v in ranking_metrics(examples, scores.tolist()).items()}


def _dev_map(examples: list[RankingExample], scores: Sequence[float]) -> float:
    return float(ranking_metrics(examples, scores)["map"])


def all_tied(candidates: Candidates, scores: np.ndarray) -> bool:
    """Whether every question's candidates got one and the same score: the ranking is then the tie rule's alone
    (candidates in passage-id order), and its MAP says nothing of the scorer."""
    return all(bool(np.all(scores[rows] == scores[rows][0])) for rows in candidates.rows if len(rows))


def run_block(scorer: str, loss: str, candidates: dict[str, Candidates],
              features: dict[str, tuple[np.ndarray, np.ndarray]], settings: FitSettings,
              ) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Every feature set's cell of one (scorer, loss) block, in :func:`feature_sets` order, and the scores of the
    block's best cell (by dev MAP) on each evaluation split."""
    num_hidden_states = next(iter(features.values()))[0].shape[1]
    evaluated = [s for s in ("dev", "test") if s in candidates]
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    cell_scores: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for group in feature_groups(num_hidden_states):
        needed = evaluated if scorer == "cosine" else ["train", *evaluated]
        data = {s: SplitData(candidates[s], gather(features[s][0], group, settings.device),
                             gather(features[s][1], group, settings.device)) for s in needed}
        evals = {s: data[s] for s in evaluated}
        fit = None
        if scorer == "cosine":
            scores = cosine_group(evals)
        else:
            standardise_splits(data["train"], *evals.values())
            fit = fit_group(scorer, loss, group, data["train"], evals, _dev_map, settings)
            scores = fit.scores
        for i, fs in enumerate(group.sets):
            cell: dict[str, Any] = {"row": fs.row, "layers": list(fs.layers), "pooling": fs.pooling,
                                    "dim": int(data["dev"].q.shape[-1])}
            cell |= {s: _metrics(candidates[s].examples, scores[s][i]) for s in evaluated}
            tied = [s for s in evaluated if all_tied(candidates[s], scores[s][i])]
            if tied:  # the scorer told no candidate apart: the order is the tie rule's, the score not the scorer's
                cell["all_tied"] = tied
            if fit is not None:
                cell |= {"best_epoch": fit.best_epoch[i], "epochs": fit.epochs}
            cells[fs.row, fs.pooling] = cell
            cell_scores[fs.row, fs.pooling] = {s: scores[s][i] for s in evaluated}
        del data, evals
    rows = [cells[fs.row, fs.pooling] for fs in feature_sets(num_hidden_states)]
    best = best_cell(rows)
    return rows, cell_scores[best["row"], best["pooling"]]


def best_cell(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The cell with the highest dev MAP (the first of equals, in table order)."""
    return max(rows, key=lambda r: r["dev"]["map"])
