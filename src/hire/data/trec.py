"""TREC run and qrels files, so that rankings can be rescored with standard tools (trec_eval, ir-measures).

A run file has one line per ranked candidate, ``qid Q0 pid rank score tag``; a qrels file one per judged
candidate, ``qid 0 pid relevance`` (an integer grade). Fields are separated by whitespace.

Order and ties: trec_eval ignores the rank column and sorts each question's candidates by score, descending,
breaking ties by pid in *descending* string order (byte order: Python's code-point order of ``str`` is the same
for UTF-8). :func:`rank_candidates` uses that same order, so the ranks written and any tool's rescoring of the
file agree, and the metrics of :func:`hire.metrics.ranking_metrics` are those of the written file. Scores are
written with ``repr`` (the shortest text that reads back as the same double), so no two scores that differ are
made equal by rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from hire.checks import replacing
from hire.data.files import data_error, iter_lines
from hire.data.ranking import RankingExample

__all__ = ["rank_candidates", "read_qrels", "read_run", "write_qrels", "write_run"]

T = TypeVar("T")


def _check_id(kind: str, value: str) -> None:
    if not value or any(char.isspace() for char in value):
        raise ValueError(f"{kind} {value!r} cannot be written to a TREC file (empty, or contains whitespace)")


def _check_candidate(example: RankingExample, seen: set[tuple[str, str]]) -> None:
    """Check that ``example``'s ``(qid, pid)`` is not in ``seen`` (then add it) and that a TREC file can hold both
    ids: the checks of every candidate that a writer puts on a line of its own."""
    if (example.qid, example.pid) in seen:
        raise ValueError(f"candidate {example.pid!r} of question {example.qid!r} appears twice")
    seen.add((example.qid, example.pid))
    _check_id("qid", example.qid)
    _check_id("pid", example.pid)


def rank_candidates(examples: Sequence[RankingExample], scores: Sequence[float]
                    ) -> list[tuple[str, str, int, float]]:
    """``(qid, pid, rank, score)`` for every candidate: questions in order of first appearance, each one's
    candidates by score descending, ties by pid descending (trec_eval's order), ranks from 1 per question.

    Raises:
        ValueError: for scores of another length than the examples, a score that is not finite, a repeated
            ``(qid, pid)``, or an id that a TREC file cannot hold.
    """
    if len(scores) != len(examples):
        raise ValueError(f"{len(scores)} scores for {len(examples)} candidates")
    groups: dict[str, list[tuple[float, str]]] = {}
    seen: set[tuple[str, str]] = set()
    for example, raw in zip(examples, scores, strict=True):
        score = float(raw)
        if not math.isfinite(score):
            raise ValueError(f"candidate {example.pid!r} of question {example.qid!r} has score {score} "
                             "(scores must be finite)")
        _check_candidate(example, seen)
        groups.setdefault(example.qid, []).append((score, example.pid))
    ranked: list[tuple[str, str, int, float]] = []
    for qid, candidates in groups.items():
        # One descending sort on (score, pid): higher score first, and among equal scores the larger pid.
        for rank, (score, pid) in enumerate(sorted(candidates, reverse=True), start=1):
            ranked.append((qid, pid, rank, score))
    return ranked


def write_run(path: str | Path, examples: Sequence[RankingExample], scores: Sequence[float],
              tag: str = "hire") -> None:
    """Write the ranking of every question as a TREC run file (``qid Q0 pid rank score tag``), in rank order.

    The file is written to a temporary name and renamed over ``path``, so it is never seen half written; the
    input is checked (see :func:`rank_candidates`) before anything is written.
    """
    _check_id("tag", tag)
    lines = [f"{qid} Q0 {pid} {rank} {score!r} {tag}\n" for qid, pid, rank, score in rank_candidates(examples, scores)]
    Path(path).parent.mkdir(parents=True, exist_ok=True)  # a resumed folder may have lost its runs/ (not committed)
    with replacing(Path(path)) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(lines)


def write_qrels(path: str | Path, examples: Sequence[RankingExample]) -> None:
    """Write the candidates' labels as a TREC qrels file (``qid 0 pid relevance``), in the examples' order.

    TREC relevance grades are integers (trec_eval reads ``1.5`` as 1), so every label must be a whole number.

    Raises:
        ValueError: for an unlabelled candidate, a label that is not a whole number >= 0, a repeated
            ``(qid, pid)`` or an id that a TREC file cannot hold; nothing is written then.
    """
    lines = []
    seen: set[tuple[str, str]] = set()
    for example in examples:
        label = example.label
        if label is None or not math.isfinite(label) or label < 0 or label != int(label):
            raise ValueError(f"candidate {example.pid!r} of question {example.qid!r} has label {label!r}: "
                             "qrels need a whole-number relevance grade >= 0")
        _check_candidate(example, seen)
        lines.append(f"{example.qid} 0 {example.pid} {int(label)}\n")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with replacing(Path(path)) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(lines)


def _fields(path: Path, kind: str, layout: str) -> list[tuple[int, list[str]]]:
    """The non-blank lines of a TREC file, split on whitespace, each with its line number; every line must have
    the fields of ``layout``."""
    expected = len(layout.split())
    rows = []
    for number, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue  # blank lines carry nothing in a whitespace-separated format
        if len(fields) != expected:
            raise data_error(path, number, f"expected {expected} whitespace-separated fields ({layout}), "
                                           f"found {len(fields)}")
        rows.append((number, fields))
    if not rows:
        raise data_error(path, 1, f"the {kind} file is empty")
    return rows


def _read_lines(path: str | Path, kind: str, layout: str, verb: str,
                value: Callable[[Path, int, list[str]], T]) -> dict[str, dict[str, T]]:
    """``{qid: {pid: value}}`` of a TREC file whose lines have the fields of ``layout``, qid first and pid third:
    ``value`` checks a line's fields and gives what is stored; a ``(qid, pid)`` on two lines is an error that says
    where it was ``verb`` (ranked, judged) first."""
    path = Path(path)
    if not path.is_file():
        raise data_error(path, None, "file not found")
    table: dict[str, dict[str, T]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, fields in _fields(path, kind, layout):
        stored = value(path, number, fields)
        qid, pid = fields[0], fields[2]
        if (qid, pid) in first_line:
            raise data_error(path, number, f"qid {qid!r} pid {pid!r} is {verb} on line {first_line[qid, pid]} too")
        first_line[qid, pid] = number
        table.setdefault(qid, {})[pid] = stored
    return table


def read_run(path: str | Path, known: Mapping[str, set[str]] | None = None) -> dict[str, dict[str, float]]:
    """Read a TREC run file as ``{qid: {pid: score}}`` (the rank column is checked to be an integer and, as by
    trec_eval, otherwise ignored). Blank lines are skipped. Given ``known`` (``qid -> pids`` of the data), every
    qid and pid must be one of them.

    Raises:
        DataError: one line naming the file and line: a wrong number of fields, a rank that is not an integer, a
            score that is not a finite number, a repeated ``(qid, pid)`` (and its first line), an unknown qid or
            pid, an empty file, bad UTF-8.
    """

    def line_score(path: Path, number: int, fields: list[str]) -> float:
        qid, _, pid, rank, score_text, _ = fields
        try:
            int(rank)
        except ValueError:
            raise data_error(path, number, f"the rank {rank!r} is not an integer") from None
        try:
            score = float(score_text)
        except ValueError:
            raise data_error(path, number, f"the score {score_text!r} is not a number") from None
        if not math.isfinite(score):
            raise data_error(path, number, f"the score {score_text!r} is not a finite number")
        if known is not None:
            if qid not in known:
                raise data_error(path, number, f"qid {qid!r} is not a question of the data")
            if pid not in known[qid]:
                raise data_error(path, number, f"pid {pid!r} is not a candidate of question {qid!r} in the data")
        return score

    return _read_lines(path, "run", "qid Q0 pid rank score tag", "ranked", line_score)


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file as ``{qid: {pid: relevance}}`` (the iteration column is ignored, as by trec_eval).
    Blank lines are skipped.

    Raises:
        DataError: one line naming the file and line: a wrong number of fields, a relevance that is not an
            integer, a repeated ``(qid, pid)`` (and its first line), an empty file, bad UTF-8.
    """

    def line_grade(path: Path, number: int, fields: list[str]) -> int:
        relevance = fields[3]
        try:
            return int(relevance)
        except ValueError:
            raise data_error(path, number, f"the relevance {relevance!r} is not an integer") from None

    return _read_lines(path, "qrels", "qid iteration pid relevance", "judged", line_grade)
