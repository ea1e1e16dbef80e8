"""Issue 73's hostile pass on `hire predict` / `hire evaluate` / `hire train` reporting and the data readers: CoNLL
files named ``.txt`` read as columns, gold tags kept and scored, a gold column in any scheme, "fp32", raw text's
lines, a ranking header under column indices, lower-case tags, schemes across files, document context without
documents, evaluate's splits and messages, JSONL and CoNLL-U messages, a custom task's name, the held-out score
printed, and `hire features`' prediction files. Each case fails on main at 6b08168."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from badinput import call_hire, check_fails_cleanly

from hire import build_model, load_tokenizer
from hire.config import DataConfig
from hire.data.conll import read_token_file
from hire.data.conllu import read_conllu
from hire.data.examples import DataError, TokenExample
from hire.data.ranking import read_ranking_file
from hire.metrics import entity_scores, token_accuracy
from hire.tasktype import load_task

TAGS = ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
CONLL_TAGS = ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]
LABELLED = "Anna B-PER\nlives O\nin O\nParis B-LOC\n\nBob B-PER\nSmith I-PER\nruns O\n"


def save_tagger(folder: Path, encoder: Path, tags: list[str], **options: str) -> Path:
    model = build_model(str(encoder), head="last-layer", num_labels=len(tags), label_names=tags, task_type="token",
                        task_options={"scheme": "iob2", "context": "sentence", "tag_column": None, **options})
    model.save_pretrained(folder, load_tokenizer(str(encoder)))
    return folder


@pytest.fixture(scope="module")
def models(shared: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("taggers")
    return {"tagger": save_tagger(root / "tagger", shared["enc"], TAGS),
            "pos": save_tagger(root / "pos", shared["enc"], ["DT", "NN", "VB"], scheme="none"),
            "document": save_tagger(root / "document", shared["enc"], TAGS, context="document"),
            "conll": save_tagger(root / "conll", shared["enc"], CONLL_TAGS),
            "single": shared["single"]}


def predict(model: Path, path: Path, *extra: str) -> tuple[object, list[dict]]:
    """`hire predict` in this process: the result, and the rows it wrote."""
    output = path.with_name(path.name + ".out.jsonl")
    result = call_hire(["predict", "--model", str(model), "--input", str(path), "--output", str(output), *extra],
                       path.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, [json.loads(line) for line in output.read_text().splitlines()]


def printed_metrics(stdout: str) -> dict | None:
    start = stdout.find("{")
    return json.loads(stdout[start:]) if start >= 0 else None


# -- 1. a CoNLL file named .txt is read as columns, by content ----------------------------------------------------
CONLL_TXT = {
    "two columns": LABELLED,
    "CoNLL-2003's layout": "-DOCSTART- -X- -X- O\n\n" + "".join(
        f"{line.split()[0]} NNP B-NP {line.split()[1]}\n" if line else "\n" for line in LABELLED.splitlines()),
    "tab separated": LABELLED.replace(" ", "\t"),
    "lower-case tags": LABELLED.lower(),
    "a tag the model lacks": LABELLED.replace("B-LOC", "B-ORG"),
}


@pytest.mark.parametrize("case", list(CONLL_TXT))
def test_a_conll_file_named_txt_is_read_as_columns(case: str, models: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "valid.txt"
    path.write_text(CONLL_TXT[case])
    result, rows = predict(models["tagger"], path)
    assert "read as CoNLL columns" in result.stdout
    assert "2 sentences (7 words)" in result.stdout
    assert [len(row["tokens"]) for row in rows] == [4, 3]
    assert rows[0]["tokens"][0].lower() == "anna" and all(row["tags"] is not None for row in rows)


@pytest.mark.parametrize("text", ["Anna lives\nBob runs\n", "I saw O\nwe went home at last\n"])
def test_running_text_named_txt_stays_text(text: str, models: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text(text)
    result, rows = predict(models["tagger"], path)
    assert "CoNLL" not in result.stdout
    assert [row["tokens"] for row in rows] == [line.split() for line in text.splitlines()]
    assert all(row["tags"] is None for row in rows)


def test_format_text_reads_a_columns_txt_as_text(models: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text(LABELLED)
    _, rows = predict(models["tagger"], path, "--format", "text")
    assert len(rows) == 7 and rows[0]["tokens"] == ["Anna", "B", "-", "PER"]


# -- 2, 3. gold tags kept and scored, in whatever scheme -----------------------------------------------------------
def _tokens_jsonl(text: str) -> str:
    sentences = [s.splitlines() for s in text.strip().split("\n\n")]
    return "".join(json.dumps({"tokens": [w.split()[0] for w in s], "tags": [w.split()[1] for w in s]}) + "\n"
                   for s in sentences)


@pytest.mark.parametrize("name, text", [("in.conll", LABELLED), ("in.jsonl", _tokens_jsonl(LABELLED)),
                                        ("in.txt", LABELLED)])
def test_a_labelled_input_keeps_its_gold_tags_and_is_scored(name: str, text: str, models: dict[str, Path],
                                                            tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(text)
    result, rows = predict(models["tagger"], path)
    gold = [row["tags"] for row in rows]
    assert gold == [["B-PER", "O", "O", "B-LOC"], ["B-PER", "I-PER", "O"]]
    metrics = printed_metrics(result.stdout)
    assert metrics is not None and metrics["words"] == 7
    expected = entity_scores(gold, [row["prediction"] for row in rows])
    assert metrics["f1"] == pytest.approx(expected["f1"]) and metrics["score"] == metrics["f1"]


@pytest.mark.parametrize("scheme, text", [
    ("iob1", "Anna I-PER\nlives O\nin O\nParis I-LOC\n\nBob I-PER\nSmith I-PER\nruns O\n"),
    ("bioes", "Anna S-PER\nlives O\nin O\nParis S-LOC\n\nBob B-PER\nSmith E-PER\nruns O\n"),
])
def test_an_unused_gold_column_in_any_scheme_is_read(scheme: str, text: str, models: dict[str, Path],
                                                     tmp_path: Path) -> None:
    path = tmp_path / "in.conll"
    path.write_text(text)
    result, rows = predict(models["tagger"], path)
    assert [row["tags"] for row in rows] == [["B-PER", "O", "O", "B-LOC"], ["B-PER", "I-PER", "O"]]
    assert printed_metrics(result.stdout) is not None


def test_gold_tags_of_no_scheme_are_kept_but_not_scored(models: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "in.conll"
    path.write_text("Anna I-PER\nlives O\n\nBob O\nSmith B-PER\n")  # IOB1 then IOB2: no scheme fits
    result, rows = predict(models["tagger"], path)
    assert "its tags are not scored" in result.stderr and printed_metrics(result.stdout) is None
    assert [row["tags"] for row in rows] == [["I-PER", "O"], ["O", "B-PER"]]


def test_a_pos_tagger_scores_plain_gold_tags_by_accuracy(models: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "in.conll"
    path.write_text("the DT\nfilm NN\nruns VB\n")
    result, rows = predict(models["pos"], path)
    metrics = printed_metrics(result.stdout)
    assert metrics is not None and set(metrics) == {"accuracy", "words", "score"}
    assert metrics["accuracy"] == pytest.approx(token_accuracy([rows[0]["tags"]], [rows[0]["prediction"]]))


# -- 4. fp32 is named so ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, name, text", [("tagger", "in.txt", "a fine film\n"),
                                               ("single", "in.csv", "sentence\na fine film\n")])
def test_fp32_is_called_fp32(model: str, name: str, text: str, models: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(text)
    result, _ = predict(models[model], path)
    assert "(fp32, batch 64)" in result.stdout and "no precision" not in result.stdout


# -- 5. raw text: lines end at \n alone, a byte-order mark is dropped ------------------------------------------
@pytest.mark.parametrize("raw, lines", [
    (b"\xef\xbb\xbfAnna lives\nBob runs\n", [["Anna", "lives"], ["Bob", "runs"]]),
    ("Anna lives\u2028in Paris\n".encode(), [["Anna", "lives", "in", "Paris"]]),
    (b"Anna lives\x0cin Paris\n", [["Anna", "lives", "in", "Paris"]]),
    ("Anna lives\u0085in Paris\n".encode(), [["Anna", "lives", "in", "Paris"]]),
    (b"Anna lives\x0bin Paris\n", [["Anna", "lives", "in", "Paris"]]),
    (b"Anna lives\r\nBob runs\r\n", [["Anna", "lives"], ["Bob", "runs"]]),
])
def test_raw_text_lines_end_at_newlines_only(raw: bytes, lines: list[list[str]], models: dict[str, Path],
                                             tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(raw)
    _, rows = predict(models["tagger"], path)
    assert [row["tokens"] for row in rows] == lines


# -- 6. a header row under column indices ------------------------------------------------------------------------
INDEXED = {"qid": 0, "question": 1, "pid": 2, "passage": 3}


@pytest.mark.parametrize("header, columns", [
    ("qid\tquestion\tpid\tpassage", INDEXED),
    ("QuestionID\tQuestion\tSentenceID\tSentence", INDEXED),
    ("q\tquery text\tp\ttext\tlabel", {**INDEXED, "label": 4}),
])
def test_a_header_under_column_indices_is_refused(header: str, columns: dict, tmp_path: Path) -> None:
    path = tmp_path / "cands.tsv"
    rows = ["q1\twho?\tp1\tAnna" + ("\t1" if "label" in columns else ""),
            "q1\twho?\tp2\tBob" + ("\t0" if "label" in columns else "")]
    path.write_text("\n".join([header, *rows]) + "\n")
    with pytest.raises(DataError, match=r"cands.tsv, line 1: this line looks like a header"):
        read_ranking_file(path, columns=columns)


def test_a_file_without_a_header_reads_every_line_under_indices(tmp_path: Path) -> None:
    path = tmp_path / "cands.tsv"
    path.write_text("q1\twhat is a question?\tp1\tthe passage\nq1\twhat is a question?\tp2\ttext here\n")
    assert len(read_ranking_file(path, columns=INDEXED).examples) == 2


# -- 7. lower-case IOB tags are entities ----------------------------------------------------------------------
@pytest.mark.parametrize("text, scheme, tags", [
    ("Anna b-per\nSmith i-per\nlives o\n", "iob2", ("B-per", "I-per", "O")),
    ("Anna i-per\nSmith i-per\nlives o\n", "iob1", ("B-per", "I-per", "O")),
    ("Anna s-per\nlives o\n", "bioes", ("B-per", "O")),
])
def test_lower_case_prefixes_are_chunk_tags(text: str, scheme: str, tags: tuple, tmp_path: Path) -> None:
    path = tmp_path / "a.conll"
    path.write_text(text)
    read = read_token_file(path)
    assert (read.scheme, read.examples[0].tags) == (scheme, tags)


def test_a_lower_case_task_is_scored_by_entity_f1(tmp_path: Path) -> None:
    (tmp_path / "train.conll").write_text(LABELLED.lower())
    (tmp_path / "dev.conll").write_text(LABELLED.lower())
    task = load_task(DataConfig(task="custom", format="conll", train_file=str(tmp_path / "train.conll"),
                                dev_file=str(tmp_path / "dev.conll")))
    assert task.metrics == ("f1", "precision", "recall") and "B-per" in (task.label_names or [])


# -- 8. tag schemes across files ------------------------------------------------------------------------------
IOB1 = "Anna I-PER\nlives O\n\nBob I-PER\nSmith I-PER\nruns O\n"
IOB2 = "Oslo B-LOC\nis O\n\nBob B-PER\nSmith I-PER\n"


@pytest.mark.parametrize("train, dev", [(IOB1, IOB2), (IOB1, "Anna O\nlives O\n"),
                                        (IOB2.replace("B-LOC", "S-LOC").replace("Smith I-PER", "Smith E-PER"),
                                         IOB2)])
def test_files_in_different_schemes_are_each_read_as_their_own(train: str, dev: str, tmp_path: Path) -> None:
    (tmp_path / "train.conll").write_text(train)
    (tmp_path / "dev.conll").write_text(dev)
    task = load_task(DataConfig(task="custom", format="conll", train_file=str(tmp_path / "train.conll"),
                                dev_file=str(tmp_path / "dev.conll"), unknown_tags="o"))
    assert task.options["scheme"] != "none" and all(
        not t.startswith("S-") and not t.startswith("E-") for ex in task.dev["dev"] for t in ex.tags)


def test_a_plain_tag_beside_chunk_tags_names_its_line(shared: dict[str, Path], tmp_path: Path, via: str) -> None:
    (tmp_path / "train.conll").write_text(IOB2)
    (tmp_path / "dev.conll").write_text("Oslo B-LOC\nis O\n\nBob PER\n")
    args = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format", "conll",
            "--data.train_file", "{tmp}/train.conll", "--data.dev_file", "{tmp}/dev.conll", "--model.encoder", "{enc}"]
    check_fails_cleanly(args, "dev.conll, line 4: tag 'PER' is not O or a B-, I-, E- or S- prefix", shared,
                        tmp_path, via)


# -- 9. document context without documents ---------------------------------------------------------------------
@pytest.mark.parametrize("name, text, marks", [
    ("train.conll", IOB2, "no -DOCSTART- line"),
    ("train.jsonl", _tokens_jsonl(IOB2), 'no "document" key'),
])
def test_document_context_without_documents_is_an_error(name: str, text: str, marks: str, shared: dict[str, Path],
                                                        tmp_path: Path, via: str) -> None:
    (tmp_path / name).write_text(text)
    args = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.format",
            "conll" if name.endswith("conll") else "tokens", "--data.train_file", "{tmp}/" + name,
            "--data.dev_file", "{tmp}/" + name, "--data.context", "document", "--model.encoder", "{enc}"]
    check_fails_cleanly(args, f"{name}: no documents ({marks})", shared, tmp_path, via)


def test_predict_says_a_document_model_reads_sentences_alone(models: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "in.conll"
    path.write_text(LABELLED)
    result, _ = predict(models["document"], path)
    assert "marks none (no -DOCSTART- line" in result.stderr


# -- 10. hire evaluate: only the splits it reads, and what the model does -----------------------------------------
def _conll2003(root: Path, splits: tuple[str, ...]) -> Path:
    folder = root / "conll2003" / "iob2"
    folder.mkdir(parents=True)
    text = "-DOCSTART- -X- -X- O\n\nAnna NNP B-NP B-PER\nlives VBZ B-VP O\nin IN B-PP O\nParis NNP B-NP B-LOC\n"
    for split in splits:
        (folder / split).write_text(text)
    return folder.parent


@pytest.mark.parametrize("files, split", [(("valid.txt", "test.txt"), "all"), (("valid.txt",), "dev")])
def test_evaluate_conll2003_reads_only_the_splits_it_scores(files: tuple[str, ...], split: str,
                                                            models: dict[str, Path], tmp_path: Path) -> None:
    data = _conll2003(tmp_path, files)
    result = call_hire(["evaluate", "--model", str(models["conll"]), "--task", "conll2003", "--data_dir", str(data),
                        "--split", split, "--output_dir", str(tmp_path / "eval")], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert "dev" in metrics and ("test" in metrics) == (split == "all")


def test_evaluate_split_test_without_its_file_is_one_line(models: dict[str, Path], shared: dict[str, Path],
                                                         tmp_path: Path) -> None:
    data = _conll2003(tmp_path / "data", ("valid.txt",))
    result = call_hire(["evaluate", "--model", str(models["conll"]), "--task", "conll2003", "--data_dir", str(data),
                        "--split", "test", "--output_dir", str(tmp_path / "eval")], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--split test: CoNLL-2003 test data not found" in result.stderr
    assert "set the data dir with --data_dir or HIRE_CONLL2003_DIR" in result.stderr  # evaluate's own option
    assert not (tmp_path / "eval").exists()


def test_evaluate_glue_dev_without_test_tsv(shared: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "glue" / "SST-2").mkdir(parents=True)
    (tmp_path / "glue" / "SST-2" / "dev.tsv").write_text("sentence\tlabel\na fine film\t1\na dull film\t0\n")
    result = call_hire(["evaluate", "--model", str(shared["sst2"]), "--task", "SST-2", "--data_dir",
                        str(tmp_path / "glue"), "--split", "dev", "--output_dir", str(tmp_path / "eval")], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "accuracy" in json.loads((tmp_path / "eval" / "metrics.json").read_text())["dev"]


@pytest.mark.parametrize("model, task, message", [
    ("conll", "wikiqa", "tags words, and the task ranks passages"),
    ("single", "conll2003", "labels sentences, and the task tags words"),
    ("conll", "CoLA", "tags words, and the task labels sentences"),
])
def test_evaluate_says_what_the_model_does(model: str, task: str, message: str, models: dict[str, Path],
                                           shared: dict[str, Path], tmp_path: Path) -> None:
    result = call_hire(["evaluate", "--model", str(models[model]), "--task", task], tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("layout", ["ranking", "table"])
def test_predict_names_the_format_option_for_a_tagger(layout: str, models: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "in.conll").write_text(LABELLED)
    result = call_hire(["predict", "--model", str(models["tagger"]), "--input", str(tmp_path / "in.conll"),
                        "--format", layout], tmp_path)
    assert result.returncode == 2 and f"--format {layout}: --model" in result.stderr
    assert "give --format text" in result.stderr or "give text, conll or tokens" in result.stderr


# -- 11. messages of the readers ----------------------------------------------------------------------------------
def test_jsonl_tags_null_is_called_null(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["b"], "tags": null}\n')
    with pytest.raises(DataError, match=r'a.jsonl, line 2: "tags" is null, but line 1 has tags'):
        read_token_file(path, format="tokens")


def test_a_spaces_only_line_in_conllu_is_named(tmp_path: Path) -> None:
    word = "{}\t{}\t{}\tNOUN\t_\t_\t{}\tnsubj\t_\t_"
    lines = [word.format(1, "a", "a", 0).replace("nsubj", "root"), "   ", word.format(2, "b", "b", 1)]
    path = tmp_path / "a.conllu"
    path.write_text("\n".join(lines) + "\n\n")
    with pytest.raises(DataError, match=r"a.conllu, line 2: a line of whitespace alone"):
        read_conllu(path)


# -- 12. a custom task is called custom -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["table", "conll", "ranking"])
def test_a_custom_task_is_called_custom(kind: str, tmp_path: Path) -> None:
    if kind == "table":
        (tmp_path / "train.csv").write_text("sentence,label\na,x\nb,y\n")
        cfg = DataConfig(task="custom", train_file=str(tmp_path / "train.csv"), dev_file=str(tmp_path / "train.csv"))
    elif kind == "conll":
        (tmp_path / "train.conll").write_text(IOB2)
        cfg = DataConfig(task="custom", format="conll", train_file=str(tmp_path / "train.conll"),
                         dev_file=str(tmp_path / "train.conll"))
    else:
        (tmp_path / "train.tsv").write_text("qid\tquestion\tpid\tpassage\tlabel\n"
                                            "q\twho\tp1\tAnna\t1\nq\twho\tp2\tBob\t0\n")
        cfg = DataConfig(task="custom", format="ranking", train_file=str(tmp_path / "train.tsv"),
                         dev_file=str(tmp_path / "train.tsv"))
    assert load_task(cfg).name == "custom"


def test_a_run_named_after_its_training_file_still_reports(shared: dict[str, Path], tmp_path: Path) -> None:
    from badinput import write_world

    write_world(tmp_path, shared["enc"])  # its run "done" recorded "task": "train", as runs before issue 73 did
    result = call_hire(["report", str(tmp_path / "done")], tmp_path)
    assert result.returncode == 0 and "train" in result.stdout


# -- 13. hire train prints the held-out test score ----------------------------------------------------------------
def test_train_prints_the_held_out_test_score(shared: dict[str, Path], tmp_path: Path) -> None:
    for name in ("train", "dev", "test"):
        (tmp_path / f"{name}.conll").write_text(LABELLED)
    result = call_hire(["train", "--output_dir", str(tmp_path / "run"), "--data.task", "custom", "--data.format",
                        "conll", "--data.train_file", str(tmp_path / "train.conll"), "--data.dev_file",
                        str(tmp_path / "dev.conll"), "--data.test_file", str(tmp_path / "test.conll"),
                        "--model.encoder", str(shared["enc"]), "--model.head", "last-layer", "--train.max_steps", "2",
                        "--train.batch_size", "2", "--train.mixed_precision", "no"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = printed_metrics(result.stdout[result.stdout.rfind('{\n  "task"'):])
    recorded = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert printed is not None and printed["task"] == "custom"
    assert printed["held_out"]["test"]["f1"] == pytest.approx(recorded["held_out"]["test"]["f1"])


# -- 14. hire features writes predictions as hire train does ------------------------------------------------------
def test_feature_tagger_predictions_have_train_s_layout(tmp_path: Path) -> None:
    from hire.featurebased.tagger import TaggerSettings, train_tagger
    from hire.lab.words import WordFeatures

    examples = [TokenExample("0", ("Anna", "runs"), ("B-PER", "O")), TokenExample("1", ("Bob",), ("B-PER",))]
    rng = np.random.default_rng(0)
    features = WordFeatures(rng.normal(size=(3, 3, 8)).astype(np.float16), np.array([0, 2, 3]), tmp_path, True, 0.0)
    train_tagger("last", (features, examples), (features, examples), (features, examples), ["O", "B-PER"],
                 TaggerSettings(epochs=1, hidden_size=4), tmp_path / "row")
    assert not list((tmp_path / "row").glob("predictions-*.jsonl"))
    for split in ("dev", "test"):
        rows = [json.loads(line) for line in (tmp_path / "row" / "predictions" / f"{split}.jsonl").read_text()
                .splitlines()]
        assert [set(row) for row in rows] == [{"guid", "tokens", "tags", "prediction"}] * 2
        assert [row["tags"] for row in rows] == [["B-PER", "O"], ["B-PER"]]

