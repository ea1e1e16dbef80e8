"""Tests for the GLUE reader (real shipped files and written official-format files) and read_table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hire.config import DataConfig
from hire.data import (
    GLUE_TASKS,
    DataError,
    Example,
    TaskSpec,
    default_glue_dir,
    get_task,
    infer_label_names,
    read_glue_split,
    read_table,
    task_text_columns,
)
from hire.tasktype import load_task

GLUE_DIR = default_glue_dir()
needs_glue = pytest.mark.skipif(
    not GLUE_DIR.is_dir(), reason=f"shared GLUE data not found at {GLUE_DIR} (set HIRE_GLUE_DIR)"
)

# Row counts from /work/shared/data/README.md.
SHIPPED = {
    "CoLA": {"train": 8551, "dev": 1043, "test": 1063},
    "SST-2": {"train": 67349, "dev": 872, "test": 1821},
    "MRPC": {"train": 3668, "dev": 408, "test": 1725},
    "STS-B": {"train": 5749, "dev": 1500, "test": 1379},
    "RTE": {"train": 2490, "dev": 277, "test": 3000},
    "WNLI": {"train": 635, "dev": 71, "test": 146},
    "QNLI": {"dev": 5463, "test": 5463},
    "AX": {"test": 1104},
}
SHIPPED_COUNTS = [(task, split, count) for task, splits in SHIPPED.items() for split, count in splits.items()]


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def assert_error(call, file_name: str, line: int | None, *words: str) -> str:
    """Run ``call``; it must raise DataError naming the file, the line and the given words."""
    with pytest.raises(DataError) as info:
        call()
    message = str(info.value)
    assert file_name in message
    if line is not None:
        assert f"line {line}:" in message
    for word in words:
        assert word in message
    return message


# ---------------------------------------------------------------- task specs


def test_get_task_accepts_spellings() -> None:
    assert get_task("sst2") is GLUE_TASKS["SST-2"]
    assert get_task("STS_B").name == get_task("stsb").name == get_task("sts-b").name == "STS-B"
    assert get_task("mnli").name == "MNLI"
    assert get_task("ax") is get_task("diagnostic") is GLUE_TASKS["AX"]
    with pytest.raises(DataError, match=r"'squad'.*CoLA.*WNLI"):
        get_task("squad")


def test_task_specs() -> None:
    assert set(GLUE_TASKS) == {"CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI", "AX"}
    assert all(isinstance(spec, TaskSpec) for spec in GLUE_TASKS.values())
    assert GLUE_TASKS["STS-B"].is_regression and GLUE_TASKS["STS-B"].labels is None
    assert not GLUE_TASKS["CoLA"].is_regression
    assert GLUE_TASKS["MNLI"].labels == ("contradiction", "entailment", "neutral")
    assert GLUE_TASKS["RTE"].labels == ("entailment", "not_entailment")
    metrics = {name: spec.metrics for name, spec in GLUE_TASKS.items()}
    assert metrics["CoLA"] == ("mcc",) and metrics["AX"] == ("mcc",)
    assert metrics["MRPC"] == metrics["QQP"] == ("accuracy", "f1")
    assert metrics["STS-B"] == ("pearson", "spearman")
    mnli = GLUE_TASKS["MNLI"]
    assert mnli.dev_splits == ("dev_matched", "dev_mismatched")
    assert mnli.submission_files == {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}
    ax = GLUE_TASKS["AX"]
    assert (ax.folder, ax.splits, ax.dev_splits, ax.submission_files) == (
        "diagnostic",
        {"test": "diagnostic.tsv"},
        (),
        {"test": "AX.tsv"},
    )
    for spec in GLUE_TASKS.values():
        assert set(spec.submission_files) == set(spec.test_splits)
        assert set(spec.dev_splits) | set(spec.test_splits) <= set(spec.splits)
    assert hash(GLUE_TASKS["CoLA"]) == hash(get_task("cola"))


def test_default_glue_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HIRE_GLUE_DIR", str(tmp_path))
    assert default_glue_dir() == tmp_path
    monkeypatch.delenv("HIRE_GLUE_DIR", raising=False)
    assert default_glue_dir().parts[-3:] == ("shared", "data", "glue")


# ---------------------------------------------------------------- the shipped real files


@needs_glue
@pytest.mark.parametrize(("task", "split", "count"), SHIPPED_COUNTS)
def test_shipped_split(task: str, split: str, count: int) -> None:
    spec = get_task(task)
    examples = read_glue_split(spec, split, GLUE_DIR)
    assert len(examples) == count
    assert len({example.guid for example in examples}) == count
    assert all(example.text_a.strip() for example in examples)
    pair = spec.name not in ("CoLA", "SST-2")
    assert all((example.text_b is not None) == pair for example in examples)
    labels = [example.label for example in examples]
    if split in spec.test_splits:
        assert all(label is None for label in labels)
        assert examples[0].guid == "0"  # the index column
    elif spec.is_regression:
        assert all(isinstance(label, float) and 0.0 <= label <= 5.0 for label in labels)
    else:
        assert set(labels) == set(spec.labels or ())


@needs_glue
def test_mrpc_bom_and_guid() -> None:
    raw = (GLUE_DIR / "MRPC" / "train.tsv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # the shipped file really has a BOM
    first = read_glue_split("mrpc", "train", GLUE_DIR)[0]
    # Read only if the BOM was dropped: the label column is then found under its name "Quality".
    assert first.label == "1" and first.text_a.startswith("Amrozi accused his brother")
    assert first.guid == "0"


@needs_glue
def test_cola_no_header_and_no_final_newline() -> None:
    train = read_glue_split("cola", "train", GLUE_DIR)
    assert train[0] == Example(
        "0", "Our friends won't buy this analysis, let alone the next one we propose.", None, "1"
    )
    raw = (GLUE_DIR / "CoLA" / "dev.tsv").read_text(encoding="utf-8")
    assert not raw.endswith("\n")
    dev = read_glue_split("cola", "dev", GLUE_DIR)
    assert dev[-1].text_a == raw.rsplit("\n", 1)[-1].split("\t")[3]
    assert dev[-1].label in ("0", "1")


@needs_glue
def test_stsb_scores_are_floats() -> None:
    dev = read_glue_split("sts-b", "dev", GLUE_DIR)
    assert dev[0].label == 5.0 and dev[0].text_b == "A man wearing a hard hat is dancing."


# ---------------------------------------------------------------- MNLI and QQP (official formats)

MNLI_TRAIN_HEAD = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
)
MNLI_DEV_HEAD = MNLI_TRAIN_HEAD.replace(
    "label1\tgold_label", "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"
)
MNLI_TEST_HEAD = MNLI_TRAIN_HEAD.replace("\tlabel1\tgold_label", "")


def mnli_row(index: int, s1: str, s2: str, labels: list[str]) -> str:
    return "\t".join(
        [str(index), "31193", "31193n", "fiction", "( x )", "( y )", "(ROOT x)", "(ROOT y)", s1, s2, *labels]
    )


def write_mnli(root: Path) -> None:
    folder = root / "MNLI"
    write(
        folder / "train.tsv",
        MNLI_TRAIN_HEAD
        + mnli_row(0, 'He said "hi.', "He spoke.", ["entailment", "entailment"])
        + "\n"
        + mnli_row(1, "It rained.", 'It was "dry.', ["contradiction", "contradiction"])
        + "\n",
    )
    for name, s1 in (("dev_matched", "Matched premise."), ("dev_mismatched", "Mismatched premise.")):
        write(
            folder / f"{name}.tsv", MNLI_DEV_HEAD + mnli_row(7, s1, "A hypothesis.", ["neutral"] * 6) + "\n"
        )
    for name in ("test_matched", "test_mismatched"):
        write(folder / f"{name}.tsv", MNLI_TEST_HEAD + mnli_row(42, name, "A test hypothesis.", []) + "\n")


def test_mnli_official_format(tmp_path: Path) -> None:
    write_mnli(tmp_path)
    train = read_glue_split("MNLI", "train", tmp_path)
    assert train == [
        Example("0", 'He said "hi.', "He spoke.", "entailment"),
        Example("1", "It rained.", 'It was "dry.', "contradiction"),
    ]
    matched = read_glue_split("mnli", "dev_matched", tmp_path)
    mismatched = read_glue_split("mnli", "dev_mismatched", tmp_path)
    assert matched == [Example("7", "Matched premise.", "A hypothesis.", "neutral")]
    assert mismatched[0].text_a == "Mismatched premise."
    for name in ("test_matched", "test_mismatched"):
        assert read_glue_split("mnli", name, tmp_path) == [Example("42", name, "A test hypothesis.", None)]


def test_qqp_official_format(tmp_path: Path) -> None:
    head = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
    write(tmp_path / "QQP" / "train.tsv", head + '201359\t303345\t303346\tWhy "are\tHow to?\t0\n')
    write(tmp_path / "QQP" / "dev.tsv", head + "5\t11\t12\tA?\tB?\t1\n6\t13\t14\tC?\tD?\t0\n")
    write(tmp_path / "QQP" / "test.tsv", "id\tquestion1\tquestion2\n0\tQ one?\tQ two?\n")
    assert read_glue_split("qqp", "train", tmp_path) == [Example("201359", 'Why "are', "How to?", "0")]
    assert [e.label for e in read_glue_split("qqp", "dev", tmp_path)] == ["1", "0"]
    assert read_glue_split("qqp", "test", tmp_path) == [Example("0", "Q one?", "Q two?", None)]


def test_mrpc_bom_in_written_file(tmp_path: Path) -> None:
    head = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    write(tmp_path / "MRPC" / "dev.tsv", head + '0\t1\t2\tA " b .\tC .\n', encoding="utf-8-sig")
    assert read_glue_split("mrpc", "dev", tmp_path) == [Example("0", 'A " b .', "C .", "0")]


def test_crlf_line_endings(tmp_path: Path) -> None:
    write(tmp_path / "RTE" / "dev.tsv", "index\tsentence1\tsentence2\tlabel\r\n0\tA.\tB.\tentailment\r\n")
    assert read_glue_split("rte", "dev", tmp_path) == [Example("0", "A.", "B.", "entailment")]


# ---------------------------------------------------------------- GLUE errors

RTE_HEAD = "index\tsentence1\tsentence2\tlabel\n"


def test_missing_data_and_bad_split(tmp_path: Path) -> None:
    assert_error(
        lambda: read_glue_split("rte", "dev", tmp_path), "RTE", None, "'dev'", "--data.data_dir", "HIRE_GLUE_DIR"
    )
    (tmp_path / "RTE").mkdir()
    assert_error(lambda: read_glue_split("rte", "dev", tmp_path), "dev.tsv", None, "--data.data_dir")
    assert_error(
        lambda: read_glue_split("rte", "validation", tmp_path), "validation", None, "train, dev, test"
    )
    assert_error(lambda: read_glue_split("mnli", "dev", tmp_path), "dev_matched", None)


@pytest.mark.parametrize(
    ("task", "text", "line", "words"),
    [
        ("rte", "", 1, ["empty"]),
        ("cola", "", 1, ["empty"]),
        ("rte", RTE_HEAD, 2, ["no data rows"]),
        ("rte", "index\tsentence1\tlabel\n", 1, ["sentence2"]),
        ("rte", RTE_HEAD + "0\tA.\tB.\tentailment\n1\tA.\tentailment\n", 3, ["expected 4", "found 3"]),
        ("rte", RTE_HEAD + '0\t"A.\tB."\tentailment\t\n', 2, ["expected 4", "found 5"]),
        ("rte", RTE_HEAD + "0\tA.\tB.\tentailment\n\n1\tA.\tB.\tentailment\n", 3, ["empty"]),
        ("rte", RTE_HEAD + "0\tA.\tB.\tentailment\n1\tA.\tB.\tmaybe\n", 3, ["'maybe'", "not_entailment"]),
        ("rte", RTE_HEAD + "0\tA.\t \tentailment\n", 2, ["sentence2", "empty"]),
        ("cola", "gj04\t1\t\tGood.\ngj04\t2\t\tBad.", 2, ["'2'"]),
        ("cola", "gj04\t1\t\t\n", 1, ["column 4", "empty"]),
        ("sts-b", "index\tsentence1\tsentence2\tscore\n0\tA.\tB.\thigh\n", 2, ["'high'", "not a number"]),
        ("sts-b", "index\tsentence1\tsentence2\tscore\n0\tA.\tB.\t7.5\n", 2, ["[0, 5]"]),
    ],
)
def test_glue_errors(tmp_path: Path, task: str, text: str, line: int, words: list[str]) -> None:
    spec = get_task(task)
    write(tmp_path / spec.folder / "dev.tsv", text)
    assert_error(lambda: read_glue_split(spec, "dev", tmp_path), "dev.tsv", line, *words)


def test_glue_invalid_utf8_names_the_right_line(tmp_path: Path) -> None:
    # The bad byte sits far past the reader's first decoded block, so the line must be re-located.
    rows = "".join(f"{i}\tSentence {i}.\tOther.\tentailment\n" for i in range(3000))
    path = write(tmp_path / "RTE" / "train.tsv", RTE_HEAD + rows)
    path.write_bytes(path.read_bytes() + b"3000\tBad \xff byte.\tOther.\tentailment\n")
    assert_error(lambda: read_glue_split("rte", "train", tmp_path), "train.tsv", 3002, "UTF-8")


def test_test_split_needs_index(tmp_path: Path) -> None:
    write(tmp_path / "RTE" / "test.tsv", "index\tsentence1\tsentence2\n\tA.\tB.\n")
    assert_error(lambda: read_glue_split("rte", "test", tmp_path), "test.tsv", 2)


# ---------------------------------------------------------------- read_table


def test_read_table_formats(tmp_path: Path) -> None:
    csv_path = write(
        tmp_path / "d.csv", 'id,premise,hypothesis,label\na1,"One, two","Say ""hi""\nthere",yes\n'
    )
    assert read_table(csv_path, ["premise", "hypothesis"], "label") == [
        Example("a1", "One, two", 'Say "hi"\nthere', "yes")
    ]
    tsv_path = write(tmp_path / "d.tsv", 'text\tscore\n"quoted\t2.5\nplain\t1\n')
    assert read_table(tsv_path, ["text"], "score", regression=True) == [
        Example("0", '"quoted', None, 2.5),
        Example("1", "plain", None, 1.0),
    ]
    lines = [{"idx": 3, "text": "a", "label": 1}, {"idx": 4, "text": "b", "label": True}]
    json_path = write(tmp_path / "d.json", "\n".join(json.dumps(x) for x in lines) + "\n")
    assert [(e.guid, e.label) for e in read_table(json_path, ["text"], "label")] == [
        ("3", "1"),
        ("4", "True"),
    ]
    txt_path = write(tmp_path / "d.txt", "\ufeffsentence\n\u00e9t\u00e9\n")
    assert read_table(txt_path, ["sentence"], None) == [Example("0", "\u00e9t\u00e9")]


def test_read_table_optional_labels(tmp_path: Path) -> None:
    path = write(tmp_path / "u.jsonl", '{"text": "a"}\n{"text": "b"}\n')
    examples = read_table(path, ["text"], "label", require_label=False)
    assert [e.label for e in examples] == [None, None]
    path = write(tmp_path / "u.csv", "text,label\na,\nb,pos\n")
    assert [e.label for e in read_table(path, ["text"], "label", require_label=False)] == [None, "pos"]


@pytest.mark.parametrize(
    ("name", "text", "line", "words", "kwargs"),
    [
        ("d.xlsx", "x", None, ["'.xlsx'", ".csv"], {}),
        ("d.csv", "", 1, ["empty"], {}),
        ("d.jsonl", "", 1, ["empty"], {}),
        ("d.csv", "sentence,label\na,1\n", 1, ["'text'", "'sentence'"], {}),
        ("d.tsv", "text\tlabel\na\t1\nb\n", 3, ["expected 2", "found 1"], {}),
        ("d.csv", "text,label\na,1\nb,1,2\n", 3, ["expected 2", "found 3"], {}),
        ("d.jsonl", '{"text": "a", "label": 1}\n{"text": "b", label}\n', 2, ["invalid JSON"], {}),
        ("d.json", '[{"text": "a", "label": 1}]\n', 1, ["JSON array"], {}),
        ("d.jsonl", '{"text": "a", "label": 1}\n{"label": 1}\n', 2, ["'text'"], {}),
        ("d.csv", "text,label\na,0.5\nb,lots\n", 3, ["'lots'", "not a number"], {"regression": True}),
        ("d.csv", "text,label\na,1\n ,0\n", 3, ["'text'", "empty"], {}),
        ("d.csv", "text,label\na,1\nb,\n", 3, ["label", "missing"], {}),
        ("d.jsonl", '{"text": "a", "label": null}\n', 1, ["label", "missing"], {}),
        ("d.csv", "text,label\n", 2, ["no data rows"], {}),
    ],
)
def test_read_table_errors(
    tmp_path: Path, name: str, text: str, line: int | None, words: list[str], kwargs: dict
) -> None:
    path = write(tmp_path / name, text)
    assert_error(lambda: read_table(path, ["text"], "label", **kwargs), name, line, *words)


def test_read_table_reads_a_csv_field_of_10_mb(tmp_path: Path) -> None:
    """A long document in one quoted cell is valid CSV: it is read whole, not called "malformed" at Python's csv
    limit of 128 KiB; the process's own limit is left as it was, and a broken row still names its line."""
    document = "a long, quoted document\n" * 440_000  # 10.1 MB, commas and line breaks inside the quotes
    path = write(tmp_path / "long.csv", f'text,label\n"{document}",pos\nshort,neg\n')
    limit = csv.field_size_limit()
    examples = read_table(path, ["text"], "label")
    assert [len(e.text_a) for e in examples] == [len(document), 5] and examples[0].text_a == document
    assert [e.label for e in examples] == ["pos", "neg"]
    assert csv.field_size_limit() == limit
    lines = 10_000  # 240 KB over lines 2 to 10,002; the broken row begins on the next line
    broken = write(tmp_path / "broken.csv", f'text,label\n"{document[: 24 * lines]}",pos\n"open,neg\nx"y,pos\n')
    assert_error(lambda: read_table(broken, ["text"], "label"), "broken.csv", lines + 3, "malformed CSV")
    assert csv.field_size_limit() == limit


