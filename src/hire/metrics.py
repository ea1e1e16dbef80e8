"""Evaluation metrics (scikit-learn / SciPy implementations) and GLUE score aggregation.

All scores are returned as fractions (accuracy 0.75, not 75.0); multiply by 100 for a leaderboard.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats
from sklearn import metrics as skm

from hire.data.glue import TaskSpec
from hire.data.ranking import RankingExample
from hire.data.trec import rank_candidates

__all__ = ["METRIC_NAMES", "compute_metrics", "glue_score", "main_score", "task_metrics"]


def _finite(value: float) -> float:
    """A python float, with nan (undefined correlation, e.g. of a constant) reported as 0.0."""
    value = float(value)
    return 0.0 if math.isnan(value) else value


def _mcc(pred: np.ndarray, ref: np.ndarray) -> float:
    # scikit-learn already returns 0.0 when a prediction is constant; keep a guard against nan anyway.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _finite(skm.matthews_corrcoef(ref, pred))


def _correlation(correlate: Callable[..., Any]) -> Callable[[np.ndarray, np.ndarray], float]:
    """A metric from SciPy's ``pearsonr`` or ``spearmanr``: 0.0 where the correlation is undefined."""

    def metric(pred: np.ndarray, ref: np.ndarray) -> float:
        if pred.size < 2:  # a correlation of one point is undefined
            return 0.0
        with warnings.catch_warnings():
            # A constant input makes the correlation undefined: SciPy warns and returns nan; we report 0.0.
            warnings.simplefilter("ignore")
            return _finite(correlate(pred.astype(float), ref.astype(float))[0])

    return metric


_METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": lambda pred, ref: float(skm.accuracy_score(ref, pred)),
    # zero_division=0: no positive predicted and none true gives 0.0, without a warning.
    "f1": lambda pred, ref: float(skm.f1_score(ref, pred, average="binary", pos_label=1, zero_division=0.0)),
    "f1_macro": lambda pred, ref: float(skm.f1_score(ref, pred, average="macro", zero_division=0.0)),
    "mcc": _mcc,
    "pearson": _correlation(stats.pearsonr),
    "spearman": _correlation(stats.spearmanr),
}
METRIC_NAMES: tuple[str, ...] = tuple(_METRICS)


def compute_metrics(
    metric_names: Sequence[str], predictions: Sequence, references: Sequence
) -> dict[str, float]:
    """Compute the named metrics of ``predictions`` against ``references``.

    Names: "accuracy", "f1" (binary, positive label 1), "f1_macro", "mcc", "pearson", "spearman".
    Predictions and references are class ids (ints) or, for pearson/spearman, floats. When "f1" is
    asked for but the labels are not all 0/1 (a multi-class problem), macro F1 is computed and
    returned under the key "f1_macro" instead. Undefined values (mcc or correlations of a constant)
    are 0.0, never nan.

    Raises:
        ValueError: for an unknown metric name, or inputs that are empty or of different lengths.
    """
    pred = np.asarray(predictions)
    ref = np.asarray(references)
    if pred.shape != ref.shape or pred.ndim != 1:
        raise ValueError(
            "predictions and references must be 1-D and of equal length, "
            f"got shapes {pred.shape} and {ref.shape}"
        )
    if pred.size == 0:
        raise ValueError("cannot compute metrics on zero examples")
    results: dict[str, float] = {}
    for name in metric_names:
        if name not in _METRICS:
            raise ValueError(f"unknown metric {name!r}; valid metrics: {', '.join(METRIC_NAMES)}")
        key = name
        if name == "f1" and not set(np.unique(np.concatenate([pred, ref])).tolist()) <= {0, 1}:
            key = "f1_macro"  # binary F1 is undefined for more than two classes
        results[key] = _METRICS[key](pred, ref)
    return results


