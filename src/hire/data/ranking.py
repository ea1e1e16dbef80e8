"""Answer ranking data: questions, each with candidate passages to rank, read from WikiQA or a user's table.

A row is one candidate: ``qid, question, pid, passage, label``. Candidates are grouped by ``qid``; a ``pid`` is
unique within its question only (WikiQA's sentence ids repeat across questions that share a document), so a
candidate's key is ``(qid, pid)``. A label is a relevance grade: any number >= 0 (0/1, or graded); a file
without the label column is unlabelled (labels ``None``). The TREC files that results are written as
(:mod:`hire.data.trec`) separate fields by whitespace, so ids must not contain any.

Formats: ``tsv`` (tab-separated, no quoting; also ``.txt``), ``csv`` (RFC 4180 quoting), each with a header row
unless the columns are given as 0-based indices; ``jsonl`` (one object per line, keyed by column name).
Lines end at ``\\n`` (a CRLF's ``\\r`` is dropped), a UTF-8 byte-order mark is dropped, and any other bytes
that are not UTF-8 are an error naming the line.

Which questions count: ``keep="all"`` keeps every question; ``"has-positive"`` (WikiQA's usual evaluation)
only those with at least one relevant candidate (label > 0); ``"has-both"`` only those with something to rank
above something else: a relevant candidate and at least two different grades. With 0/1 labels that is a relevant
and a non-relevant candidate (a question of one kind cannot change MAP under any ranking, so some papers drop
them too); with graded labels a question whose grades are all > 0 but differ (1 and 2) stays, as nDCG tells its
rankings apart, and one whose candidates all share one grade is dropped.
What was left out is counted by reason in :attr:`RankingFile.dropped`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hire.data.examples import DataError, MissingData
from hire.data.files import (
    EXTENSIONS,
    data_error,
    default_data_dir,
    delimited_rows,
    header_records,
    number_value,
    text_value,
)
from hire.data.glue import data_dir_option_name

__all__ = ["FIELDS", "FORMATS", "KEEP", "WIKIQA_COLUMNS", "WIKIQA_ENV", "RankingExample", "RankingFile",
           "check_grades", "default_wikiqa_dir", "group_questions", "keep_questions", "read_ranking_file",
           "read_wikiqa"]

FIELDS = ("qid", "question", "pid", "passage", "label")
FORMATS = ("auto", "tsv", "csv", "jsonl")
KEEP = ("all", "has-positive", "has-both")
WIKIQA_ENV = "HIRE_WIKIQA_DIR"
WIKIQA_SPLITS = ("train", "dev", "test")
WIKIQA_COLUMNS: dict[str, str | int] = {"qid": "QuestionID", "question": "Question", "pid": "SentenceID",
                                        "passage": "Sentence", "label": "Label"}
_REQUIRED = ("qid", "question", "pid", "passage")
# Why keep_questions left a question out (the keys of RankingFile.dropped).
NO_POSITIVE = "no positive"
NO_NEGATIVE = "no negative"


@dataclass(frozen=True)
class RankingExample:
    """One candidate passage for one question.

    ``pid`` is unique within its question (not across questions). ``label`` is the relevance grade (0/1 or
    graded, >= 0), ``None`` when unlabelled. ``line`` is the candidate's 1-based line in its file (0: not read
    from a file), so later errors can point at it.
    """

    qid: str
    question: str
    pid: str
    passage: str
    label: float | None
    line: int = 0


@dataclass
class RankingFile:
    """The candidates read from ``path`` (in file order) that ``keep`` kept, and how many questions it dropped
    for each reason (``"no positive"``: every candidate has label 0; ``"no negative"``: every candidate has the
    same label > 0, so none is less relevant than another: with 0/1 labels, none has label 0)."""

    path: Path
    examples: list[RankingExample]
    dropped: dict[str, int] = field(default_factory=dict)


def group_questions(examples: Sequence[RankingExample]) -> dict[str, list[RankingExample]]:
    """``qid -> candidates``: questions in order of first appearance, each one's candidates in file order."""
    groups: dict[str, list[RankingExample]] = {}
    for example in examples:
        groups.setdefault(example.qid, []).append(example)
    return groups


def check_grades(examples: Iterable[RankingExample], path: str | Path, unlabelled: str, why: str) -> None:
    """Every candidate labelled with a whole-number relevance grade (TREC qrels and the IR metrics read
    integers), checked in file order: :class:`DataError` ``"{path}: {unlabelled}"`` at the first candidate without
    a label, ``"{path}, line N: the label X is not a whole number{why}"`` at the first with a fractional one."""
    for example in examples:
        if example.label is None:
            raise DataError(f"{path}: {unlabelled}")
        if example.label != int(example.label):
            raise DataError(f"{path}, line {example.line}: the label {example.label} is not a whole number{why}")


