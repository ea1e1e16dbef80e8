"""Statistics over seeds: the paper's median, spread, and paired comparisons with a baseline.

The paper reports the median of 5 seeds. With so few runs a difference of medians says little on its
own, so each head is also compared with its baseline seed by seed: the same seed gives both runs the
same data order, which pairs them. We report the paired differences, their median and mean, a
bootstrap 95% interval of the mean difference (percentile method, fixed seed: reports are
reproducible), and the Wilcoxon signed-rank p-value (exact for small n; undefined below 5 pairs, where
even 5 positive differences in 5 give only p = 2/32 = 0.0625, or when every difference is 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
MIN_WILCOXON_PAIRS = 5


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """n, median, mean, sample standard deviation (None for one value), min and max."""
    if not values:
        return {"n": 0, "median": None, "mean": None, "std": None, "min": None, "max": None}
    x = np.asarray(values, dtype=float)
    return {"n": len(x), "median": float(np.median(x)), "mean": float(x.mean()),
            "std": float(x.std(ddof=1)) if len(x) > 1 else None, "min": float(x.min()), "max": float(x.max())}


def bootstrap_mean_interval(differences: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES,
                            seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the mean (None for fewer than 2 values)."""
    d = np.asarray(differences, dtype=float)
    if len(d) < 2:
        return None
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)  # (resamples,)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def wilcoxon_p(differences: Sequence[float]) -> tuple[float | None, str]:
    """Two-sided Wilcoxon signed-rank p-value and a note (``n/a (...)`` where it is undefined)."""
    d = np.asarray(differences, dtype=float)
    if len(d) < MIN_WILCOXON_PAIRS:
        return None, f"n/a (n={len(d)} < {MIN_WILCOXON_PAIRS})"
    if np.all(d == 0):
        return None, "n/a (all differences 0)"
    p = float(stats.wilcoxon(d).pvalue)
    return (None, "n/a") if math.isnan(p) else (p, f"p={p:.3f}")


def paired(scores: Mapping[int, float], baseline: Mapping[int, float]) -> dict[str, Any]:
    """Compare per-seed ``scores`` with ``baseline`` on the seeds both have."""
    seeds = sorted(set(scores) & set(baseline))
    diffs = [scores[s] - baseline[s] for s in seeds]
    interval = bootstrap_mean_interval(diffs)
    p, note = wilcoxon_p(diffs)
    return {"n": len(seeds), "seeds": seeds, "differences": diffs,
            "median": float(np.median(diffs)) if diffs else None, "mean": float(np.mean(diffs)) if diffs else None,
            "ci95": list(interval) if interval else None, "wilcoxon_p": p, "wilcoxon": note}


def glue_average(values: Mapping[str, float | None], tasks: Sequence[str]) -> float | None:
    """The GLUE-style average over ``tasks`` (each task's score once); None if any is missing."""
    chosen = [values.get(t) for t in tasks]
    if not chosen or any(v is None for v in chosen):
        return None
    return float(np.mean(chosen))