def main_score(metrics: dict[str, float]) -> float:
    """A task's single score: the unweighted mean of its metrics (GLUE rule for MRPC, QQP, STS-B).

    Only the metric names above count, so extra entries (a loss, a step count) are ignored.

    Raises:
        ValueError: if ``metrics`` has none of the known metric names.
    """
    values = [value for name, value in metrics.items() if name in _METRICS]
    if not values:
        raise ValueError(
            f"no known metric among {sorted(metrics)}; expected some of {', '.join(METRIC_NAMES)}"
        )
    return float(np.mean(values))


def glue_score(task_scores: dict[str, float]) -> float:
    """The GLUE score: the unweighted mean of per-task main scores (see :func:`main_score`).

    Pass one score per task. For MNLI that is the caller's mean of its matched and mismatched
    scores, so MNLI counts once; the diagnostic set (AX) is not part of the GLUE score.

    Raises:
        ValueError: if ``task_scores`` is empty.
    """
    if not task_scores:
        raise ValueError("glue_score needs at least one task score")
    return float(np.mean(list(task_scores.values())))


def task_metrics(task: TaskSpec | None, regression: bool, num_labels: int) -> tuple[str, ...]:
    """The metrics to report: the spec's for a GLUE task; for user data, by problem type.

    User data: ("pearson", "spearman") for regression, ("accuracy", "f1") with 2 labels,
    ("accuracy", "f1_macro") with more.
    """
    if task is not None:
        return task.metrics
    if regression:
        return ("pearson", "spearman")
    return ("accuracy", "f1") if num_labels == 2 else ("accuracy", "f1_macro")


# Token tasks: one tag per word, sentences as lists of tags.


def token_accuracy(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> float:
    """The fraction of words whose predicted tag is the gold tag (the score of parts of speech and chunks).

    Raises:
        ValueError: if the sentences or their lengths differ, or there are no words.
    """
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} sentences but the predictions have {len(pred)}")
    if not gold:
        raise ValueError("cannot score zero sentences")
    for i, (gold_tags, pred_tags) in enumerate(zip(gold, pred, strict=True)):
        if len(gold_tags) != len(pred_tags):
            raise ValueError(f"sentence {i} has {len(gold_tags)} gold tags but {len(pred_tags)} predicted")
    words = sum(len(tags) for tags in gold)
    if words == 0:
        raise ValueError("cannot score sentences without words")
    right = sum(g == p for gold_tags, pred_tags in zip(gold, pred, strict=True)
                for g, p in zip(gold_tags, pred_tags, strict=True))
    return right / words