def test_read_table_invalid_utf8_and_bad_options(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"text,label\nok,1\nbad \xe9,0\n")
    assert_error(lambda: read_table(path, ["text"], "label"), "bad.csv", 3, "UTF-8")
    with pytest.raises(DataError, match="text_columns"):
        read_table(path, ["a", "b", "c"], "label")


def test_infer_label_names() -> None:
    examples = [Example(str(i), "t", None, label) for i, label in enumerate(["10", "2", "1", "2", None])]
    assert infer_label_names(examples) == ("1", "2", "10")
    assert infer_label_names([Example("0", "t", None, "pos"), Example("1", "t", None, "neg")]) == (
        "neg",
        "pos",
    )
    with pytest.raises(DataError):
        infer_label_names([Example("0", "t", None, 0.5)])


# ---------------------------------------------------------------- labels of evaluation files, custom tasks


def test_read_table_refuses_labels_outside_the_known_set(tmp_path: Path) -> None:
    path = write(tmp_path / "dev.csv", "text,label\na,pos\nb,neg\nc,positive\n")
    assert_error(lambda: read_table(path, ["text"], "label", labels=["neg", "pos"]), "dev.csv", 4,
                 "'positive'", "['neg', 'pos']", "the training file")
    assert len(read_table(path, ["text"], "label", labels=["neg", "pos", "positive"])) == 3
    unlabelled = write(tmp_path / "test.csv", "text,label\na,\nb,pos\n")  # empty labels are not typos
    assert [e.label for e in read_table(unlabelled, ["text"], "label", require_label=False, labels=["pos"])] == [
        None, "pos"]
    with pytest.raises(DataError, match="'label' is also the label column"):
        read_table(path, ["label"], "label")


