"""The batched probe fitter (``hire.probing.fit``) against scikit-learn, the reference it replaces."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from hire.checks import ConfigError
from hire.lab.pooling import POOLINGS
from hire.probing.classifiers import (
    FeatureSet,
    ProbeSettings,
    cv_folds,
    feature_sets,
    reference_probe_feature_set,
)
from hire.probing.fit import chunks, probe_feature_sets
from hire.probing.solvers import mlp
from hire.probing.solvers.logistic import fit_logistic
from hire.probing.solvers.objective import Preconditioner
from hire.probing.solvers.ridge import fit_ridge
from hire.probing.solvers.standardise import row_sets, standardise

SETS = feature_sets(3)  # 3 hidden states and 2 concatenations, 4 poolings each: widths 16, 32, 48 (x 4 for pairs)
TOLERANCE = 0.3  # points (x 100) of a score


@pytest.fixture(autouse=True)
def _one_thread(single_thread: None) -> Iterator[None]:
    with threadpool_limits(1):
        yield


def _features(n: int, classes: int, seed: int, d: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Features (n, 3, 4, d) (float16-rounded, as cached) whose states and poolings carry more or less of the
    class; layer 0's CLS is constant (as a real encoder's is), and the dimensions are correlated."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    centers, base = rng.normal(size=(classes, d)), rng.normal(size=(n, d))
    a = np.empty((n, 3, 4, d), dtype=np.float32)
    for layer in range(3):
        for p in range(4):
            mix = rng.normal(size=(d, d)) / np.sqrt(d)
            a[:, layer, p] = base @ mix * (1 + layer) + (0.3 * layer + 0.2 * p) * centers[y] + rng.normal(size=(n, d))
    a[:, 0, POOLINGS.index("cls")] = 1.0
    return a.astype(np.float16).astype(np.float32), y


def _compare(features: dict, labels: dict, metrics: tuple[str, ...], regression: bool, settings: ProbeSettings,
             folds: list | None = None) -> float:
    """Every cell's score within TOLERANCE of scikit-learn's, both at ``settings.tol``; returns the share of equal
    choices of C / alpha."""
    ours = probe_feature_sets(features, labels, SETS, metrics, regression, settings, folds)
    same = []
    for fs, mine in zip(SETS, ours, strict=True):
        ref = reference_probe_feature_set(features, labels, fs, metrics, regression, settings, folds)
        assert (mine["row"], mine["pooling"], mine["dim"]) == (ref["row"], ref["pooling"], ref["dim"])
        assert set(mine["splits"]) == set(ref["splits"]) and len(mine["chosen"]) == len(ref["chosen"])
        for split, values in ref["splits"].items():
            assert set(mine["splits"][split]) == set(values)
            gap = 100 * abs(mine["splits"][split]["score"] - values["score"])
            assert gap <= TOLERANCE, (fs, split, mine["splits"][split], values)
        same += [a == b for a, b in zip(mine["chosen"], ref["chosen"], strict=True)]
    return float(np.mean(same))


@pytest.mark.parametrize("classes", [2, 5])
def test_cross_validation_matches_scikit_learn(classes: int) -> None:
    a, y = _features(600, classes, seed=classes)
    settings = ProbeSettings(folds=3)
    assert _compare({"all": (a, None)}, {"all": y}, ("accuracy",), False, settings,
                    cv_folds(y, 3, False, 0)) >= 0.8


def test_split_protocols_match_scikit_learn_on_pairs() -> None:
    """Both fitters run to their optimum (``ProbeSettings.tol`` 1e-7, passed to both): on a training split this
    small, the default tolerance (1e-4, compared in the cross-validation test) stops either a few borderline
    predictions from the optimum, at different points."""
    a, y = _features(3100, 5, seed=7)
    b, _ = _features(3100, 5, seed=8)
    # evaluation splits of 800: one example is 0.125 points (both solvers stop at max |gradient| <= 1e-4, at
    # points a few borderline predictions apart; fewer with more training examples)
    parts = {"train": slice(0, 1500), "dev": slice(1500, 2300), "test": slice(2300, 3100)}
    features = {s: (a[r], b[r]) for s, r in parts.items()}
    labels = {s: y[r] for s, r in parts.items()}
    settings = ProbeSettings(tol=1e-7)
    assert _compare(features, labels, ("accuracy",), False, settings) >= 0.8  # C chosen on dev
    binary = {s: (labels[s] > 1).astype(np.int64) for s in ("train", "dev")}  # C chosen on a tenth of train
    assert _compare({s: features[s] for s in binary}, binary, ("accuracy", "f1"), False, settings) >= 0.8


def test_the_solver_stops_at_the_tolerance_it_is_given() -> None:
    """``tol`` is the largest gradient entry a converged fit may leave: a tighter one takes more iterations and
    lands closer to scikit-learn's optimum (coefficients at tol 1e-10)."""
    from sklearn.linear_model import LogisticRegression

    a, y = _features(400, 2, seed=5)
    xs = torch.from_numpy(a[:, 1, POOLINGS.index("mean")])
    mean, scale = standardise(xs)
    xs = (xs - mean) / scale
    rs = row_sets(xs, [np.arange(400)])
    ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=10000).fit(xs.double().numpy(), y)
    errors = []
    for tol in (1e-2, 1e-6):
        fits = fit_logistic(xs, torch.from_numpy(y), torch.arange(2), rs, [0], [1.0], 1000, tol=tol)
        assert bool(fits.converged.all())
        ours = fits.logits(xs)[0].double().numpy()
        errors.append(np.abs((ours[1] - ours[0]) - ref.decision_function(xs.double().numpy())).max())
    assert errors[1] < errors[0] / 10, errors


