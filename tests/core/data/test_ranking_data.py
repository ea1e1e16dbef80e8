"""Tests for the answer-ranking readers (hire.data.ranking): user tables in TSV, CSV and JSON lines, WikiQA as
released, the question filters, and each kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from badinput import one_line_error as error

from hire.data.examples import DataError
from hire.data.ranking import (
    KEEP,
    RankingExample,
    default_wikiqa_dir,
    group_questions,
    keep_questions,
    read_ranking_file,
    read_wikiqa,
)

WIKIQA_DIR = default_wikiqa_dir()
needs_wikiqa = pytest.mark.skipif(not (WIKIQA_DIR / "WikiQA-dev.tsv").is_file(),
                                  reason=f"shared WikiQA data not found at {WIKIQA_DIR} (set HIRE_WIKIQA_DIR)")
HEADER = "qid\tquestion\tpid\tpassage\tlabel\n"


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def tsv(path: Path, rows: list[tuple], header: str = HEADER) -> Path:
    return write(path, header + "".join("\t".join(str(field) for field in row) + "\n" for row in rows))




def test_tsv_with_crlf_and_bom_reads_every_field_and_line(tmp_path: Path) -> None:
    text = "\ufeff" + HEADER.replace("\n", "\r\n") + (
        "q1\tWho wrote Hamlet?\tD1-0\tHamlet is a tragedy.\t0\r\n"
        "q1\tWho wrote Hamlet?\tD1-1\tShakespeare wrote it.\t1\r\n"
        "q2\tWhy is the sky blue?\tD1-0\tRayleigh \"scattering\".\t2.5\r\n")  # a pid repeats across questions
    result = read_ranking_file(write(tmp_path / "a.tsv", text))
    assert result.path == tmp_path / "a.tsv" and result.dropped == {}
    assert result.examples == [
        RankingExample("q1", "Who wrote Hamlet?", "D1-0", "Hamlet is a tragedy.", 0.0, 2),
        RankingExample("q1", "Who wrote Hamlet?", "D1-1", "Shakespeare wrote it.", 1.0, 3),
        RankingExample("q2", "Why is the sky blue?", "D1-0", 'Rayleigh "scattering".', 2.5, 4),
    ]


def test_csv_quoting_jsonl_and_selected_columns(tmp_path: Path) -> None:
    csv_text = ('id,q,doc,text,rel,extra\n'
                'a,"Q, with comma",p1,"two\nlines",1,x\n'
                'a,"Q, with comma",p2,plain,0,y\n')
    result = read_ranking_file(write(tmp_path / "a.csv", csv_text),
                               columns={"qid": "id", "question": "q", "pid": "doc", "passage": "text", "label": "rel"})
    assert [(e.qid, e.question, e.pid, e.passage, e.label, e.line) for e in result.examples] == [
        ("a", "Q, with comma", "p1", "two\nlines", 1.0, 2), ("a", "Q, with comma", "p2", "plain", 0.0, 4)]

    lines = [{"qid": 7, "question": "q?", "pid": 1, "passage": "x", "label": 3},
             {"qid": 7, "question": "q?", "pid": 2, "passage": "y", "label": 0}]
    path = write(tmp_path / "a.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    assert [(e.qid, e.pid, e.label) for e in read_ranking_file(path).examples] == [("7", "1", 3.0), ("7", "2", 0.0)]


def test_a_file_without_the_label_column_is_unlabelled(tmp_path: Path) -> None:
    path = write(tmp_path / "a.tsv", "qid\tquestion\tpid\tpassage\nq\tQ?\tp\tP.\n")
    assert read_ranking_file(path).examples == [RankingExample("q", "Q?", "p", "P.", None, 2)]
    error(lambda: read_ranking_file(path, keep="has-positive"), "a.tsv", "needs labels", "'label'")

    with pytest.raises(ValueError, match="pid"):  # indices: every text field must be given
        read_ranking_file(path, columns={"qid": 0, "question": 1, "passage": 3})


def test_headerless_indices(tmp_path: Path) -> None:
    plain = write(tmp_path / "plain.txt", "1\tP one.\tq\tQ?\tx1\r\n0\tP two.\tq\tQ?\tx2\r\n")
    result = read_ranking_file(plain, columns={"label": 0, "passage": 1, "qid": 2, "question": 3, "pid": 4})
    assert result.examples == [RankingExample("q", "Q?", "x1", "P one.", 1.0, 1),
                               RankingExample("q", "Q?", "x2", "P two.", 0.0, 2)]
    unlabelled = read_ranking_file(plain, columns={"passage": 1, "qid": 2, "question": 3, "pid": 4})
    assert [e.label for e in unlabelled.examples] == [None, None]
    error(lambda: read_ranking_file(plain, columns={"passage": 1, "qid": 2, "question": 3, "pid": 7}),
          "plain.txt, line 1", "at least 8 fields")
    short = write(tmp_path / "short.txt", "1\tP one.\tq\tQ?\tx1\n0\tP two.\tq\n")
    error(lambda: read_ranking_file(short, columns={"passage": 1, "qid": 2, "question": 3, "pid": 4}),
          "short.txt, line 2", "expected 5 fields")


def test_bad_arguments_are_value_errors(tmp_path: Path) -> None:
    path = tsv(tmp_path / "a.tsv", [("q", "Q?", "p", "P.", 1)])
    for kwargs, words in [({"format": "xml"}, "format"), ({"keep": "some"}, "keep"),
                          ({"columns": {"query": "q"}}, "unknown field"),
                          ({"columns": {"qid": 0, "question": "question"}}, "all names"),
                          ({"columns": {"qid": "passage"}}, "same column")]:
        with pytest.raises(ValueError, match=words):
            read_ranking_file(path, **kwargs)
    error(lambda: read_ranking_file(tmp_path / "none.tsv", option="--data.train_file"), "none.tsv",
          "file not found", "--data.train_file")
    error(lambda: read_ranking_file(write(tmp_path / "a.xml", "")), "a.xml", "extension")


def test_missing_columns_name_the_column_and_the_header(tmp_path: Path) -> None:
    path = write(tmp_path / "a.tsv", "qid\tquestion\tpid\ttext\tlabel\nq\tQ?\tp\tP.\t1\n")
    error(lambda: read_ranking_file(path), "a.tsv, line 1", "no column 'passage'",
          "['qid', 'question', 'pid', 'text', 'label']")
    path = write(tmp_path / "a.jsonl", '{"qid": "q", "question": "Q", "pid": "p", "passage": "P", "label": 1}\n'
                                       '{"qid": "q", "question": "Q", "pid": "r", "label": 1}\n')
    error(lambda: read_ranking_file(path), "a.jsonl, line 2", "no column 'passage'")
    path = write(tmp_path / "b.jsonl", '{"qid": "q", "question": "Q", "pid": "p", "passage": "P"}\n'
                                       '{"qid": "q", "question": "Q", "pid": "r", "passage": "P", "label": 1}\n')
    error(lambda: read_ranking_file(path), "b.jsonl, line 2", "label every line or none")


@pytest.mark.parametrize(("label", "words"), [
    ("yes", ("not a number",)), ("-1", ("must be a finite number >= 0",)), ("nan", ("finite",)),
    ("", ("missing",)),
])
def test_bad_labels(tmp_path: Path, label: str, words: tuple[str, ...]) -> None:
    path = tsv(tmp_path / "a.tsv", [("q", "Q?", "p1", "P.", 1), ("q", "Q?", "p2", "P.", label)])
    error(lambda: read_ranking_file(path), "a.tsv, line 3", *words)


def test_bad_rows(tmp_path: Path) -> None:
    rows = [("q", "Q?", "p1", "A.", 1), ("r", "R?", "p1", "B.", 0), ("q", "Q?", "p1", "C.", 0)]
    dup = tsv(tmp_path / "dup.tsv", rows)
    error(lambda: read_ranking_file(dup), "dup.tsv, line 4", "duplicate", "'p1'", "line 2")
    for name, row, words in [
        ("passage", ("q", "Q?", "p", "  ", 1), ("'passage'", "empty")),
        ("question", ("q", "", "p", "P.", 1), ("'question'", "empty")),
        ("pid", ("q", "Q?", "p 1", "P.", 1), ("pid", "whitespace")),
        ("qid", ("", "Q?", "p", "P.", 1), ("qid", "empty")),
    ]:
        error(lambda row=row, name=name: read_ranking_file(tsv(tmp_path / f"{name}.tsv", [row])),
              f"{name}.tsv, line 2", *words)
    differs = tsv(tmp_path / "differs.tsv", [("q", "Q?", "p1", "A.", 1), ("q", "Other?", "p2", "B.", 0)])
    error(lambda: read_ranking_file(differs), "differs.tsv, line 3", "line 2", "one qid, one question")
    fields = write(tmp_path / "fields.tsv", HEADER + "q\tQ?\tp\tP.\n")
    error(lambda: read_ranking_file(fields), "fields.tsv, line 2", "expected 5")


def test_empty_files_and_bad_bytes(tmp_path: Path) -> None:
    error(lambda: read_ranking_file(write(tmp_path / "empty.tsv", "")), "empty.tsv, line 1", "empty")
    error(lambda: read_ranking_file(write(tmp_path / "empty.jsonl", "")), "empty.jsonl, line 1", "empty")
    error(lambda: read_ranking_file(write(tmp_path / "header.tsv", HEADER)), "header.tsv, line 2", "no data rows")
    error(lambda: read_ranking_file(write(tmp_path / "h.csv", "qid,question,pid,passage,label\r\n")),
          "h.csv, line 2", "no data rows")
    error(lambda: read_ranking_file(write(tmp_path / "none.txt", ""), columns={"qid": 0, "question": 1, "pid": 2,
                                                                            "passage": 3}), "none.txt", "empty")
    latin = write(tmp_path / "latin.tsv", HEADER.encode() + b"q\tQ?\tp\tP.\t1\nq\tQ?\tr\tcaf\xe9\t0\n")
    error(lambda: read_ranking_file(latin), "latin.tsv, line 3", "UTF-8")


def test_keep_drops_and_counts_one_sided_questions(tmp_path: Path) -> None:
    rows = [("mixed", "M?", "a", "A.", 0), ("neg", "N?", "a", "A.", 0), ("mixed", "M?", "b", "B.", 2),
            ("pos", "P?", "a", "A.", 1), ("neg", "N?", "b", "B.", 0), ("pos", "P?", "b", "B.", 3)]
    path = tsv(tmp_path / "a.tsv", rows)
    everything = read_ranking_file(path)
    assert len(everything.examples) == 6 and everything.dropped == {}
    positive = read_ranking_file(path, keep="has-positive")
    assert [(e.qid, e.pid) for e in positive.examples] == [("mixed", "a"), ("mixed", "b"), ("pos", "a"), ("pos", "b")]
    assert positive.dropped == {"no positive": 1}
    both = read_ranking_file(path, keep="has-both")  # "pos" (grades 1 and 3) has something to rank below another
    assert [(e.qid, e.pid) for e in both.examples] == [("mixed", "a"), ("mixed", "b"), ("pos", "a"), ("pos", "b")]
    assert both.dropped == {"no positive": 1, "no negative": 0}
    groups = group_questions(everything.examples)
    assert list(groups) == ["mixed", "neg", "pos"]
    assert [e.pid for e in groups["neg"]] == ["a", "b"]
    assert keep_questions(everything.examples, "all") == (everything.examples, {})
    with pytest.raises(ValueError, match="needs labels"):
        keep_questions([RankingExample("q", "Q", "p", "P", None, 5)], "has-both")
    assert KEEP == ("all", "has-positive", "has-both")


def test_has_both_means_two_grades_for_graded_labels_and_a_1_and_a_0_for_binary_ones() -> None:
    """Graded: a question whose labels are all > 0 but differ is kept, one of a single grade is not. Binary: a 1
    and a 0 are needed, as before."""
    def question(qid: str, *labels: float) -> list[RankingExample]:
        return [RankingExample(qid, f"{qid}?", f"p{i}", "P.", label, i + 1) for i, label in enumerate(labels)]

    graded = [*question("1-and-2", 1, 2, 2), *question("0-and-3", 0, 3), *question("all-2", 2, 2),
              *question("all-0", 0, 0), *question("one-3", 3)]
    kept, dropped = keep_questions(graded, "has-both")
    assert list(group_questions(kept)) == ["1-and-2", "0-and-3"]
    assert dropped == {"no positive": 1, "no negative": 2}
    binary = [*question("mixed", 0, 1), *question("all-1", 1, 1), *question("all-0", 0, 0), *question("one-1", 1)]
    kept, dropped = keep_questions(binary, "has-both")
    assert list(group_questions(kept)) == ["mixed"]
    assert dropped == {"no positive": 1, "no negative": 2}
    assert list(group_questions(keep_questions(graded, "has-positive")[0])) == ["1-and-2", "0-and-3", "all-2", "one-3"]


def test_wikiqa_folder_missing(tmp_path: Path) -> None:
    error(lambda: read_wikiqa(tmp_path, "dev"), "WikiQA-dev.tsv", "not found", "HIRE_WIKIQA_DIR")
    with pytest.raises(ValueError, match="split"):
        read_wikiqa(tmp_path, "valid")


def test_wikiqa_layout_in_any_folder(tmp_path: Path) -> None:
    header = "QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel\r\n"
    write(tmp_path / "WikiQA-test.tsv", header + "Q1\tWhy?\tD1\tT\tD1-0\tBecause.\t1\r\n"
                                                 "Q2\tHow?\tD1\tT\tD1-0\tBecause.\t0\r\n")
    result = read_wikiqa(tmp_path, "test")
    assert result.examples == [RankingExample("Q1", "Why?", "D1-0", "Because.", 1.0, 2)]
    assert result.dropped == {"no positive": 1}


@needs_wikiqa
def test_wikiqa_counts_and_keys() -> None:
    expected = {  # split: (all, has-positive, has-both) questions; rows
        "train": ((2118, 873, 857), 20360), "dev": ((296, 126, 122), 2733), "test": ((633, 243, 237), 6165)}
    for split, (questions, rows) in expected.items():
        counts = []
        for keep in KEEP:
            result = read_wikiqa(None, split, keep)
            counts.append(len(group_questions(result.examples)))
            keys = [(e.qid, e.pid) for e in result.examples]
            assert len(set(keys)) == len(keys)
            if keep == "all":
                assert len(result.examples) == rows and result.dropped == {}
                assert len({e.pid for e in result.examples}) < rows  # sentence ids alone repeat
                assert not any("\r" in e.passage or "\r" in e.question for e in result.examples)
                assert {e.label for e in result.examples} == {0.0, 1.0}
        assert tuple(counts) == questions, split


def test_a_label_too_large_for_a_float_is_a_one_line_error(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text('{"qid": "q", "question": "a?", "pid": "p", "passage": "b", "label": ' + "9" * 400 + "}\n")
    with pytest.raises(DataError, match=r"big\.jsonl.*line 1"):
        read_ranking_file(path)