def custom_task(tmp_path: Path, dev: str, test: str | None = None, train_rows: str = "a,pos\nb,neg\nc,pos\n",
                **options) -> DataConfig:
    train = write(tmp_path / "train.csv", "text,label\n" + train_rows)
    paths = {"dev_file": str(write(tmp_path / "dev.csv", dev))}
    if test is not None:
        paths["test_file"] = str(write(tmp_path / "test.csv", test))
    return DataConfig(task="custom", train_file=str(train), text_columns=["text"], **paths, **options)


def test_custom_task_evaluation_labels_must_be_training_labels(tmp_path: Path) -> None:
    task = load_task(custom_task(tmp_path, "text,label\nd,neg\n", "text,label\ne,\nf,pos\n"))
    assert task.label_names == ["neg", "pos"] and len(task.test["test"]) == 2
    assert_error(lambda: load_task(custom_task(tmp_path, "text,label\nd,neg\ne,Pos\n")), "dev.csv", 3, "'Pos'",
                 "train.csv")
    assert_error(lambda: load_task(custom_task(tmp_path, "text,label\nd,neg\n", "text,label\ne,positive\n")),
                 "test.csv", 2, "'positive'", "train.csv")
    # With --data.max_train_examples the labels are those of the rows used, and the message says so.
    assert_error(lambda: load_task(custom_task(tmp_path, "text,label\nd,neutral\n", max_train_examples=2,
                                               train_rows="a,pos\nb,neg\nc,neutral\n")),
                 "dev.csv", 2, "'neutral'", "its first 2 rows")