def test_a_tolerance_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="--tol 0"):
        ProbeSettings(tol=0)


def test_ridge_matches_ridge_cv_with_more_features_than_examples() -> None:
    a, _ = _features(400, 2, seed=3)
    b, _ = _features(400, 2, seed=4)
    target = a[:, 2, POOLINGS.index("mean"), :3].sum(1) + np.random.default_rng(0).normal(size=400)
    parts = {"train": slice(0, 150), "dev": slice(150, 400)}  # pairs of "all (0-2)": 192 features > 150 examples
    features = {s: (a[r], b[r]) for s, r in parts.items()}
    assert _compare(features, {s: target[r] for s, r in parts.items()}, ("pearson", "spearman"), True,
                    ProbeSettings()) == 1.0
    assert _compare({"all": (a, None)}, {"all": target}, ("pearson",), True, ProbeSettings(folds=3),
                    cv_folds(target, 3, True, 0)) == 1.0


@pytest.mark.parametrize(("classes", "precondition"), [(2, True), (4, True), (2, False)])
def test_logistic_solution_is_scikit_learns_optimum(classes: int, precondition: bool) -> None:
    """The objective itself: scikit-learn's coefficients at a tight tolerance (StandardScaler fitted on each
    fit's own rows, then LogisticRegression), mapped to raw features, are the batched solver's, for every C and
    row set solved together (binary: one vector; more classes: multinomial)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    a, y = _features(300, classes, seed=11)
    x = torch.from_numpy(a[:, 2, POOLINGS.index("mean")] * 3 + 5)  # off-centre and scaled, as raw features are
    mean, scale = standardise(x)
    xs = (x - mean) / scale
    rows = [np.arange(0, 300), np.arange(40, 260)]
    rs = row_sets(xs, rows)
    cs, rowset = [0.01, 1.0, 0.01, 1.0], [0, 0, 1, 1]
    fits = fit_logistic(xs, torch.from_numpy(y), torch.arange(classes), rs, rowset, cs, 1000,
                        preconditioner=Preconditioner(xs) if precondition else None)
    assert bool(fits.converged.all())
    for j, (c, r) in enumerate(zip(cs, rowset, strict=True)):
        scaler = StandardScaler().fit(a[rows[r], 2, POOLINGS.index("mean")] * 3 + 5)
        ref = LogisticRegression(C=c, tol=1e-10, max_iter=10000).fit(
            scaler.transform(a[rows[r], 2, POOLINGS.index("mean")] * 3 + 5), y[rows[r]])
        # the same function of the raw features: logits on the standardised features (ours are on xs)
        grid = a[:50, 2, POOLINGS.index("mean")] * 3 + 5
        ref_logits = ref.decision_function(scaler.transform(grid))
        ours = fits.logits((torch.from_numpy(grid) - mean) / scale)[j].double().numpy()  # (K, 50)
        if classes == 2:
            ours_margin = ours[1] - ours[0]
            np.testing.assert_allclose(ours_margin, ref_logits, atol=5e-3 * max(1.0, np.abs(ref_logits).max()))
        else:  # logits are defined up to a common shift
            ours_c = ours - ours.mean(0)
            ref_c = (ref_logits - ref_logits.mean(1, keepdims=True)).T
            np.testing.assert_allclose(ours_c, ref_c, atol=5e-3 * max(1.0, np.abs(ref_c).max()))


def test_a_class_missing_from_a_fit_is_never_predicted() -> None:
    """A row set without some class fits only the classes it has (as scikit-learn does), beside row sets that
    have them all; a row set of one class predicts it everywhere."""
    a, y = _features(200, 3, seed=2)
    xs = torch.from_numpy(a[:, 1, 0])
    rows = [np.arange(200), np.flatnonzero(y != 2), np.flatnonzero(y == 1)]
    fits = fit_logistic(xs, torch.from_numpy(y), torch.arange(3), row_sets(xs, rows), [0, 1, 2], [1.0] * 3, 1000)
    pred = fits.predict(xs, torch.arange(3)).numpy()
    assert set(pred[0]) == {0, 1, 2} and set(pred[1]) <= {0, 1} and set(pred[2]) == {1}
    assert bool(fits.converged.all())


def test_batched_sets_are_independent_problems() -> None:
    """A feature set fitted alone scores and chooses as it does among the others (no shared line search)."""
    a, y = _features(400, 3, seed=5)
    folds = cv_folds(y, 3, False, 0)
    settings = ProbeSettings(folds=3)
    together = probe_feature_sets({"all": (a, None)}, {"all": y}, SETS, ("accuracy",), False, settings, folds)
    for i in (1, 6, 13):
        alone = probe_feature_sets({"all": (a, None)}, {"all": y}, [SETS[i]], ("accuracy",), False, settings, folds)
        assert alone[0]["chosen"] == together[i]["chosen"]
        assert abs(alone[0]["splits"]["cv"]["score"] - together[i]["splits"]["cv"]["score"]) <= 1 / 400


def test_sets_are_batched_by_width_within_the_memory_budget() -> None:
    a, _ = _features(10, 2, seed=0)
    features = {"train": (a, a), "dev": (a[:5], a[:5])}  # 15 examples, pairs: widths 64, 128, 192
    groups = chunks(features, SETS, budget=15 * 64 * 4)
    assert sorted(i for g in groups for i in g) == list(range(len(SETS)))
    for group in groups:
        widths = {64 * len(SETS[i].layers) for i in group}
        assert len(widths) == 1 and (len(group) == 1 or 15 * widths.pop() * len(group) <= 15 * 64 * 4)
    assert [len(g) for g in groups][:3] == [4, 4, 4]  # width 64: 12 single states, 4 per batch


def test_mlp_probe_learns_what_the_features_hold() -> None:
    rng = np.random.default_rng(0)
    y = np.arange(300) % 3
    a = rng.normal(size=(300, 2, 4, 8)).astype(np.float32)
    a[:, 1, POOLINGS.index("mean"), 0] += 4.0 * (y - 1)  # layer 1's mean separates the classes (ordered)
    sets = [FeatureSet("1", (1,), "mean"), FeatureSet("0", (0,), "mean")]
    settings = ProbeSettings(folds=3, probe="mlp", mlp_lr=0.01, mlp_max_epochs=300)
    cv = probe_feature_sets({"all": (a, None)}, {"all": y}, sets, ("accuracy",), False, settings,
                            cv_folds(y, 3, False, 0))
    assert cv[0]["splits"]["cv"]["accuracy"] >= 0.95 and cv[1]["splits"]["cv"]["accuracy"] < 0.6
    assert all(1 <= ch["epochs"] <= 300 for ch in cv[0]["chosen"]) and len(cv[0]["chosen"]) == 3
    split = probe_feature_sets({"train": (a[:200], None), "dev": (a[200:], None)}, {"train": y[:200], "dev": y[200:]},
                               sets, ("accuracy",), False, settings)
    assert split[0]["splits"]["dev"]["accuracy"] >= 0.95


def test_the_order_of_the_c_grid_never_changes_the_choice() -> None:
    """Classes so far apart that every C scores the same on the selection split: the smaller C wins the tie,
    whatever order --c_grid gives the strengths in (cross-validation, the dev protocol and a held-out tenth of
    train alike), in the batched fitter and in the scikit-learn reference it is checked against."""
    rng = np.random.default_rng(3)
    y = np.arange(240) % 2
    a = rng.normal(size=(240, 2, 4, 4)).astype(np.float32)
    a[:, 1, POOLINGS.index("mean"), 0] += 20.0 * (2 * y - 1)
    sets = [FeatureSet("1", (1,), "mean")]
    features = {"train": (a[:160], None), "dev": (a[160:200], None), "test": (a[200:], None)}
    labels = {"train": y[:160], "dev": y[160:200], "test": y[200:]}
    folds = cv_folds(y, 3, False, 0)
    no_test = {s: features[s] for s in ("train", "dev")}
    no_test_labels = {s: labels[s] for s in ("train", "dev")}
    runs, references = {}, {}
    for grid in ((0.01, 1.0, 10.0), (1.0, 0.01, 10.0), (10.0, 1.0, 0.01)):
        settings = ProbeSettings(folds=3, c_grid=grid)
        split = probe_feature_sets(features, labels, sets, ("accuracy",), False, settings)[0]
        cv = probe_feature_sets({"all": (a, None)}, {"all": y}, sets, ("accuracy",), False, settings, folds)[0]
        assert split["splits"]["dev"]["accuracy"] == 1.0 and cv["splits"]["cv"]["accuracy"] == 1.0  # a tie
        runs[grid] = (split, cv)
        references[grid] = [reference_probe_feature_set(f, ls, sets[0], ("accuracy",), False, settings, fo)
                            for f, ls, fo in ((features, labels, None), (no_test, no_test_labels, None),
                                              ({"all": (a, None)}, {"all": y}, folds))]
    for split, cv in runs.values():
        assert split == runs[(0.01, 1.0, 10.0)][0] and cv == runs[(0.01, 1.0, 10.0)][1]
        assert split["chosen"] == [{"C": 0.01}] and cv["chosen"] == [{"C": 0.01}] * 3
    for dev, tenth, cv in references.values():
        assert [dev, tenth, cv] == references[(0.01, 1.0, 10.0)]
        assert dev["splits"]["dev"]["accuracy"] == 1.0 and cv["splits"]["cv"]["accuracy"] == 1.0  # a tie
        assert dev["chosen"] == tenth["chosen"] == [{"C": 0.01}] and cv["chosen"] == [{"C": 0.01}] * 3


def test_the_mlp_trains_exactly_mlp_max_epochs_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 examples are one step a pass, so a round between two scorings is 100 passes (MLP_ROUND_STEPS): with
    150 passes allowed and a score that always improves, the last round stops at 150, not at 200."""
    shuffles = []
    randperm = torch.randperm

    def counted(*args, **kwargs):  # one shuffle per pass over the data
        shuffles.append(1)
        return randperm(*args, **kwargs)

    monkeypatch.setattr(torch, "randperm", counted)
    assert mlp.MLP_ROUND_STEPS == 100
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(2, 8, 3)).astype(np.float32))
    y = torch.arange(8) % 2
    calls = iter(range(10**6))
    for most in (150, 60, 200):
        shuffles.clear()
        settings = ProbeSettings(probe="mlp", mlp_max_epochs=most, mlp_patience=1000)
        _, epochs = mlp.fit_mlp(x, y, x, y, lambda pred, gold: float(next(calls)), False, settings)
        assert epochs == [most, most] and len(shuffles) == most


