"""Probes on cached features, under SentEval's protocol: what is fitted, on which rows, and how it is scored.

A *feature set* is one pooling of one hidden state, or of several concatenated (first + last layer,
the last four, all of them). Its design matrix is the pooled vector ``u`` (N x D), or for sentence pairs
``[u; v; u * v; |u - v|]`` (N x 4D, in that order), the layer-wise study's pair features (§2).

Classification: ``StandardScaler`` + ``LogisticRegression`` (L-BFGS, multinomial), ``C`` chosen from a
small grid on a selection split by the task's main score. Regression: ``StandardScaler`` + ``RidgeCV``
(``alpha`` by efficient leave-one-out on the training part), scored by Pearson and Spearman.
Protocols (see :mod:`hire.probing.tasks`):

- ``cv``: stratified k-fold; in each fold ``C`` is chosen on a held-out tenth of the training folds,
  then refit on all of them; metrics on the pooled out-of-fold predictions (and the folds' spread);
- ``split`` with a labelled test split: fit ``train`` for each ``C``, choose on ``dev``, report both;
- ``split`` otherwise: choose ``C`` on a held-out tenth of ``train``, refit on ``train``, report dev.

The probes are fitted by :mod:`hire.probing.fit`, every feature set of a task at once in PyTorch.
:func:`reference_probe_feature_set` is the same protocol with scikit-learn, one feature set at a time: the
reference the tests and ``scripts/check_probe_fitter.py`` compare that fitter with, not a code path of
``hire probe``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

from hire.checks import ConfigError
from hire.data.examples import Example
from hire.lab.pooling import POOLINGS
from hire.metrics import compute_metrics, main_score

C_GRID = (0.001, 0.01, 0.1, 1.0)
ALPHA_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)


@dataclass(frozen=True)
class FeatureSet:
    """``layers`` of the hidden states (0 = embeddings), pooled by ``pooling`` and concatenated."""

    row: str  # the table's row: "3", or a concatenation's name with its layers, "first+last (1+6)"
    layers: tuple[int, ...]
    pooling: str


@dataclass
class ProbeTask:
    name: str
    splits: dict[str, list[Example]]  # "all" (cross-validation), or "train" and labelled evaluation splits
    label_names: list[str] | None  # None: regression
    metrics: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)  # split -> the file it was read from
    notes: list[str] = field(default_factory=list)  # what the reader had to say (rows skipped)

    @property
    def regression(self) -> bool:
        return self.label_names is None

    @property
    def protocol(self) -> str:
        return "cv" if "all" in self.splits else "split"

    @property
    def pair(self) -> bool:
        return any(e.text_b is not None for examples in self.splits.values() for e in examples)

    @property
    def eval_splits(self) -> list[str]:
        """The splits scores are reported on (``cv`` stands for the out-of-fold predictions)."""
        return ["cv"] if self.protocol == "cv" else [s for s in self.splits if s != "train"]

    @property
    def headline(self) -> str:
        """The split of the tables and plots: ``cv``, ``test`` where labelled, else the first dev split."""
        return "test" if "test" in self.splits else self.eval_splits[0]

    def labels(self, split: str) -> np.ndarray:
        """Class ids (position in ``label_names``) or regression targets, in file order."""
        examples = self.splits[split]
        if self.label_names is None:
            return np.array([float(e.label) for e in examples], dtype=np.float64)  # type: ignore[arg-type]
        ids = {name: i for i, name in enumerate(self.label_names)}
        return np.array([ids[str(e.label)] for e in examples], dtype=np.int64)


def concatenations(num_hidden_states: int) -> dict[str, tuple[int, ...]]:
    """The concatenated rows: first + last Transformer layer, the last four, all hidden states.

    Each exists only where it differs from a single state and from the others.
    """
    last = num_hidden_states - 1
    rows: dict[str, tuple[int, ...]] = {}
    if last >= 2:
        rows[f"first+last (1+{last})"] = (1, last)
    if last >= 5:
        rows[f"last 4 ({last - 3}-{last})"] = tuple(range(last - 3, last + 1))
    if last >= 1:
        rows[f"all (0-{last})"] = tuple(range(last + 1))
    return rows


def feature_sets(num_hidden_states: int) -> list[FeatureSet]:
    """Every hidden state and every concatenation, each under every pooling (rows, then poolings)."""
    rows = {str(i): (i,) for i in range(num_hidden_states)} | concatenations(num_hidden_states)
    return [FeatureSet(row, layers, p) for row, layers in rows.items() for p in POOLINGS]


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``[u; v; u * v; |u - v|]`` along the last axis: (N, D) x 2 -> (N, 4D)."""
    return np.concatenate([u, v, u * v, np.abs(u - v)], axis=-1)


