"""Every feature set of a task probed at once, in PyTorch, on the CPU or a GPU.

The feature sets of a task (hidden state x pooling, and the concatenations) share their examples, labels
and folds, so the probes of all of them are one batched problem: the design matrices of the sets of one
width are stacked into ``x`` (S, N, D) and every fit below is a batch of S independent fits (S x C with the
``C`` grid). The protocol and every number's meaning are those of :mod:`hire.probing.classifiers`; this module
runs the protocol and batches the sets, and the solvers are in :mod:`hire.probing.solvers`:

- **logistic regression** on standardised features (``StandardScaler``'s: training mean and population
  standard deviation, constant features left at scale 1), minimising scikit-learn's objective
  ``C * sum_i loss_i + 0.5 * ||W||^2`` (intercept unpenalised), scaled by ``1 / (C n)`` as scikit-learn's
  L-BFGS solver does, with the same stopping rule (largest gradient entry at most ``1e-4``) and iteration
  limit. Two classes: one weight vector and the logistic loss; more: the multinomial (softmax) loss with a
  vector per class. All ``C`` of the grid are solved together (they read ``x`` once per iteration)
  (:mod:`~hire.probing.solvers.logistic`);
- **ridge regression** (:mod:`~hire.probing.solvers.ridge`): the closed form from one eigendecomposition per
  feature set, ``alpha`` chosen by exact leave-one-out error over the grid as ``RidgeCV`` does (first of the grid
  on ties);
- **MLP** (``ProbeSettings.probe = "mlp"``, :mod:`~hire.probing.solvers.mlp`): SentEval's probe, Linear -> Dropout
  -> Sigmoid -> Linear, Adam, minibatches, early stopping on the selection split (its epoch replaces the choice of
  ``C``).

Sets are grouped by width (no zero padding) and a group is cut into chunks of at most
:data:`CHUNK_ELEMENTS` feature values, so memory stays bounded on any task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hire.probing.classifiers import FeatureSet, ProbeSettings, design_matrix, hold_out, scores
from hire.probing.solvers.logistic import LogisticFits, fit_logistic
from hire.probing.solvers.mlp import fit_mlp
from hire.probing.solvers.objective import preconditioner
from hire.probing.solvers.ridge import fit_ridge
from hire.probing.solvers.standardise import RowSets, row_sets, standardise

CHUNK_ELEMENTS = 2**28  # feature values per batch of feature sets (1 GiB in float32)


# --- logistic regression: the protocol of one feature set, every fit a column of one batched problem --------------


class _LogisticSet:
    """One feature set's logistic-regression probes under a task's protocol: every fit of the protocol (each
    fold x each C, then the refits) is a column of one batched problem over the set's design matrix. The C grid
    is taken in ascending order whatever order it was given in, so that a tie goes to the smaller C; a refit
    starts from its chosen C's solution on the selection rows."""

    def __init__(self, xs: dict[str, np.ndarray], ys: dict[str, np.ndarray], fit_split: str,
                 metrics: tuple[str, ...], settings: ProbeSettings, device: torch.device):
        self.metrics, self.settings, self.device = metrics, settings, device
        self.c_grid = tuple(sorted(settings.c_grid))
        raw = {s: torch.from_numpy(x).to(device) for s, x in xs.items()}
        mean, scale = standardise(raw[fit_split])
        self.xs = {s: (x - mean).div_(scale) for s, x in raw.items()}
        self.x = self.xs[fit_split]
        self.classes = np.unique(ys[fit_split])
        self.ys = ys
        self.y = torch.as_tensor(np.searchsorted(self.classes, ys[fit_split]), device=device)
        self.classes_t = torch.as_tensor(self.classes, device=device)
        self.not_converged = 0
        self.preconditioner = preconditioner(self.x, settings.seed)

    def fit(self, rs: RowSets, rowset: Sequence[int], c: Sequence[float], init: LogisticFits | None = None,
            ) -> LogisticFits:
        fits = fit_logistic(self.x, self.y, self.classes_t, rs, rowset, c, self.settings.max_iter, init,
                            self.preconditioner, self.settings.tol)
        self.not_converged += int((~fits.converged).sum())
        return fits

    def grid(self, rs: RowSets, rowsets: Sequence[int]) -> list[LogisticFits]:
        """For each C of the grid, the fits of every row set in ``rowsets``: every (C, row set) one problem of a
        single batch, each from zero as scikit-learn fits each C, so that each pass over ``x`` serves all of them
        rather than one C after another, each from the previous one's solution (the timing:
        docs/benchmarks/cpu-2core-probe-grid-2.md)."""
        rows = list(rowsets)
        fits = self.fit(rs, rows * len(self.c_grid), [c for c in self.c_grid for _ in rows])
        part = [slice(i * len(rows), (i + 1) * len(rows)) for i in range(len(self.c_grid))]
        return [LogisticFits(fits.weight[s], fits.bias[s], fits.converged[s], fits.iterations[s]) for s in part]

    def choose(self, fits: list[LogisticFits], j: int, x_sel: Tensor, y_sel: np.ndarray) -> int:
        """The index (into the ascending :attr:`c_grid`) of the C whose fit number ``j`` scores best on (x_sel,
        y_sel); ties: the smaller C."""
        values = [scores(self.metrics, f.predict(x_sel, self.classes_t)[j].cpu().numpy(), y_sel)["score"]
                  for f in fits]
        return int(np.argmax(values))

    @staticmethod
    def take(fits: list[LogisticFits], picks: Sequence[int]) -> LogisticFits:
        """Fit number j of ``fits[picks[j]]``, for each j."""
        j = torch.arange(len(picks))
        stack = [torch.stack([getattr(f, name) for f in fits]) for name in ("weight", "bias", "converged",
                                                                           "iterations")]
        picked = [t[torch.as_tensor(list(picks)), j] for t in stack]
        return LogisticFits(*picked)

    def cv(self, folds: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
        y = self.ys["all"]
        parts = [hold_out(train, y[train], False, self.settings.seed) for train, _ in folds]
        rs = row_sets(self.x, [fit for fit, _ in parts] + [train for train, _ in folds])
        nf = len(folds)
        grid = self.grid(rs, range(nf))
        picks = [self.choose(grid, f, self.x[torch.as_tensor(sel, device=self.device)], y[sel])
                 for f, (_, sel) in enumerate(parts)]
        c = [self.c_grid[i] for i in picks]
        final = self.fit(rs, range(nf, 2 * nf), c, self.take(grid, picks))
        pred = np.zeros(len(y), dtype=y.dtype)
        fold_scores = []
        for f, (_, test) in enumerate(folds):
            p = final.predict(self.x[torch.as_tensor(test, device=self.device)], self.classes_t)[f].cpu().numpy()
            pred[test] = p
            fold_scores.append(scores(self.metrics, p, y[test])["score"])
        return {"splits": {"cv": scores(self.metrics, pred, y)}, "fold_std": float(np.std(fold_scores)),
                "chosen": [{"C": float(v)} for v in c]}

    def split(self) -> dict[str, Any]:
        y = self.ys["train"]
        if "test" in self.xs:  # SentEval: choose on dev, report dev and test of that model
            rs = row_sets(self.x, [np.arange(len(y))])
            grid = self.grid(rs, [0])
            pick = self.choose(grid, 0, self.xs["dev"], self.ys["dev"])
            final = grid[pick]
        else:  # choose on a held-out tenth of train, refit on all of it, report dev
            fit, sel = hold_out(np.arange(len(y)), y, False, self.settings.seed)
            rs = row_sets(self.x, [fit, np.arange(len(y))])
            grid = self.grid(rs, [0])
            pick = self.choose(grid, 0, self.x[torch.as_tensor(sel, device=self.device)], y[sel])
            final = self.fit(rs, [1], [self.c_grid[pick]], grid[pick])
        splits = {s: scores(self.metrics, final.predict(x, self.classes_t)[0].cpu().numpy(), self.ys[s])
                  for s, x in self.xs.items() if s != "train"}
        return {"splits": splits, "chosen": [{"C": float(self.c_grid[pick])}]}


# --- the protocol, batched --------------------------------------------------------------------------------------


class _Batch:
    """The ridge or MLP probes of one chunk of feature sets (their design matrices stacked), under one task's
    protocol."""

    def __init__(self, metrics: tuple[str, ...], regression: bool, settings: ProbeSettings, device: torch.device):
        self.metrics, self.regression, self.settings, self.device = metrics, regression, settings, device

    def score(self, pred: np.ndarray, y: np.ndarray) -> float:
        return scores(self.metrics, pred, y)["score"]

    def choose(self, x: Tensor, y: np.ndarray, x_sel: Tensor, y_sel: np.ndarray,
               ) -> tuple[Any, list[dict[str, Any]]]:
        """Each set's MLP, early-stopped on the selection split (x_sel, y_sel), trained on (x, y)."""
        probe, epochs = fit_mlp(x, torch.as_tensor(y, device=self.device), x_sel,
                                torch.as_tensor(y_sel, device=self.device), self.score, self.regression, self.settings)
        return probe, [{"epochs": e} for e in epochs]

    def choose_and_refit(self, x: Tensor, y: np.ndarray) -> tuple[Any, list[dict[str, Any]]]:
        """Ridge: one fit, alpha by leave-one-out. MLP: trained on nine tenths of (x, y), early-stopped on the
        held-out tenth (it keeps that model: its epoch is tied to the data seen)."""
        if self.settings.probe == "linear":
            probe, best = fit_ridge(x, torch.as_tensor(y, device=self.device), self.settings.alpha_grid)
            return probe, [{"alpha": float(self.settings.alpha_grid[b])} for b in best.cpu().numpy()]
        fit_rows, sel_rows = hold_out(np.arange(len(y)), y, self.regression, self.settings.seed)
        fit_t, sel_t = (torch.as_tensor(r, device=self.device) for r in (fit_rows, sel_rows))
        return self.choose(x[:, fit_t], y[fit_rows], x[:, sel_t], y[sel_rows])

    def cv(self, x: Tensor, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
        s = x.shape[0]
        pred = np.zeros((s, len(y)), dtype=y.dtype)
        fold_scores: list[list[float]] = [[] for _ in range(s)]
        chosen: list[list[dict[str, Any]]] = [[] for _ in range(s)]
        for train, test in folds:
            probe, picks = self.choose_and_refit(x[:, torch.as_tensor(train, device=self.device)], y[train])
            p = probe.predict(x[:, torch.as_tensor(test, device=self.device)])[:, 0].cpu().numpy()
            pred[:, test] = p
            for i in range(s):
                fold_scores[i].append(self.score(p[i], y[test]))
                chosen[i].append(picks[i])
        return [{"splits": {"cv": _scores_of(self.metrics, pred[i], y)}, "fold_std": float(np.std(fold_scores[i])),
                 "chosen": chosen[i]} for i in range(s)]

    def split(self, xs: dict[str, Tensor], ys: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        if "test" in xs and not self.regression and self.settings.probe == "mlp":  # choose on dev (SentEval)
            probe, chosen = self.choose(xs["train"], ys["train"], xs["dev"], ys["dev"])
        else:  # choose on a held-out tenth of train, refit on all of it, report dev
            probe, chosen = self.choose_and_refit(xs["train"], ys["train"])
        preds = {name: probe.predict(xs[name])[:, 0].cpu().numpy() for name in xs if name != "train"}
        return [{"splits": {name: _scores_of(self.metrics, p[i], ys[name]) for name, p in preds.items()},
                 "chosen": [chosen[i]]} for i in range(len(chosen))]


def _scores_of(metrics: tuple[str, ...], pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    return scores(metrics, pred, y)


def _width(features: dict[str, tuple[np.ndarray, np.ndarray | None]], fs: FeatureSet) -> int:
    a, b = next(iter(features.values()))
    return len(fs.layers) * a.shape[3] * (1 if b is None else 4)


def chunks(features: dict[str, tuple[np.ndarray, np.ndarray | None]], sets: Sequence[FeatureSet],
           budget: int = CHUNK_ELEMENTS) -> list[list[int]]:
    """Indices of ``sets`` batched together: the same width, at most ``budget`` feature values per batch (at
    least one set)."""
    examples = sum(len(a) for a, _ in features.values())
    groups: dict[int, list[int]] = {}
    for i, fs in enumerate(sets):
        groups.setdefault(_width(features, fs), []).append(i)
    out = []
    for width, members in groups.items():
        per = max(1, budget // (examples * width))
        out += [members[j : j + per] for j in range(0, len(members), per)]
    return out


def probe_feature_sets(features: dict[str, tuple[np.ndarray, np.ndarray | None]], labels: dict[str, np.ndarray],
                       sets: Sequence[FeatureSet], metrics: tuple[str, ...], regression: bool,
                       settings: ProbeSettings, folds: list[tuple[np.ndarray, np.ndarray]] | None = None,
                       device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                       progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Scores of every feature set in ``sets``, in their order, each as
    :func:`probe_feature_set` gives it. ``features`` maps each split to its ``(a, b)``
    arrays; ``folds`` is given for cross-validation (split ``all``); ``progress(k)`` is called as each batch of
    k sets is done. Logistic regressions are fitted one feature set at a time (all of its fits at once); ridge
    and MLP probes of a chunk of sets of one width at once (``dtype``: theirs)."""
    dev = torch.device(device)
    results: list[dict[str, Any] | None] = [None] * len(sets)

    def record(fs: FeatureSet, dim: int, result: dict[str, Any], missed: int) -> dict[str, Any]:
        return {"row": fs.row, "layers": list(fs.layers), "pooling": fs.pooling, "dim": dim, **result,
                "not_converged": missed}

    if not regression and settings.probe == "linear":
        fit_split = "all" if folds is not None else "train"
        for i, fs in enumerate(sets):
            xs = {split: design_matrix(a, b, fs) for split, (a, b) in features.items()}
            probe = _LogisticSet(xs, labels, fit_split, metrics, settings, dev)
            result = probe.cv(folds) if folds is not None else probe.split()
            results[i] = record(fs, int(xs[fit_split].shape[1]), result, probe.not_converged)
            del xs, probe
            if progress is not None:
                progress(1)
        return [r for r in results if r is not None]
    for chunk in chunks(features, sets):
        xs = {split: torch.from_numpy(np.stack([design_matrix(a, b, sets[i]) for i in chunk])).to(dev, dtype)
              for split, (a, b) in features.items()}  # (S, N, D) per split
        batch = _Batch(metrics, regression, settings, dev)
        rows = batch.cv(xs["all"], labels["all"], folds) if folds is not None else batch.split(xs, labels)
        for j, i in enumerate(chunk):
            results[i] = record(sets[i], int(xs[next(iter(xs))].shape[2]), rows[j], 0)
        del xs
        if progress is not None:
            progress(len(chunk))
    return [r for r in results if r is not None]


def probe_feature_set(features: dict[str, tuple[np.ndarray, np.ndarray | None]], labels: dict[str, np.ndarray],
                      fs: FeatureSet, metrics: tuple[str, ...], regression: bool, settings: ProbeSettings,
                      folds: list[tuple[np.ndarray, np.ndarray]] | None = None, device: str = "cpu",
                      ) -> dict[str, Any]:
    """Scores of one feature set (:func:`probe_feature_sets` fits many at once). ``features``
    maps each split to its ``(a, b)`` arrays; ``folds`` is given for cross-validation (split ``all``)."""
    return probe_feature_sets(features, labels, [fs], metrics, regression, settings, folds, device)[0]