def keep_questions(examples: Sequence[RankingExample], keep: str) -> tuple[list[RankingExample], dict[str, int]]:
    """The candidates of the questions that ``keep`` keeps (file order), and the dropped questions counted by
    reason: ``"has-positive"`` counts ``"no positive"`` (no label > 0); ``"has-both"`` counts ``"no positive"``
    and ``"no negative"`` (one grade > 0 for every candidate: nothing to rank below another). So ``"has-both"``
    keeps a question with two different grades, one of them > 0: with 0/1 labels a 1 and a 0, with graded labels
    also 1 and 2 (no 0 needed); ``"all"`` drops nothing (``{}``).

    Raises:
        ValueError: for an unknown ``keep``, or a filter that needs labels meeting an unlabelled candidate.
    """
    if keep not in KEEP:
        raise ValueError(f"unknown keep {keep!r}; use one of {', '.join(KEEP)}")
    if keep == "all":
        return list(examples), {}
    dropped = {NO_POSITIVE: 0} if keep == "has-positive" else {NO_POSITIVE: 0, NO_NEGATIVE: 0}
    kept_ids: set[str] = set()
    for qid, candidates in group_questions(examples).items():
        unlabelled = next((c for c in candidates if c.label is None), None)
        if unlabelled is not None:
            raise ValueError(f"keep={keep!r} needs labels, but candidate {unlabelled.pid!r} of question {qid!r} "
                             f"(line {unlabelled.line}) has none")
        labels = [float(c.label or 0.0) for c in candidates]  # none is None here
        positive = any(label > 0 for label in labels)
        below = len(set(labels)) > 1  # a candidate less relevant than another: a 0 beside a 1, or a 1 beside a 2
        if not positive:
            dropped[NO_POSITIVE] += 1
        elif keep == "has-both" and not below:
            dropped[NO_NEGATIVE] += 1
        else:
            kept_ids.add(qid)
    return [example for example in examples if example.qid in kept_ids], dropped


def _resolve_columns(columns: Mapping[str, str | int] | None, kind: str) -> tuple[dict[str, str | int], bool]:
    """The column of each field (the defaults, with ``columns`` over them), and whether they are indices (a file
    without a header: then only the fields given are read, and a label index is optional)."""
    if columns is None:
        return {name: name for name in FIELDS}, False
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {unknown} in columns; the fields are {list(FIELDS)}")
    kinds = {isinstance(value, int) and not isinstance(value, bool) for value in columns.values()}
    if kinds == {True}:
        if kind == "jsonl":
            raise ValueError("JSON lines are read by key: give column names, not indices")
        missing = [name for name in _REQUIRED if name not in columns]
        if missing:
            raise ValueError(f"columns given as indices (a file without a header) must give {missing} too")
        resolved: dict[str, str | int] = dict(columns)
        if any(int(index) < 0 for index in resolved.values()):
            raise ValueError(f"column indices are 0-based and >= 0, got {dict(columns)}")
    elif kinds == {False} or not columns:
        resolved = {**{name: name for name in FIELDS}, **columns}
        bad = {name: value for name, value in resolved.items() if not isinstance(value, str) or not value.strip()}
        if bad:
            raise ValueError(f"column names must be non-empty strings, got {bad}")
    else:
        raise ValueError(f"columns must be all names (a file with a header) or all indices (one without), "
                         f"got {dict(columns)}")
    if len(set(resolved.values())) < len(resolved):
        raise ValueError(f"two fields read the same column: {resolved}")
    return resolved, kinds == {True}


