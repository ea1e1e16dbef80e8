"""Token tasks end to end: `hire train` on CoNLL column files (a tiny random encoder), every dev word scored with
strict entity F1, windows over sentences longer than the encoder's limit, the labelled test file scored once at
the end, per-word predictions written, a killed run resumed, and the real CoNLL-2003 read by name."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from badinput import given_once, hire_process
from paths import SHARED_DATA
from tiny import save_tiny_encoder
from worlds import WORDS, sentences, write_conll

from hire.config import ConfigError
from hire.data.conll import read_token_file
from hire.metrics import entity_scores
from hire.options import parse_options
from hire.training import train


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokens")
    files = {"train": write_conll(root / "train.conll", sentences(40, 0)),
             "dev": write_conll(root / "dev.conll", sentences(12, 1, long_every=4)),
             "test": write_conll(root / "test.conll", sentences(8, 2))}
    files["encoder"] = save_tiny_encoder(root / "encoder", [w for ws in WORDS.values() for w in ws])
    return files


def options(world: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return given_once(["train", "--output_dir", str(out), "--data.task", "custom", "--data.format", "conll",
                       "--data.train_file", str(world["train"]), "--data.dev_file", str(world["dev"]),
                       "--data.test_file", str(world["test"]), "--data.max_length", "24", "--model.encoder",
                       str(world["encoder"]), "--train.batch_size", "8", "--train.max_steps", "8",
                       "--train.eval_every", "4", "--train.checkpoint_every", "2", "--train.lr", "3e-3",
                       "--train.mixed_precision", "no", *extra])[1:]  # extra replaces the options it gives again


@pytest.mark.parametrize("head", ["hire", "last-layer"])
def test_a_tagger_trains_and_scores_every_dev_word(world, tmp_path, head):
    out = tmp_path / "run"
    final = train(parse_options([*options(world, out, "--model.head", head)]))
    dev = read_token_file(world["dev"]).examples
    words = sum(len(ex.tokens) for ex in dev)  # 60-word sentences do not fit 24 sub-tokens: windows
    assert final["dev"]["dev"]["words"] == words
    assert set(final["held_out"]) == {"test"} and "f1" in final["held_out"]["test"]
    rows = [json.loads(line) for line in (out / "predictions" / "dev.jsonl").read_text().splitlines()]
    assert [len(r["prediction"]) for r in rows] == [len(ex.tokens) for ex in dev]
    assert [r["tokens"] for r in rows] == [list(ex.tokens) for ex in dev]
    # the score in metrics.json is seqeval's strict F1 of the written predictions against the IOB2 gold tags
    again = entity_scores([r["tags"] for r in rows], [r["prediction"] for r in rows])
    assert final["dev"]["dev"]["f1"] == pytest.approx(again["f1"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dev"]["dev"]["score"] == metrics["dev"]["dev"]["f1"]
    if head == "hire":
        assert len(rows[0]["layer_weights"]) == 3  # embeddings and 2 layers


def test_document_context_end_to_end_scores_every_word_of_the_centre_sentences(world, tmp_path):
    """--data.context document: neighbouring sentences of the document are read too, yet every dev word is scored
    once, in its own sentence; the context changes what the model sees (the words' confidences move)."""
    runs = {}
    for context in ("sentence", "document"):
        out = tmp_path / context
        final = train(parse_options(options(world, out, "--model.head", "last-layer", "--data.context", context,
                                            "--data.max_length", "48")))
        rows = [json.loads(line) for line in (out / "predictions" / "dev.jsonl").read_text().splitlines()]
        runs[context] = final, rows
    dev = read_token_file(world["dev"]).examples
    final, rows = runs["document"]
    assert final["dev"]["dev"]["words"] == sum(len(ex.tokens) for ex in dev)
    assert [r["tokens"] for r in rows] == [list(ex.tokens) for ex in dev]
    assert [len(r["prediction"]) for r in rows] == [len(ex.tokens) for ex in dev]
    confidences = [[r["confidence"] for r in runs[c][1]] for c in ("sentence", "document")]
    assert confidences[0] != confidences[1]


@pytest.mark.slow  # CI's slow run; fast: tests/core/commands/test_resume.py kills and resumes sentence runs
@pytest.mark.parametrize("head", ["hire", "last-layer"])
def test_a_killed_tagger_run_resumes_to_the_same_result(world, tmp_path, head):
    """Killed (like kill -9) after step 5, the same command resumes from step 4's checkpoint and ends where an
    uninterrupted run ends. (On CoNLL-2003 with MiniLM: scripts/check_token_tasks.py.)"""
    whole = train(parse_options(options(world, tmp_path / "whole", "--model.head", head)))
    parts = tmp_path / "parts"
    args = ["train", *options(world, parts, "--model.head", head)]
    killed = hire_process(*args, kill="step:5")
    assert killed.returncode == 137, killed.stderr[-2000:]
    resumed = hire_process(*args)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Resuming" in resumed.stdout + resumed.stderr
    assert json.loads((parts / "metrics.json").read_text())["dev"] == whole["dev"]


def test_token_options_are_refused_for_sentence_tasks(world):
    with pytest.raises(ConfigError, match=r"--data\.subword: only for token tasks"):
        parse_options(["--output_dir", "x", "--data.task", "RTE", "--data.subword", "mean"]).validate()
    with pytest.raises(ConfigError, match=r"--data\.tag_column: conll2003's tag columns are ner, chunk and pos"):
        parse_options(["--output_dir", "x", "--data.task", "conll2003", "--data.tag_column", "2"]).validate()


def wordpiece_encoder(folder: Path) -> Path:
    """A tiny random BERT whose vocabulary splits words into pieces: whole words, letters and ``##`` letters."""
    import string

    import torch
    from tiny import SPECIALS, tiny_bert_config
    from transformers import BertModel, BertTokenizerFast

    letters = list(string.ascii_lowercase)
    vocab = [*SPECIALS, *[w for ws in WORDS.values() for w in ws], *letters, *[f"##{c}" for c in letters], "."]
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    BertModel(tiny_bert_config(len(vocab), 2)).save_pretrained(folder)
    BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tagger(world, tmp_path_factory) -> Path:
    """A tagger trained on words that split into pieces ("annas" is "anna ##s")."""
    root = tmp_path_factory.mktemp("tagger")
    encoder = wordpiece_encoder(root / "encoder")
    rng = random.Random(5)
    data = [[(w + rng.choice(["", "s", "xy"]), t) for w, t in s] for s in sentences(40, 0)]
    train_file = write_conll(root / "train.conll", data[:30])
    dev_file = write_conll(root / "dev.conll", data[30:])
    run = root / "run"
    train(parse_options(["--output_dir", str(run), "--data.task", "custom", "--data.format", "conll",
                         "--data.train_file", str(train_file), "--data.dev_file", str(dev_file),
                         "--model.encoder", str(encoder), "--model.head", "hire", "--train.batch_size", "8",
                         "--train.max_steps", "30", "--train.lr", "5e-3", "--train.mixed_precision", "no"]))
    return run / "best"


def test_hire_predict_and_the_transformers_pipeline_give_the_same_tags(tagger, tmp_path):
    """Raw text through `hire predict` and through pipeline("token-classification"): each word's tag (the
    pipeline's at the word's first piece; its later pieces continue it) and, where the tags form valid entities,
    the same entity spans as the pipeline's "simple" aggregation."""
    from transformers import pipeline

    import hire  # noqa: F401  (registers the model type)

    lines = ["annas met bobxy in parisxy .", "acme said the unescos visit lima", "carlaxy and dieter"]
    text = tmp_path / "in.txt"
    text.write_text("\n".join(lines) + "\n")
    result = hire_process("predict", "--model", str(tagger), "--input", str(text))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [json.loads(line) for line in text.with_suffix(".predictions.jsonl").read_text().splitlines()]
    assert [r["tokens"] for r in rows] == [line.split() for line in lines]
    tokens = pipeline("token-classification", model=str(tagger), ignore_labels=[])
    grouped = pipeline("token-classification", model=str(tagger), aggregation_strategy="simple")
    pieces_split = grouped_lines = 0
    for line, row in zip(lines, rows, strict=True):
        starts = [line.index(w, sum(len(x) + 1 for x in row["tokens"][:i])) for i, w in enumerate(row["tokens"])]
        by_start = {t["start"]: t["entity"] for t in tokens(line)}
        assert [by_start[s] for s in starts] == row["prediction"]
        pieces_split += len(tokens(line)) > len(row["tokens"])
        continued = [t["entity"] for t in tokens(line) if t["start"] not in starts]
        assert all(not tag.startswith("B-") for tag in continued)  # a word's later pieces continue it
        if all(not (t.startswith("I-") and (i == 0 or row["prediction"][i - 1][2:] != t[2:]))
               for i, t in enumerate(row["prediction"])):  # valid IOB2: strict and lenient readings agree
            assert [(g["entity_group"], g["word"].replace(" ", "")) for g in grouped(line)] == \
                   [(e["type"], e["text"].replace(" ", "")) for e in row["entities"]]
            grouped_lines += bool(row["entities"])
    assert pieces_split and grouped_lines  # the test means something only where words split, and entities form


def test_hire_predict_tags_a_conll_file_as_it_tags_the_same_words_as_text(tagger, tmp_path):
    """A CoNLL file (CoNLL-2003's columns, a document start) through `hire predict`: every sentence and word of the
    file in order, its gold tags kept beside the prediction (as IOB2, like the predictions), and the tags and entity
    spans that the same words get as raw text."""
    data = [[(w + s, t) for w, t in sentence] for sentence, s in zip(sentences(12, 9), ["", "s", "xy"] * 4,
                                                                      strict=True)]
    conll = write_conll(tmp_path / "in.conll", data)
    text = tmp_path / "in.txt"
    text.write_text("".join(" ".join(w for w, _ in sentence) + "\n" for sentence in data))
    outputs = [tmp_path / "conll.predictions.jsonl", tmp_path / "text.predictions.jsonl"]  # (one default name)
    for path, output in zip((conll, text), outputs, strict=True):
        result = hire_process("predict", "--model", str(tagger), "--input", str(path), "--output", str(output))
        assert result.returncode == 0, result.stderr[-2000:]
    from_conll, from_text = ([json.loads(line) for line in p.read_text().splitlines()] for p in outputs)
    assert [r["tokens"] for r in from_conll] == [[w for w, _ in sentence] for sentence in data]
    gold = [list(ex.tags) for ex in read_token_file(conll).examples]  # the file's tags (IOB1 here) as IOB2
    assert [r["tags"] for r in from_conll] == gold and gold != [[t for _, t in sentence] for sentence in data]
    assert all(r["tags"] is None for r in from_text)
    assert [r["prediction"] for r in from_conll] == [r["prediction"] for r in from_text]
    assert [r["entities"] for r in from_conll] == [r["entities"] for r in from_text]


@pytest.mark.slow  # CI's slow run; fast: docs/guides/token-tasks.md's snippets train and evaluate conll2003 by name
@pytest.mark.skipif(not (SHARED_DATA / "conll2003").is_dir(),
                    reason="no CoNLL-2003 data beside the repository")
def test_conll2003_by_name_trains_and_evaluate_gives_the_same_scores(tmp_path):
    """The real CoNLL-2003 (a slice), read by name; `hire evaluate` rescores the saved tagger to the same dev and
    test F1 that training reported."""
    from hire.data.conll import default_conll2003_dir, read_conll2003

    words = {w for s in read_conll2003(default_conll2003_dir(), "train").examples[:200] for w in s.tokens}
    encoder = save_tiny_encoder(tmp_path / "encoder", sorted(words))
    run = tmp_path / "run"
    final = train(parse_options(["--output_dir", str(run), "--data.task", "conll2003", "--model.encoder", str(encoder),
                                 "--model.head", "last-layer", "--data.max_train_examples", "200",
                                 "--data.max_eval_examples", "40", "--train.batch_size", "16", "--train.max_steps",
                                 "4", "--train.mixed_precision", "no"]))
    assert final["task"] == "CoNLL-2003" and final["dev"]["dev"]["words"] > 0
    result = hire_process("evaluate", "--model", str(run / "best"), "--task", "conll2003", "--split", "all",
                          "--max_examples", "40", "--batch_size", "16")
    assert result.returncode == 0, result.stderr[-2000:]
    again = json.loads((run / "eval-CoNLL-2003" / "metrics.json").read_text())
    assert again["dev"]["f1"] == pytest.approx(final["dev"]["dev"]["f1"])
    assert again["test"]["f1"] == pytest.approx(final["held_out"]["test"]["f1"])


@pytest.mark.slow  # CI's slow run; fast: the pipeline test above, and test_transformers.py's exported code
def test_an_exported_tagger_tags_alike_where_hire_is_not_installed(tagger, tmp_path):
    """`hire export` writes the modelling code beside the weights: a Python without hire loads the tagger with
    trust_remote_code and the pipeline gives the tags that hire's own pipeline gives."""
    from tiny import HIDE_HIRE
    from transformers import pipeline

    import hire  # noqa: F401

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    copy = tmp_path / "copy"
    result = hire_process("export", "--model", str(tagger), "--output_dir", str(copy))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "AutoModelForTokenClassification.from_pretrained" in result.stdout  # what it says to load it with
    line = "annas met bobxy in parisxy ."
    code = HIDE_HIRE + f"""
import json
from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline
model = AutoModelForTokenClassification.from_pretrained({str(copy)!r}, trust_remote_code=True)
tag = pipeline("token-classification", model=model,
               tokenizer=AutoTokenizer.from_pretrained({str(copy)!r}, trust_remote_code=True),
               ignore_labels=[], trust_remote_code=True)
print(json.dumps([[t["start"], t["entity"]] for t in tag({line!r})]))
"""
    remote = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert remote.returncode == 0 and remote.stdout.strip(), remote.stderr[-3000:] + remote.stdout[-2000:]
    here = pipeline("token-classification", model=str(tagger), ignore_labels=[])
    assert json.loads(remote.stdout.splitlines()[-1]) == [[t["start"], t["entity"]] for t in here(line)]
