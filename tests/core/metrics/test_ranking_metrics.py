"""Tests for ranking metrics (hire.metrics.ranking_metrics) and the TREC files (hire.data.trec): hand-computed
AP / RR / P@1 / nDCG@10, the documented tie rule, and agreement with an independent computation from the written
run and qrels files."""

from __future__ import annotations

import math
import random
from pathlib import Path

import ir_measures
import pytest
from badinput import one_line_error as error

from hire.data.ranking import RankingExample, group_questions
from hire.data.trec import rank_candidates, read_qrels, read_run, write_qrels, write_run
from hire.metrics import RANKING_MEASURES, ranking_metrics


def candidates(qid: str, labels: dict[str, float | None]) -> list[RankingExample]:
    return [RankingExample(qid, f"question {qid}?", pid, f"passage {pid}", label) for pid, label in labels.items()]




def test_binary_metrics_by_hand() -> None:
    examples = (candidates("q1", {"p1": 1, "p2": 0, "p3": 1, "p4": 0}) + candidates("q2", {"x": 1, "y": 0})
                + candidates("q3", {"a": 0, "b": 0}))
    scores = [0.8, 0.9, 0.6, 0.7, 0.3, 0.2, 0.5, 0.4]
    # q1 ranks p2 p1 p4 p3: relevant at ranks 2 and 4, AP = (1/2 + 2/4) / 2 = 0.5, RR = 1/2, P@1 = 0.
    # q2 ranks x y: AP = RR = P@1 = 1. q3 has no relevant candidate: left out of the mean.
    result = ranking_metrics(examples, scores)
    assert result == pytest.approx({"map": 0.75, "mrr": 0.75, "p@1": 0.5, "questions": 2, "score": 0.75})
    assert set(RANKING_MEASURES) <= set(result)
    assert ranking_metrics(examples, scores, graded=True)["ndcg@10"] == pytest.approx(
        ((1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3)) + 1) / 2)