def _records(path: Path, kind: str, columns: dict[str, str | int], indexed: bool
             ) -> tuple[bool, Iterator[tuple[int, dict[str, Any]]]]:
    """Whether the file has the label column, and ``(line, {field: raw value})`` for each row.

    A missing required column is an error at the header (or the first row, which fixes the width / keys)."""
    if indexed:
        indices = {name: int(index) for name, index in columns.items()}
        rows = delimited_rows(path, kind)
        first = next(rows, None)
        if first is None:
            raise data_error(path, 1, "the file is empty")
        width = len(first[1])
        needed = max(indices.values()) + 1
        if width < needed:
            raise data_error(path, first[0], f"expected at least {needed} fields (columns {indices}), found {width}")
        _refuse_header(path, first[0], {name: first[1][index] for name, index in indices.items()})

        def indexed_rows() -> Iterator[tuple[int, dict[str, Any]]]:
            for number, fields in itertools.chain([first], rows):
                if not fields:
                    raise data_error(path, number, "the line is empty (blank lines are not allowed)")
                if len(fields) != width:
                    raise data_error(path, number, f"expected {width} fields (as on line {first[0]}), "
                                                   f"found {len(fields)}")
                yield number, {name: fields[index] for name, index in indices.items()}

        return "label" in columns, indexed_rows()
    header_line, names, records = header_records(path, kind)
    for name in _REQUIRED:
        if columns[name] not in names:
            where = "the header has" if kind != "jsonl" else "the first object has"
            raise data_error(path, header_line, f"no column {columns[name]!r} (the {name}); {where} {names}")
    has_label = columns["label"] in names

    def named_rows() -> Iterator[tuple[int, dict[str, Any]]]:
        wanted = {name: column for name, column in columns.items() if name != "label" or has_label}
        rows = 0
        for number, record in records:
            absent = [column for column in wanted.values() if column not in record]
            if absent:
                raise data_error(path, number, f"no column {absent[0]!r} on this line; it has {list(record)}")
            if not has_label and columns["label"] in record:
                raise data_error(path, number, f"a label {columns['label']!r} here, but line {header_line} has "
                                               "none: label every line or none")
            yield number, {name: record[column] for name, column in wanted.items()}
            rows += 1
        if rows == 0:
            raise data_error(path, header_line + 1, "the file has a header but no data rows")

    return has_label, named_rows()


# Column names that a header row of a ranking file holds (lower-cased): the fields', WikiQA's and common ones.
_HEADER_NAMES = frozenset({*FIELDS, *(str(c).lower() for c in WIKIQA_COLUMNS.values()), "id", "query", "query_id",
                           "doc", "docid", "doc_id", "document", "passage_id", "text", "sentence", "answer",
                           "relevance", "rel", "grade", "score", "title"})


def _refuse_header(path: Path, number: int, row: dict[str, str]) -> None:
    """Columns given as indices read a file without a header, where every row is a candidate: a first row that
    is a header (two of its fields are column names, or its label is a column name) would silently become a
    question of its own. Refuse it, naming what it holds."""
    names = [name for name, value in row.items() if value.strip().lower() in _HEADER_NAMES]
    label = row.get("label")
    if len(names) >= 2 or (label is not None and label.strip().lower() in _HEADER_NAMES):
        shown = ", ".join(f"{name} {row[name]!r}" for name in names or ["label"])
        raise data_error(path, number, f"this line looks like a header ({shown}), but columns given as indices "
                                       "read a file without one, every line a candidate; name the columns instead "
                                       "(e.g. qid=QuestionID) or remove the header line")


def _identifier(path: Path, number: int, name: str, value: Any) -> str:
    """A qid or pid: a string or integer, trimmed, non-empty and without whitespace (TREC files split on it)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise data_error(path, number, f"the {name} must be a string or an integer, got {value!r}")
    text = str(value).strip()
    if not text:
        raise data_error(path, number, f"the {name} is empty")
    if any(char.isspace() for char in text):
        raise data_error(path, number, f"the {name} {text!r} contains whitespace, which TREC run files cannot hold")
    return text


def _relevance(path: Path, number: int, column: str, value: Any) -> float:
    """A label: a finite number >= 0."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise data_error(path, number, f"the label in column {column!r} is missing (leave the column out of the "
                                       "whole file for unlabelled data)")
    label = number_value(value)
    if label is None:
        raise data_error(path, number, f"the label {value!r} in column {column!r} is not a number")
    if not math.isfinite(label) or label < 0:
        raise data_error(path, number, f"the label {value!r} in column {column!r} must be a finite number >= 0 "
                                       "(a relevance grade)")
    return label


