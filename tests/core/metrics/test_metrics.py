"""Tests for hire.metrics: values equal scikit-learn / SciPy and hand-computed numbers."""

from __future__ import annotations

import math
import warnings

import pytest
from scipy import stats
from sklearn import metrics as skm

from hire.data import GLUE_TASKS
from hire.metrics import compute_metrics, glue_score, main_score, task_metrics

PRED = [1, 0, 1, 1, 0, 1, 0, 0]
REF = [1, 0, 0, 1, 0, 1, 1, 0]
PRED3 = [0, 1, 2, 2, 1, 0, 2]
REF3 = [0, 1, 1, 2, 1, 2, 2]
SCORES_PRED = [0.1, 2.5, 3.0, 4.9, 1.2, 3.3]
SCORES_REF = [0.0, 2.0, 3.8, 5.0, 1.0, 2.9]


def test_hand_computed_values() -> None:
    result = compute_metrics(["accuracy", "f1"], [1, 1, 0, 0], [1, 0, 0, 0])
    # 3 of 4 right; precision 1/2, recall 1/1 -> F1 = 2 * 0.5 * 1 / 1.5 = 2/3.
    assert result == {"accuracy": 0.75, "f1": pytest.approx(2 / 3)}
    assert all(type(value) is float for value in result.values())


def test_classification_matches_sklearn() -> None:
    result = compute_metrics(["accuracy", "f1", "mcc"], PRED, REF)
    assert result["accuracy"] == pytest.approx(skm.accuracy_score(REF, PRED))
    assert result["f1"] == pytest.approx(skm.f1_score(REF, PRED))
    assert result["mcc"] == pytest.approx(skm.matthews_corrcoef(REF, PRED))
    assert result["mcc"] == pytest.approx(0.5)  # TP=3 TN=3 FP=1 FN=1: (9 - 1) / 16


def test_multiclass_f1_is_macro() -> None:
    expected = skm.f1_score(REF3, PRED3, average="macro")
    assert compute_metrics(["f1_macro"], PRED3, REF3) == {"f1_macro": pytest.approx(expected)}
    # "f1" on more than two classes falls back to macro F1 under its own name.
    assert compute_metrics(["accuracy", "f1"], PRED3, REF3) == {
        "accuracy": pytest.approx(5 / 7),
        "f1_macro": pytest.approx(expected),
    }


def test_correlations_match_scipy() -> None:
    result = compute_metrics(["pearson", "spearman"], SCORES_PRED, SCORES_REF)
    assert result["pearson"] == pytest.approx(stats.pearsonr(SCORES_PRED, SCORES_REF)[0])
    assert result["spearman"] == pytest.approx(stats.spearmanr(SCORES_PRED, SCORES_REF)[0])
    assert compute_metrics(["spearman"], [1.0, 2.0, 3.0], [10.0, 20.0, 40.0]) == {"spearman": 1.0}


def test_constant_predictions_give_zero_not_nan() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the undefined cases must not leak warnings either
        result = compute_metrics(["mcc", "f1"], [0, 0, 0, 0], [1, 0, 1, 0])
        assert result == {"mcc": 0.0, "f1": 0.0}
        result = compute_metrics(["pearson", "spearman"], [2.0, 2.0, 2.0], [1.0, 3.0, 4.5])
        assert result == {"pearson": 0.0, "spearman": 0.0}
    assert not any(math.isnan(value) for value in result.values())


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        compute_metrics(["bleu"], [1], [1])
    with pytest.raises(ValueError, match="equal length"):
        compute_metrics(["accuracy"], [1, 0], [1])
    with pytest.raises(ValueError, match="zero examples"):
        compute_metrics(["accuracy"], [], [])


def test_main_and_glue_scores() -> None:
    mrpc = {"accuracy": 0.8, "f1": 0.9}
    stsb = {"pearson": 0.7, "spearman": 0.5, "loss": 12.0}  # non-metric entries do not count
    assert main_score(mrpc) == pytest.approx(0.85)
    assert main_score(stsb) == pytest.approx(0.6)
    assert main_score({"mcc": 0.4}) == pytest.approx(0.4)
    assert glue_score({"MRPC": main_score(mrpc), "STS-B": main_score(stsb)}) == pytest.approx(0.725)
    with pytest.raises(ValueError):
        main_score({"loss": 1.0})
    with pytest.raises(ValueError):
        glue_score({})


def test_task_metrics() -> None:
    assert task_metrics(GLUE_TASKS["CoLA"], False, 2) == ("mcc",)
    assert task_metrics(GLUE_TASKS["STS-B"], True, 1) == ("pearson", "spearman")
    assert task_metrics(GLUE_TASKS["MRPC"], False, 2) == ("accuracy", "f1")
    assert task_metrics(None, True, 1) == ("pearson", "spearman")
    assert task_metrics(None, False, 2) == ("accuracy", "f1")
    assert task_metrics(None, False, 5) == ("accuracy", "f1_macro")