def test_graded_labels_give_ndcg_with_linear_gain_and_a_cut_at_10() -> None:
    examples = candidates("g", {"a": 2, "b": 0, "c": 1})
    result = ranking_metrics(examples, [0.1, 0.9, 0.5])  # ranks b c a
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert result["ndcg@10"] == pytest.approx(dcg / ideal)
    assert result["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)  # relevant: label >= 1
    assert result["mrr"] == pytest.approx(0.5) and result["p@1"] == 0.0
    assert "ndcg@10" not in ranking_metrics(examples, [0.1, 0.9, 0.5], graded=False)
    # The only relevant candidate at rank 11: beyond nDCG's cut, while AP and RR still see it.
    deep = candidates("d", {f"n{i:02d}": 0 for i in range(10)} | {"r": 2})
    result = ranking_metrics(deep, [float(20 - i) for i in range(10)] + [1.0])
    assert result["ndcg@10"] == 0.0
    assert result["map"] == pytest.approx(1 / 11) and result["mrr"] == pytest.approx(1 / 11)


def test_ties_are_broken_by_pid_descending_and_that_changes_map() -> None:
    tied = candidates("q", {"a": 1, "b": 0})
    assert rank_candidates(tied, [0.5, 0.5]) == [("q", "b", 1, 0.5), ("q", "a", 2, 0.5)]
    assert ranking_metrics(tied, [0.5, 0.5])["map"] == pytest.approx(0.5)  # pid ascending would give 1.0
    flipped = candidates("q", {"z": 1, "b": 0})
    assert ranking_metrics(flipped, [0.5, 0.5])["map"] == pytest.approx(1.0)
    # Score first, then pid; ranks from 1 per question, questions in order of first appearance.
    examples = candidates("r", {"D1-0": 0, "D1-10": 1, "D1-2": 0}) + candidates("q", {"D1-0": 1})
    assert rank_candidates(examples, [1.0, 1.0, 2.0, -3.0]) == [
        ("r", "D1-2", 1, 2.0), ("r", "D1-10", 2, 1.0), ("r", "D1-0", 3, 1.0), ("q", "D1-0", 1, -3.0)]


def _plain_metrics(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """AP, RR and P@1 written out from their definitions, ranking as trec_eval does (score desc, pid desc)."""
    ap, rr, p1 = [], [], []
    for qid, grades in qrels.items():
        relevant = {pid for pid, grade in grades.items() if grade >= 1}
        if not relevant:
            continue
        order = [pid for _, pid in sorted(((score, pid) for pid, score in run[qid].items()), reverse=True)]
        hits, precisions = 0, []
        for rank, pid in enumerate(order, start=1):
            if pid in relevant:
                hits += 1
                precisions.append(hits / rank)
        ap.append(sum(precisions) / len(relevant))
        rr.append(next((1 / rank for rank, pid in enumerate(order, start=1) if pid in relevant), 0.0))
        p1.append(float(order[0] in relevant))
    return {"map": sum(ap) / len(ap), "mrr": sum(rr) / len(rr), "p@1": sum(p1) / len(p1), "questions": len(ap)}


def test_metrics_agree_with_an_independent_computation_from_the_written_files(tmp_path: Path) -> None:
    rng = random.Random(0)
    examples, scores = [], []
    for q in range(60):
        n = rng.randint(1, 12)
        labels = {f"D{rng.randint(0, 3)}-{i}": float(rng.random() < 0.25) for i in range(n)}
        examples += candidates(f"Q{q}", labels)
        scores += [rng.choice([0.0, 0.25, 0.5, 1.0, rng.random()]) for _ in labels]  # many ties
    write_run(tmp_path / "run.txt", examples, scores, tag="test")
    write_qrels(tmp_path / "qrels.txt", examples)
    run = read_run(tmp_path / "run.txt", {q: {e.pid for e in c} for q, c in group_questions(examples).items()})
    qrels = read_qrels(tmp_path / "qrels.txt")
    assert qrels == {q: {e.pid: int(e.label) for e in c} for q, c in group_questions(examples).items()}
    expected = _plain_metrics(run, qrels)
    assert 20 < expected["questions"] < 60  # some questions have no relevant candidate and are left out
    result = ranking_metrics(examples, scores)
    assert result == pytest.approx({**expected, "score": expected["map"]})
    # trec_eval (pytrec_eval) on the written file, ties and all, gives the same numbers.
    judged = {q: grades for q, grades in qrels.items() if max(grades.values()) >= 1}
    rescored = ir_measures.pytrec_eval.calc_aggregate([ir_measures.AP, ir_measures.RR, ir_measures.P @ 1], judged,
                                                      ir_measures.read_trec_run(str(tmp_path / "run.txt")))
    assert rescored[ir_measures.AP] == pytest.approx(result["map"])
    assert rescored[ir_measures.RR] == pytest.approx(result["mrr"])
    assert rescored[ir_measures.P @ 1] == pytest.approx(result["p@1"])


def test_run_file_round_trip_and_format(tmp_path: Path) -> None:
    examples = candidates("q1", {"a": 1, "b": 0}) + candidates("q2", {"a": 0})
    scores = [0.1 + 0.2, 1e-17, -2.5]
    path = tmp_path / "run.txt"
    path.write_text("old\n")
    write_run(path, examples, scores)
    assert path.read_text() == "q1 Q0 a 1 0.30000000000000004 hire\nq1 Q0 b 2 1e-17 hire\nq2 Q0 a 1 -2.5 hire\n"
    assert read_run(path) == {"q1": {"a": 0.1 + 0.2, "b": 1e-17}, "q2": {"a": -2.5}}
    assert [p.name for p in tmp_path.iterdir()] == ["run.txt"]  # no temporary file left behind
    with pytest.raises(ValueError, match="finite"):
        write_run(path, examples, [0.0, math.nan, 1.0])
    with pytest.raises(ValueError, match="scores for"):
        write_run(path, examples, [0.0])
    with pytest.raises(ValueError, match="whitespace"):
        write_run(path, candidates("q 1", {"a": 1}), [0.0])
    assert read_run(path) == {"q1": {"a": 0.1 + 0.2, "b": 1e-17}, "q2": {"a": -2.5}}  # untouched by the failures
    write_qrels(tmp_path / "qrels.txt", [RankingExample("q", "Q", "p", "P", 2.0)])
    assert (tmp_path / "qrels.txt").read_text() == "q 0 p 2\n"
    with pytest.raises(ValueError, match="whole-number"):
        write_qrels(tmp_path / "bad.txt", [RankingExample("q", "Q", "p", "P", 0.5)])
    with pytest.raises(ValueError, match="whole-number"):
        write_qrels(tmp_path / "bad.txt", [RankingExample("q", "Q", "p", "P", None)])
    assert not (tmp_path / "bad.txt").exists()


def test_bad_run_and_qrels_files(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    known = {"q1": {"a", "b"}}
    path.write_text("q1 Q0 a 1 0.5 t\n\nq1 Q0 c 2 0.25 t\n")
    error(lambda: read_run(path, known), "run.txt, line 3", "pid 'c'", "'q1'")
    assert read_run(path) == {"q1": {"a": 0.5, "c": 0.25}}  # blank line skipped; no check without known
    path.write_text("q9 Q0 a 1 0.5 t\n")
    error(lambda: read_run(path, known), "run.txt, line 1", "qid 'q9'")
    for text, line, words in [("q1 Q0 a 1 0.5\n", 1, ("expected 6",)), ("q1 Q0 a x 0.5 t\n", 1, ("rank",)),
                              ("q1 Q0 a 1 high t\n", 1, ("score",)), ("q1 Q0 a 1 inf t\n", 1, ("finite",)),
                              ("q1 Q0 a 1 0.5 t\r\nq1 Q0 a 2 0.4 t\r\n", 2, ("line 1", "too")),
                              ("", 1, ("empty",))]:
        path.write_text(text)
        error(lambda: read_run(path), f"run.txt, line {line}", *words)
    path.write_bytes(b"q1 Q0 a 1 0.5 t\nq1 Q0 \xff 2 0.4 t\n")
    error(lambda: read_run(path), "run.txt, line 2", "UTF-8")
    qrels = tmp_path / "qrels.txt"
    for text, line, words in [("q 0 p\n", 1, ("expected 4",)), ("q 0 p 1.5\n", 1, ("not an integer",)),
                              ("q 0 p 1\nq 0 p 0\n", 2, ("line 1", "too"))]:
        qrels.write_text(text)
        error(lambda: read_qrels(qrels), f"qrels.txt, line {line}", *words)
    error(lambda: read_qrels(tmp_path / "none.txt"), "none.txt", "not found")


def test_metrics_refuse_what_they_cannot_score() -> None:
    with pytest.raises(ValueError, match="no question has a relevant"):
        ranking_metrics(candidates("q", {"a": 0, "b": 0}), [1.0, 2.0])
    with pytest.raises(ValueError, match="whole-number"):
        ranking_metrics(candidates("q", {"a": 1, "b": None}), [1.0, 2.0])
    with pytest.raises(ValueError, match="whole-number"):
        ranking_metrics(candidates("q", {"a": 1, "b": 0.5}), [1.0, 2.0])
    with pytest.raises(ValueError, match="scores for"):
        ranking_metrics(candidates("q", {"a": 1}), [1.0, 2.0])
    with pytest.raises(ValueError, match="twice"):
        ranking_metrics(candidates("q", {"a": 1}) * 2, [1.0, 2.0])