def read_ranking_file(path: str | Path, format: str = "auto", columns: Mapping[str, str | int] | None = None,
                      keep: str = "all", option: str = "--file") -> RankingFile:
    """Read a ranking data set (see the module docstring for the formats and ``keep``).

    ``format``: ``auto`` (by extension: .tsv/.txt, .csv, .jsonl/.json), ``tsv``, ``csv`` or ``jsonl``.
    ``columns`` maps fields (``qid``, ``question``, ``pid``, ``passage``, ``label``) to column names, over the
    defaults (each field's own name); or to 0-based indices for a TSV/CSV file without a header, where the four
    text fields must all be given and ``label`` may be left out (unlabelled). A file without the label column
    is unlabelled; a label column with an empty value is an error. ``option`` is named when the file is missing.

    Raises:
        DataError: one line naming the file and line: a missing column (and the columns there are), a label
            that is not a number >= 0, a duplicate ``(qid, pid)`` (and the line that had it first), a question
            whose text differs between its rows, an empty question or passage, an empty file, bad UTF-8.
        ValueError: for a bad ``format``, ``columns`` or ``keep``.
    """
    path = Path(path)
    if format not in FORMATS:
        raise ValueError(f"unknown ranking file format {format!r}; use one of {', '.join(FORMATS)}")
    if keep not in KEEP:
        raise ValueError(f"unknown keep {keep!r}; use one of {', '.join(KEEP)}")
    kind = EXTENSIONS.get(path.suffix.lower()) if format == "auto" else format
    if kind is None:
        raise data_error(path, None, f"unknown file extension {path.suffix!r}; use one of "
                                     f"{', '.join(EXTENSIONS)} or give the format")
    resolved, indexed = _resolve_columns(columns, kind)
    if not path.is_file():
        found = "is a folder, not a file" if path.is_dir() else "file not found"
        raise data_error(path, None, f"{found} (set {option})")

    has_label, records = _records(path, kind, resolved, indexed)
    if keep != "all" and not has_label:
        raise data_error(path, None, f"keep={keep!r} needs labels, and the file has no label column "
                                     f"{resolved.get('label', 'label')!r}")
    examples: list[RankingExample] = []
    first_line: dict[tuple[str, str], int] = {}
    questions: dict[str, tuple[str, int]] = {}
    for number, record in records:
        qid = _identifier(path, number, "qid", record["qid"])
        pid = _identifier(path, number, "pid", record["pid"])
        question = text_value(path, number, str(resolved["question"]), record["question"])
        passage = text_value(path, number, str(resolved["passage"]), record["passage"])
        label = _relevance(path, number, str(resolved["label"]), record["label"]) if has_label else None
        if (qid, pid) in first_line:
            raise data_error(path, number, f"duplicate candidate: qid {qid!r} pid {pid!r} is on line "
                                           f"{first_line[qid, pid]} too (a pid must be unique within its question)")
        first_line[qid, pid] = number
        seen = questions.setdefault(qid, (question, number))
        if seen[0] != question:
            raise data_error(path, number, f"question {qid!r} reads {question!r} here but {seen[0]!r} on line "
                                           f"{seen[1]}: one qid, one question")
        examples.append(RankingExample(qid, question, pid, passage, label, number))
    kept, dropped = keep_questions(examples, keep)
    return RankingFile(path=path, examples=kept, dropped=dropped)


def default_wikiqa_dir() -> Path:
    """Where WikiQA is looked for when no data dir is given: ``$HIRE_WIKIQA_DIR`` if set; else the first existing
    of ``<repo>/../shared/data/wikiqa`` and ``./../shared/data/wikiqa``; else the first (so that a "not found"
    error names it)."""
    return default_data_dir(WIKIQA_ENV, "wikiqa")


def read_wikiqa(data_dir: str | Path | None, split: str, keep: str = "has-positive") -> RankingFile:
    """One split of WikiQA (``train``, ``dev`` or ``test``) as released: ``WikiQA-<split>.tsv`` in ``data_dir``
    (default :func:`default_wikiqa_dir`). Rows are keyed by (QuestionID, SentenceID); a candidate's passage is
    its Sentence. ``keep`` defaults to the usual evaluation's questions: those with a correct answer.

    Raises:
        DataError: the file is missing or malformed (naming file and line).
        ValueError: for an unknown split or keep.
    """
    if split not in WIKIQA_SPLITS:
        raise ValueError(f"unknown WikiQA split {split!r}; use one of {', '.join(WIKIQA_SPLITS)}")
    folder = Path(data_dir) if data_dir is not None else default_wikiqa_dir()
    path = folder / f"WikiQA-{split}.tsv"
    if not path.is_file():
        raise MissingData(f"{path}: file not found (set {data_dir_option_name()} or ${WIKIQA_ENV} to the folder of "
                        "WikiQA-{train,dev,test}.tsv)")
    return read_ranking_file(path, format="tsv", columns=WIKIQA_COLUMNS, keep=keep, option=data_dir_option_name())