def design_matrix(a: np.ndarray, b: np.ndarray | None, fs: FeatureSet, rows: np.ndarray | None = None,
                  ) -> np.ndarray:
    """Features ``(N, l + 1, 4, d)`` of the first (``a``) and second (``b``) sentences -> (N, D or 4D)
    float32 for ``fs``, optionally only the examples ``rows``."""
    p = POOLINGS.index(fs.pooling)

    def take(x: np.ndarray) -> np.ndarray:
        x = x if rows is None else x[rows]
        return x[:, list(fs.layers), p].reshape(len(x), -1).astype(np.float32)  # (N, |layers| d)

    u = take(a)
    return u if b is None else pair_features(u, take(b))


PROBES = ("linear", "mlp")


@dataclass(frozen=True)
class ProbeSettings:
    """How probes are fitted. ``probe``: "linear" (logistic regression, ridge for regression; ``c_grid``,
    ``alpha_grid``, ``max_iter``) or "mlp" (SentEval's MLP probe: ``mlp_*``, early stopping on the selection
    split instead of a grid)."""

    folds: int = 10
    c_grid: tuple[float, ...] = C_GRID
    alpha_grid: tuple[float, ...] = ALPHA_GRID
    seed: int = 0
    max_iter: int = 1000
    tol: float = 1e-4  # L-BFGS stops when the largest gradient entry is at most this (LogisticRegression's tol)
    probe: str = "linear"
    mlp_hidden: int = 50
    mlp_dropout: float = 0.1
    mlp_lr: float = 1e-3
    mlp_batch_size: int = 64
    mlp_max_epochs: int = 100
    mlp_patience: int = 5

    def __post_init__(self) -> None:
        if self.probe not in PROBES:
            raise ConfigError(f"--probe {self.probe}: expected one of {', '.join(PROBES)}")
        if not self.tol > 0:
            raise ConfigError(f"--tol {self.tol}: expected a positive number")
        if not 0 <= self.mlp_dropout < 1:
            raise ConfigError(f"--mlp_dropout {self.mlp_dropout}: expected a probability in [0, 1)")
        for name in ("folds", "max_iter", "mlp_hidden", "mlp_batch_size", "mlp_max_epochs", "mlp_patience"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} {getattr(self, name)}: expected a positive number")