@pytest.mark.parametrize("option", ["max_train_examples", "max_eval_examples"])
def test_negative_example_limits_are_errors_not_rows_dropped_from_the_end(tmp_path: Path, option: str) -> None:
    with pytest.raises(DataError, match=f"--data.{option}: must be >= 1, not -1"):
        load_task(custom_task(tmp_path, "text,label\nd,neg\n", **{option: -1}))


def test_task_text_columns() -> None:
    assert task_text_columns("CoLA") == ("sentence",) and task_text_columns("sst2") == ("sentence",)
    assert task_text_columns("RTE") == ("sentence1", "sentence2")
    assert all(1 <= len(task_text_columns(name)) <= 2 for name in GLUE_TASKS)


@pytest.mark.parametrize("dev", ["text,label\nd,0.5\n", "text,label\nd,0.5\ne,0.5\n"], ids=["one-row", "one-score"])
def test_a_regression_dev_file_needs_two_different_scores(tmp_path: Path, dev: str) -> None:
    """Pearson and Spearman of one row (or of one repeated score) are NaN: the run would pick and report nothing."""
    (tmp_path / "train.csv").write_text("text,label\na,0.1\nb,0.9\n")
    (tmp_path / "dev.csv").write_text(dev)
    cfg = DataConfig(task="custom", train_file=str(tmp_path / "train.csv"), dev_file=str(tmp_path / "dev.csv"),
                     text_columns=["text"], regression=True)
    message = r"^--data.dev_file \S+dev\.csv: one score \(0\.5\) in its [12] rows?; .* at least two different scores$"
    with pytest.raises(DataError, match=message):
        load_task(cfg)
    (tmp_path / "dev.csv").write_text("text,label\nd,0.5\ne,0.7\n")
    assert len(load_task(cfg).dev["dev"]) == 2