def test_bad_probe_settings_name_the_option() -> None:
    with pytest.raises(ConfigError, match="--probe svm"):
        ProbeSettings(probe="svm")
    with pytest.raises(ConfigError, match="--mlp_dropout"):
        ProbeSettings(mlp_dropout=1.0)


@pytest.mark.parametrize("width", [30, 90])  # fewer features than examples (eigendecomposition), more (kernel)
def test_ridge_alpha_and_predictions_are_ridge_cvs(width: int) -> None:
    """Both closed forms of :func:`fit_ridge` against ``RidgeCV`` on the same standardised features: the chosen
    alpha of each set, and predictions on other rows to float64 accuracy."""
    from sklearn.linear_model import RidgeCV
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(width)
    alphas = (0.1, 1.0, 10.0, 100.0, 1000.0)
    x = rng.normal(size=(3, 60 + 40, width)) @ rng.normal(size=(3, width, width)) * 0.3 + 2.0
    y = x[0, :, :4].sum(1) + rng.normal(size=100)
    probe, best = fit_ridge(torch.from_numpy(x[:, :60]).float(), torch.from_numpy(y[:60]).float(), alphas)
    ours = probe.predict(torch.from_numpy(x[:, 60:]).float())[:, 0].double().numpy()
    for i in range(3):
        scaler = StandardScaler().fit(x[i, :60].astype(np.float32).astype(np.float64))
        ref = RidgeCV(alphas=alphas).fit(scaler.transform(x[i, :60].astype(np.float32)), y[:60].astype(np.float32))
        assert alphas[int(best[i])] == ref.alpha_
        expected = ref.predict(scaler.transform(x[i, 60:].astype(np.float32)))
        assert np.abs(ours[i] - expected).max() < 1e-3 * (1 + np.abs(expected).max())
