"""Bad input for ranking tasks (issue 47), through the real `hire train` and `hire predict`: each a one-line error
naming the file and line (or the option), exit status 2, nothing on disk changed (tests/badinput.py's harness);
and what is not an error, as the ranking guide documents it: questions of one label only, a very long passage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from badinput import call_hire, check_fails_cleanly

from hire.config import DataConfig
from hire.tasktype import load_task

HEADER = "qid\tquestion\tpid\tpassage\tlabel\n"
GOOD = HEADER + "".join(f"q{q}\twhat is film {q}\tp{p}\t{'a fine film' if p == q % 3 else 'a dull film'}\t"
                        f"{int(p == q % 3)}\n" for q in range(4) for p in range(3))


def tsv(*rows: str) -> str:
    return HEADER + "".join(row + "\n" for row in rows)


CASES = {
    "a duplicate (qid, pid)": (tsv("q1\tgood?\tp1\tgood fun\t1", "q1\tgood?\tp2\tbad acting\t0",
                                   "q1\tgood?\tp1\tgreat\t0"), GOOD,
                               "train.tsv, line 4: duplicate candidate: qid 'q1' pid 'p1' is on line 2 too"),
    "a label that is not a number": (tsv("q1\tgood?\tp1\tgood fun\tyes"), GOOD,
                                     "train.tsv, line 2: the label 'yes' in column 'label' is not a number"),
    "a missing column": ("qid\tquestion\tpid\ttext\tlabel\nq1\tgood?\tp1\tgood fun\t1\n", GOOD,
                         "train.tsv, line 1: no column 'passage' (the passage)"),
    "an empty passage": (tsv("q1\tgood?\tp1\t \t1", "q1\tgood?\tp2\tbad\t0"), GOOD,
                         "train.tsv, line 2: the text in column 'passage' is empty"),
    "a negative label": (tsv("q1\tgood?\tp1\tgood fun\t-1"), GOOD, "train.tsv, line 2: the label '-1'"),
    "training without a relevant candidate": (tsv("q1\tgood?\tp1\tgood fun\t0", "q2\tbad?\tp1\tbad\t0"), GOOD,
                                              "train.tsv: no candidate is relevant (label > 0)"),
    "training without an irrelevant candidate": (tsv("q1\tgood?\tp1\tgood fun\t1", "q2\tbad?\tp1\tbad\t1"), GOOD,
                                                 "train.tsv: every candidate is relevant (label > 0)"),
    "a dev file of all-negative questions only": (GOOD, tsv("q1\tgood?\tp1\tgood fun\t0", "q1\tgood?\tp2\tbad\t0"),
                                                  "dev.tsv: no question with a relevant candidate (label >= 1) to "
                                                  "score with --data.keep has-positive (dropped: 1 with no positive)"),
    "a dev label that is not a whole number": (GOOD, tsv("q1\tgood?\tp1\tgood fun\t0.5", "q1\tgood?\tp2\tbad\t1"),
                                               "dev.tsv, line 2: the label 0.5 is not a whole number"),
    "a dev file without labels": (GOOD, "qid\tquestion\tpid\tpassage\nq1\tgood?\tp1\tgood fun\n",
                                  "dev.tsv: keep='has-positive' needs labels, and the file has no label column"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_ranking_files_fail_cleanly(case: str, shared: dict[str, Path], tmp_path: Path, via: str) -> None:
    train, dev, message = CASES[case]
    (tmp_path / "train.tsv").write_text(train)
    (tmp_path / "dev.tsv").write_text(dev)
    args = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format", "ranking",
            "--data.train_file", "{tmp}/train.tsv", "--data.dev_file", "{tmp}/dev.tsv", "--model.encoder", "{enc}"]
    check_fails_cleanly(args, message, shared, tmp_path, via)


@pytest.mark.parametrize("extra, message", [
    (["--data.ranking_columns", "query=q"], "--data.ranking_columns: unknown field(s) ['query']"),
    (["--data.ranking_columns", "qid=0,question=1"], "must give ['pid', 'passage'] too"),
    (["--data.ranking_columns", "qid=question"], "--data.ranking_columns: two fields read the same column"),
    (["--data.text_columns", "a"], "--data.text_columns: only for --data.format table"),
    (["--data.tag_column", "2"], "--data.tag_column: only for token tasks"),
    (["--data.ranking_columns", "pid=page"], "train.tsv, line 1: no column 'page' (the pid)"),
])
def test_bad_ranking_options_fail_cleanly(extra: list[str], message: str, shared: dict[str, Path],
                                          tmp_path: Path, via: str) -> None:
    (tmp_path / "train.tsv").write_text(GOOD)
    (tmp_path / "dev.tsv").write_text(GOOD)
    args = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format", "ranking",
            "--data.train_file", "{tmp}/train.tsv", "--data.dev_file", "{tmp}/dev.tsv", "--model.encoder", "{enc}",
            *extra]
    check_fails_cleanly(args, message, shared, tmp_path, via)


def test_pairwise_without_a_pair_fails_before_the_run_folder(shared: dict[str, Path], tmp_path: Path) -> None:
    """Every training question holds one label only: the pairwise loss has nothing to rank (pointwise trains)."""
    (tmp_path / "train.tsv").write_text(tsv("q1\tgood?\tp1\tgood fun\t1", "q2\tbad?\tp1\tbad\t0"))
    (tmp_path / "dev.tsv").write_text(GOOD)
    args = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format", "ranking",
            "--data.train_file", "{tmp}/train.tsv", "--data.dev_file", "{tmp}/dev.tsv", "--model.encoder", "{enc}",
            "--train.rank_loss", "pairwise"]
    check_fails_cleanly(args, "--train.rank_loss pairwise: no training question has candidates of different "
                        "labels", shared, tmp_path)


def test_questions_of_one_label_are_kept_or_dropped_as_documented(tmp_path: Path) -> None:
    """Training keeps every question; evaluation keeps those of --data.keep: has-positive drops the all-negative
    question, has-both the all-positive one too, all keeps both."""
    mixed = tsv("q1\ta?\tp1\tyes\t1", "q1\ta?\tp2\tno\t0", "q2\tb?\tp1\tno\t0", "q2\tb?\tp2\tno\t0",
                "q3\tc?\tp1\tyes\t1", "q3\tc?\tp2\tyes\t1")
    for name in ("train.tsv", "dev.tsv"):
        (tmp_path / name).write_text(mixed)
    kept = {}
    for keep in ("has-positive", "has-both", "all"):
        task = load_task(DataConfig(task="custom", format="ranking", train_file=str(tmp_path / "train.tsv"),
                                    dev_file=str(tmp_path / "dev.tsv"), keep=keep))  # type: ignore[arg-type]
        assert {ex.qid for ex in task.train} == {"q1", "q2", "q3"}
        kept[keep] = sorted({ex.qid for ex in task.dev["dev"]})
    assert kept == {"has-positive": ["q1", "q3"], "has-both": ["q1"], "all": ["q1", "q2", "q3"]}


def test_a_10000_word_passage_is_cut_with_a_warning_that_counts(shared: dict[str, Path], tmp_path: Path) -> None:
    long = " ".join(["film"] * 10_000)
    (tmp_path / "train.tsv").write_text(GOOD + f"q9\tgood?\tp1\t{long}\t1\nq9\tgood?\tp2\tbad\t0\n")
    (tmp_path / "dev.tsv").write_text(GOOD)
    result = call_hire(["train", "--output_dir", str(tmp_path / "run"), "--data.task", "custom", "--data.format",
                        "ranking", "--data.train_file", str(tmp_path / "train.tsv"), "--data.dev_file",
                        str(tmp_path / "dev.tsv"), "--model.encoder", str(shared["enc"]), "--train.max_steps", "1",
                        "--train.mixed_precision", "no", "--data.max_length", "32"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    warned = [line for line in result.stderr.splitlines() if "warning:" in line]
    assert warned == ["hire train: warning: 1 of 14 passages were cut short to fit --data.max_length 32 tokens "
                      "together with their question"]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["dev"]["dev"]["questions"] == 4


def test_hire_predict_reports_a_bad_candidates_file(shared: dict[str, Path], tmp_path: Path) -> None:
    """A ranker's input with a bad line: one line naming it, before the model loads, nothing written."""
    from hire import build_model, load_tokenizer

    model = build_model(str(shared["enc"]), "last-layer", num_labels=1, task_type="ranking")
    model.save_pretrained(tmp_path / "ranker", load_tokenizer(str(shared["enc"])))
    (tmp_path / "input.tsv").write_text(tsv("q1\tgood?\tp1\tgood fun\t1", "q1\tgood?\tp1\tbad\t0"))
    before = sorted(p.name for p in tmp_path.iterdir())
    result = call_hire(["predict", "--model", str(tmp_path / "ranker"), "--input", str(tmp_path / "input.tsv")],
                       tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("hire predict: error: ")
    assert "input.tsv, line 3: duplicate candidate" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    result = call_hire(["predict", "--model", str(tmp_path / "ranker"), "--input", str(tmp_path / "input.tsv"),
                        "--text_columns", "a"], tmp_path)
    assert result.returncode == 2 and "--text_columns/--label_column: for a sentence model" in result.stderr