def entity_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity precision, recall and F1 of IOB2 tags, overall (micro: over all entities) and per type.

    seqeval in strict IOB2 mode: an entity is a B-X and the I-X that follow it, and counts as right only when
    its type and both boundaries are the gold's. A predicted I-X that begins a chunk is no entity (lenient
    scorers such as conlleval and seqeval's default read it as one). Keys: "precision", "recall", "f1",
    "precision_<TYPE>", "recall_<TYPE>", "f1_<TYPE>" for every type in the gold or the predictions, and
    "token_accuracy". An undefined ratio (no entity predicted, or none in the gold) is 0.0.

    Raises:
        ValueError: if the sentences or their lengths differ, or a tag is not "O", "B-..." or "I-...".
    """
    accuracy = token_accuracy(gold, pred)
    for name, sentences in (("gold", gold), ("predicted", pred)):
        for tag in {tag for tags in sentences for tag in tags}:
            if tag != "O" and not (len(tag) > 2 and tag[:2] in ("B-", "I-")):
                raise ValueError(f"{name} tag {tag!r} is not an IOB2 tag (O, B-TYPE, I-TYPE); "
                                 "score plain tags with token_accuracy")
    scores = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    if any(tag != "O" for sentences in (gold, pred) for tags in sentences for tag in tags):
        from seqeval.metrics import classification_report  # imported here: it is slow to import
        from seqeval.scheme import IOB2

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zero_division=0 defines the undefined ratios as 0.0
            report = classification_report([list(tags) for tags in gold], [list(tags) for tags in pred],
                                           mode="strict", scheme=IOB2, output_dict=True, zero_division=0)
        for name, values in report.items():
            if name in ("macro avg", "weighted avg"):
                continue
            suffix = "" if name == "micro avg" else f"_{name}"
            for key, value in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
                scores[key + suffix] = _finite(values[value])
    scores["token_accuracy"] = accuracy
    return scores


__all__ += ["entity_scores", "token_accuracy"]


# Ranking: each question's candidates ordered by score (hire.data.ranking, hire.data.trec).

RANKING_MEASURES: tuple[str, ...] = ("map", "mrr", "p@1")  # + "ndcg@10" when labels are graded


def ranking_metrics(examples: Sequence[RankingExample], scores: Sequence[float],
                    graded: bool | None = None) -> dict[str, float]:
    """MAP, MRR and P@1 (and nDCG@10 when ``graded``) of the candidates ranked by ``scores``, mean over questions.

    Computed by ir-measures' pytrec_eval provider, so with trec_eval's definitions: a candidate is relevant
    when its label is >= 1 (AP, RR, P@1), and nDCG@10 gains the label itself (not 2**label - 1) with a
    log2(rank + 1) discount. The ranking is :func:`hire.data.trec.rank_candidates`' (score descending, ties by
    pid descending: trec_eval's own order), handed to the library as strictly decreasing scores, so the numbers
    are those of trec_eval on the run file that :func:`hire.data.trec.write_run` writes for the same scores.

    Questions without a relevant candidate have no defined AP or RR: trec_eval would count them with 0, we
    leave them out of the mean (WikiQA's usual evaluation; read the data with ``keep`` to state which questions
    count). ``graded=None`` means "is any label other than 0 and 1". Returns ``{"map", "mrr", "p@1",
    ("ndcg@10",) "questions": the number of questions averaged, "score": MAP}``.

    Raises:
        ValueError: for unlabelled candidates, labels that are not whole numbers >= 0 (TREC grades are
            integers), no question with a relevant candidate, or scores that :func:`rank_candidates` refuses.
    """
    import ir_measures  # imported here: only ranking needs it
    from ir_measures import AP, RR, P, nDCG

    ranked = rank_candidates(examples, scores)
    qrels: dict[str, dict[str, int]] = {}
    for example in examples:
        label = example.label
        if label is None or not math.isfinite(label) or label < 0 or label != int(label):
            raise ValueError(f"candidate {example.pid!r} of question {example.qid!r} has label {label!r}: ranking "
                             "metrics need a whole-number relevance grade >= 0")
        qrels.setdefault(example.qid, {})[example.pid] = int(label)
    if graded is None:
        graded = any(grade not in (0, 1) for grades in qrels.values() for grade in grades.values())
    qrels = {qid: grades for qid, grades in qrels.items() if any(grade >= 1 for grade in grades.values())}
    if not qrels:
        raise ValueError("no question has a relevant candidate (label >= 1): MAP and MRR are undefined")
    run: dict[str, dict[str, float]] = {}
    for qid, pid, rank, _ in ranked:
        if qid in qrels:
            run.setdefault(qid, {})[pid] = float(-rank)  # strictly decreasing: no tie left for the library
    names = {AP: "map", RR: "mrr", P @ 1: "p@1"}
    if graded:
        names[nDCG @ 10] = "ndcg@10"
    values: dict[str, list[float]] = {name: [] for name in names.values()}
    for metric in ir_measures.pytrec_eval.iter_calc(list(names), qrels, run):
        values[names[metric.measure]].append(float(metric.value))
    results: dict[str, float] = {}
    for name, per_question in values.items():
        if len(per_question) != len(qrels):  # every question is scored once, or the mean is wrong
            raise RuntimeError(f"{name}: {len(per_question)} values for {len(qrels)} questions")
        results[name] = float(np.mean(per_question))
    results["questions"] = len(qrels)
    results["score"] = results["map"]
    return results


__all__ += ["RANKING_MEASURES", "ranking_metrics"]