def scores(metrics: tuple[str, ...], pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """The task's metrics of ``pred`` and their mean, ``score`` (the number C is chosen by)."""
    values = compute_metrics(metrics, pred, y)
    return {**values, "score": main_score(values)}


def hold_out(rows: np.ndarray, y: np.ndarray, regression: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``rows`` 90/10 (stratified for classes) into fitting and selection rows."""
    stratify = None if regression else y
    try:
        return train_test_split(rows, test_size=0.1, random_state=seed, stratify=stratify)
    except ValueError:  # a class too rare to stratify: a plain random split
        return train_test_split(rows, test_size=0.1, random_state=seed)


def cv_folds(y: np.ndarray, folds: int, regression: bool, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The same (train, test) folds for every feature set, so that rows compare like with like."""
    splitter = KFold if regression else StratifiedKFold
    return list(splitter(n_splits=folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


# --- the scikit-learn reference -------------------------------------------------------------------------------


class _Reference:
    """Fits one feature set's probes with scikit-learn and counts the fits that did not converge."""

    def __init__(self, metrics: tuple[str, ...], regression: bool, settings: ProbeSettings, tol: float):
        self.metrics, self.regression, self.settings, self.tol = metrics, regression, settings, tol
        self.not_converged = 0

    def fit(self, x: np.ndarray, y: np.ndarray, c: float) -> Any:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression, RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            if self.regression:
                model = make_pipeline(StandardScaler(), RidgeCV(alphas=self.settings.alpha_grid)).fit(x, y)
            else:
                model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=self.settings.max_iter,
                                                                          tol=self.tol))
                model.fit(x, y)
        self.not_converged += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        return model

    def choose(self, x: np.ndarray, y: np.ndarray, x_sel: np.ndarray, y_sel: np.ndarray) -> tuple[float, Any]:
        """The ``C`` whose fit on (x, y) scores best on the selection split, and that fit. The grid is searched in
        ascending order whatever order it was given in, as :mod:`hire.probing.fit` searches it, so that a tie
        goes to the smaller C (stronger regularisation) in both."""
        best: tuple[float, float, Any] | None = None
        for c in sorted(self.settings.c_grid):
            model = self.fit(x, y, c)
            score = scores(self.metrics, model.predict(x_sel), y_sel)["score"]
            if best is None or score > best[0]:  # strictly better: a tie keeps the smaller C, tried first
                best = (score, c, model)
        assert best is not None
        return best[1], best[2]

    def choose_and_refit(self, x: np.ndarray, y: np.ndarray) -> Any:
        """Choose ``C`` on a held-out tenth of (x, y), then refit on all of it (RidgeCV: fit once)."""
        if self.regression:
            return self.fit(x, y, 0.0)
        fit_rows, sel_rows = hold_out(np.arange(len(y)), y, self.regression, self.settings.seed)
        c, _ = self.choose(x[fit_rows], y[fit_rows], x[sel_rows], y[sel_rows])
        return self.fit(x, y, c)

    def chosen(self, model: Any) -> dict[str, Any]:
        last = model[-1]
        return {"alpha": float(last.alpha_)} if self.regression else {"C": float(last.C)}


def _reference_cv(x: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]], fitter: _Reference,
                  ) -> dict[str, Any]:
    pred = np.zeros(len(y), dtype=y.dtype)
    fold_scores, chosen = [], []
    for train, test in folds:
        model = fitter.choose_and_refit(x[train], y[train])
        pred[test] = model.predict(x[test])
        fold_scores.append(scores(fitter.metrics, pred[test], y[test])["score"])
        chosen.append(fitter.chosen(model))
    return {"splits": {"cv": scores(fitter.metrics, pred, y)}, "fold_std": float(np.std(fold_scores)),
            "chosen": chosen}


def _reference_split(xs: dict[str, np.ndarray], ys: dict[str, np.ndarray], fitter: _Reference) -> dict[str, Any]:
    if "test" in xs and not fitter.regression:  # SentEval: choose on dev, report dev and test of that model
        _, model = fitter.choose(xs["train"], ys["train"], xs["dev"], ys["dev"])
    else:  # choose on a held-out tenth of train, refit on all of it, report dev
        model = fitter.choose_and_refit(xs["train"], ys["train"])
    splits = {s: scores(fitter.metrics, model.predict(xs[s]), ys[s]) for s in xs if s != "train"}
    return {"splits": splits, "chosen": [fitter.chosen(model)]}


def reference_probe_feature_set(features: dict[str, tuple[np.ndarray, np.ndarray | None]],
                                labels: dict[str, np.ndarray], fs: FeatureSet, metrics: tuple[str, ...],
                                regression: bool, settings: ProbeSettings,
                                folds: list[tuple[np.ndarray, np.ndarray]] | None = None,
                                tol: float | None = None) -> dict[str, Any]:
    """:func:`hire.probing.fit.probe_feature_set` with scikit-learn (``StandardScaler`` + ``LogisticRegression`` or
    ``RidgeCV``), one feature set at a time: the reference that the batched fitter is checked against (linear probes
    only).
    ``tol``: ``LogisticRegression``'s, ``settings.tol`` unless given (smaller: closer to the optimum)."""
    fitter = _Reference(metrics, regression, settings, settings.tol if tol is None else tol)
    # float64 from the start: StandardScaler keeps float32 input in float32, and that rounding alone moves an
    # example that lies on the optimum's boundary across it (one of CoLA's dev sentences: 0.37 points of MCC)
    xs = {s: design_matrix(a, b, fs).astype(np.float64) for s, (a, b) in features.items()}
    if folds is not None:
        result = _reference_cv(xs["all"], labels["all"], folds, fitter)
    else:
        result = _reference_split(xs, labels, fitter)
    return {"row": fs.row, "layers": list(fs.layers), "pooling": fs.pooling, "dim": int(xs[next(iter(xs))].shape[1]),
            **result, "not_converged": fitter.not_converged}
