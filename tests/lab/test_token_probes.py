"""Token probes (hire.probing.tokens, `hire probe-tokens`): the control task's labels, selectivity, the expected
layer, the majority baseline, the per-layer probe on features where one layer holds the label, first/mean/last
sub-token features against a direct computation, end to end on a tiny treebank and CoNLL file with a tiny
random encoder and its random: twin (and the report redrawn from results.json alone), and bad input."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tiny import SPECIALS, tiny_bert_config
from transformers import BertModel, BertTokenizerFast

from hire.checks import ConfigError
from hire.data.examples import TokenExample
from hire.lab.words import cached_features
from hire.model import load_tokenizer
from hire.model.encoder import Encoder
from hire.probing.token_cli import add_commands
from hire.probing.tokens import (
    TASKS,
    FitSettings,
    TokenProbeRun,
    WordSplit,
    control_labels,
    expected_layer,
    majority,
    prepare,
    probe_layers,
    probe_task,
    selectivity,
    token_metrics,
)

CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.,'-"


def save_char_encoder(directory: Path, layers: int = 2) -> Path:
    """A random 32-wide BERT whose WordPiece vocabulary holds single characters only, so every word of several
    letters is several sub-tokens (c ##a ##t): first, last and mean sub-token differ."""
    vocab = SPECIALS + list(CHARS) + [f"##{c}" for c in CHARS]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(str(directory / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(1)  # not the seed of the random: twin (0), whose weights would then be the same
    BertModel(tiny_bert_config(len(vocab), layers, max_positions=160, initializer_range=0.2)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_char_encoder(tmp_path_factory.mktemp("enc") / "chars")


@pytest.fixture(name="hire")
def _hire(monkeypatch: pytest.MonkeyPatch):
    """``hire.cli.main`` with the token probe commands (whether or not the entry point is installed yet)."""
    import hire.cli as cli

    original = cli.all_commands

    def commands():
        have = original()
        names = {c.name for c in have}
        return have + [c for c in add_commands() if c.name not in names]

    monkeypatch.setattr(cli, "all_commands", commands)
    return cli.main


# --- controls and summaries -------------------------------------------------------------------------------------


def test_control_labels_depend_on_the_word_type_alone_and_follow_the_training_distribution() -> None:
    train_labels = np.array([0] * 70 + [1] * 20 + [2] * 10)  # distribution 0.7 / 0.2 / 0.1
    types = [f"w{i}" for i in range(6000)]
    forms = {"train": [*types[:4000], "the", "The", "the"], "dev": [*types[3000:5000], "the"],
             "test": ["The", *types[5000:]]}
    out = control_labels(forms, train_labels, 3, seed=7)
    label = {}
    for split, words in forms.items():
        for form, y in zip(words, out[split], strict=True):
            assert label.setdefault(form, int(y)) == int(y), f"{form!r} got two labels"
    # the same type alone, in another context: the same label
    alone = control_labels({"x": ["w4500", "the"]}, train_labels, 3, seed=7)["x"]
    assert alone.tolist() == [label["w4500"], label["the"]]
    freq = np.bincount([label[t] for t in types], minlength=3) / len(types)
    np.testing.assert_allclose(freq, [0.7, 0.2, 0.1], atol=0.025)
    other_seed = control_labels({"x": types}, train_labels, 3, seed=8)["x"]
    assert (other_seed != np.array([label[t] for t in types])).mean() > 0.3


def test_selectivity_expected_layer_and_majority_on_hand_made_cases() -> None:
    assert selectivity({"accuracy": 0.9}, {"accuracy": 0.6}) == pytest.approx(0.3)
    # D = (0.2, 0.2, 0): (1 * 0.2 + 2 * 0.2 + 3 * 0) / 0.4
    assert expected_layer([0.5, 0.7, 0.9, 0.9]) == pytest.approx(1.5)
    # D = (0.1, 0.0, 0.3): (0.1 + 0 + 0.9) / 0.4
    assert expected_layer([0.2, 0.3, 0.3, 0.6]) == pytest.approx(2.5)
    # running best (0.5, 0.9, 0.9): D = (0.4, 0); over the raw scores (0.4 - 0.4) / 0.2 would be 0
    assert expected_layer([0.5, 0.9, 0.7]) == pytest.approx(1.0)
    assert expected_layer([0.9, 0.8, 0.7]) == 0.0  # no layer improves on the embeddings: layer 0
    assert expected_layer([0.9]) == 0.0
    # running best (0.5, 0.6, 0.6, 0.9): (0.1 + 0.9) / 0.4 (raw D = (0.1, -0.2, 0.5) would give 3.0)
    assert expected_layer([0.5, 0.6, 0.4, 0.9]) == pytest.approx(2.5)
    # the cases issue 73 found: layers that improve on the embeddings while the last falls below them (the raw mean
    # was undefined, printed "-"), and a fall after a peak that took the raw mean to -28 on 6 layers
    assert 1 <= expected_layer([0.80, 0.90, 0.93, 0.94, 0.92, 0.85, 0.79]) <= 6
    assert 0 <= expected_layer([0.500, 0.520, 0.530, 0.520, 0.510, 0.505, 0.501]) <= 6
    rng = np.random.default_rng(0)
    for _ in range(200):
        curve = rng.random(rng.integers(1, 13))
        assert 0 <= expected_layer(curve) <= len(curve) - 1
    score = token_metrics(["B-PER", "I-PER", "O"], "ner")
    label, base = majority(np.array([2, 2, 1, 0, 2]), {"dev": np.array([2, 1, 2, 2])}, score)
    assert label == 2 and base["dev"]["accuracy"] == pytest.approx(0.75)
    assert base["dev"]["macro_f1"] == 0.0  # O alone: no entity tag ever predicted
    assert majority(np.array([1, 0, 0, 1]), {"d": np.array([0])}, score)[0] == 0  # ties: the smaller id
    # per-token macro F1 over B-PER and I-PER (not O): B-PER F1 1, I-PER F1 2/3
    pred, gold = np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2])
    assert score(pred, gold)["macro_f1"] == pytest.approx((1 + 2 / 3) / 2)


def test_the_layer_that_carries_the_label_wins(single_thread) -> None:
    rng = np.random.default_rng(0)
    sizes = {"train": 600, "dev": 300, "test": 300}
    labels = {s: rng.integers(0, 3, n) for s, n in sizes.items()}
    centres = rng.normal(size=(3, 8)) * 3
    features = {}
    for s, n in sizes.items():
        x = rng.normal(size=(n, 4, 8)).astype(np.float16)
        x[:, 2] += centres[labels[s]].astype(np.float16)
        features[s] = x
    shuffled = {s: rng.permutation(y) for s, y in labels.items()}
    score = token_metrics(["a", "b", "c"], "pos")
    out = probe_layers(features, {"task": labels, "control": shuffled}, {"task": score, "control": score},
                       FitSettings())
    acc = [cell["test"]["accuracy"] for cell in out["task"]]
    assert [cell["layer"] for cell in out["task"]] == [0, 1, 2, 3]
    assert int(np.argmax(acc)) == 2 and acc[2] > 0.9
    assert max(acc[:2] + acc[3:]) < 0.5
    assert max(cell["test"]["accuracy"] for cell in out["control"]) < 0.5  # shuffled labels: nothing to learn


def test_control_cells_of_ner_carry_token_accuracy_alone(single_thread) -> None:
    """The control task's labels are random per word type: an F1 over NER's entity tags means nothing for them,
    so a control cell holds accuracy only; the task's cells keep their macro F1."""
    rng = np.random.default_rng(0)
    tags = ["O", "B-PER", "I-PER", "B-LOC"]
    splits, features = {}, {}
    for split, n in (("train", 160), ("dev", 60), ("test", 60)):
        forms = [f"w{i}" for i in rng.integers(0, 40, n)]
        ner = [tags[int(form[1:]) % len(tags)] for form in forms]
        splits[split] = WordSplit([], np.arange(n), forms, {"ner": ner}, f"{split}.txt")
        features[split] = SimpleNamespace(features=rng.normal(size=(n, 2, 6)).astype(np.float16), encode_seconds=0.0,
                                          cached=True)
    run = TokenProbeRun(encoders=["enc"], tasks=["conll-ner"], output_dir="unused", fit=FitSettings(max_iter=50))
    cell, meta = probe_task(TASKS["conll-ner"], splits, features, run)
    assert meta["metrics"] == ["accuracy", "macro_f1"] and "macro_f1" in meta["majority"]["dev"]
    assert [c["layer"] for c in cell["layers"]] == [0, 1]
    for c in cell["layers"]:
        for split in ("dev", "test"):
            assert set(c["task"][split]) == {"accuracy", "macro_f1"}
            assert set(c["control"][split]) == {"accuracy"}


# --- sub-token pooling ------------------------------------------------------------------------------------------


def test_first_mean_last_sub_token_features_match_a_direct_computation(encoder_dir: Path, tmp_path: Path,
                                                                      single_thread) -> None:
    tokenizer = load_tokenizer(encoder_dir, words=True)
    encoder = Encoder.from_pretrained(encoder_dir).eval()
    words = ("the", "grey", "cat", "x", "sleeps", ".")
    enc = tokenizer([list(words)], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        H = torch.stack(encoder(enc["input_ids"], enc["attention_mask"]).hidden_states, dim=2)[0].numpy()
    ids = enc.word_ids(0)
    positions = [[p for p, w in enumerate(ids) if w == i] for i in range(len(words))]
    assert len(positions[1]) == 4  # g ##r ##e ##y: the modes differ
    direct = {"first": np.stack([H[p[0]] for p in positions]), "last": np.stack([H[p[-1]] for p in positions]),
              "mean": np.stack([H[p].mean(0) for p in positions])}
    paths = set()
    for mode, expected in direct.items():
        got = cached_features([TokenExample("0", words)], tokenizer, encoder, "tiny", tmp_path, "one",
                              max_length=64, subword=mode)
        np.testing.assert_allclose(got.features[:].astype(np.float32), expected, atol=2e-2, rtol=1e-2)
        paths.add(got.path)
    assert len(paths) == 3  # the sub-token choice is part of the key
    assert np.abs(direct["first"][1] - direct["mean"][1]).max() > 0.1


# --- end to end -------------------------------------------------------------------------------------------------

NOUNS = ["cat", "dog", "bird", "fox", "cow", "hen"]
VERBS = ["sees", "likes", "finds", "hears"]
DETS = ["the", "a", "this"]


def _conllu_sentence(rng: random.Random, n: int) -> str:
    """A sentence DET NOUN [do n't] VERB DET NOUN . with a multi-word token ``don't`` in some, relation
    subtypes (obl:tmod) and features; no ``# text`` line (another layout than EWT's)."""
    words: list[tuple[str, str, str, str]] = [("DET", rng.choice(DETS), "det", "_"),
                                              ("NOUN", rng.choice(NOUNS), "nsubj", "Number=Sing")]
    negated = rng.random() < 0.3
    if negated:
        words += [("AUX", "do", "aux", "Mood=Ind"), ("PART", "n't", "advmod", "Polarity=Neg")]
    words += [("VERB", rng.choice(VERBS), "root", "Tense=Pres"), ("DET", rng.choice(DETS), "det", "_"),
              ("NOUN", rng.choice(NOUNS), "obj", "Number=Sing"), ("NOUN", "today", "obl:tmod", "_"),
              ("PUNCT", ".", "punct", "_")]
    verb = next(i for i, w in enumerate(words) if w[2] == "root") + 1
    heads = {"det": None, "nsubj": verb, "aux": verb, "advmod": verb, "root": 0, "obj": verb, "obl:tmod": verb,
             "punct": verb}
    lines = [f"# sent_id = s{n}"]
    for i, (upos, form, rel, feats) in enumerate(words, start=1):
        if negated and form == "do":
            lines.append(f"{i}-{i + 1}\tdon't\t_\t_\t_\t_\t_\t_\t_\t_")
        head = heads[rel] if heads[rel] is not None else i + 1
        lines.append(f"{i}\t{form}\t{form}\t{upos}\t_\t{feats}\t{head}\t{rel}\t_\t_")
    return "\n".join(lines) + "\n\n"


def write_treebank(folder: Path, sizes: dict[str, int] | None = None) -> Path:
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (sizes or {"train": 40, "dev": 12, "test": 12}).items():
        (folder / f"xx_tiny-ud-{split}.conllu").write_text("".join(_conllu_sentence(rng, i) for i in range(n)))
    return folder


def write_conll(folder: Path) -> Path:
    rng = random.Random(1)
    (folder / "iob2").mkdir(parents=True, exist_ok=True)
    people = [("Peter", "Blackburn"), ("Anna", "Smith"), ("John", "Major")]
    places = ["Paris", "Bonn", "Lima"]
    for name, n in (("train.txt", 40), ("valid.txt", 12), ("test.txt", 12)):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(n):
            first, last = rng.choice(people)
            lines += [f"{first} NNP B-NP B-PER", f"{last} NNP I-NP I-PER", f"{rng.choice(['visited', 'left'])} VBD "
                      "B-VP O", f"{rng.choice(places)} NNP B-NP B-LOC", ". . O O", ""]
        (folder / "iob2" / name).write_text("\n".join(lines) + "\n")
    return folder


def test_end_to_end_with_a_random_twin_and_the_report_redrawn(hire, encoder_dir: Path, tmp_path: Path,
                                                                single_thread, capsys) -> None:
    treebank, conll = write_treebank(tmp_path / "tb"), write_conll(tmp_path / "conll")
    out, cache = tmp_path / "out", tmp_path / "cache"
    encoders = [str(encoder_dir), f"random:{encoder_dir}"]
    argv = ["probe-tokens", "--encoders", ",".join(encoders), "--tasks", "all", "--treebank", str(treebank),
            "--conll2003", str(conll), "--output_dir", str(out), "--cache_dir", str(cache), "--device", "cpu",
            "--max_iter", "200"]
    assert hire(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert [e["label"] for e in results["encoders"]] == encoders
    assert [e["kind"] for e in results["encoders"]] == ["pretrained", "random"]
    assert results["encoders"][0]["key"] != results["encoders"][1]["key"]
    assert list(results["tasks"]) == ["ud-upos", "ud-deprel", "conll-pos", "conll-chunk", "conll-ner"]
    assert "nsubj" in results["tasks"]["ud-deprel"]["tags"] and "obl" in results["tasks"]["ud-deprel"]["tags"]
    assert not any(":" in t for t in results["tasks"]["ud-deprel"]["tags"])  # universal part only
    upos = results["tasks"]["ud-upos"]
    word_lines = [line for line in (treebank / "xx_tiny-ud-train.conllu").read_text().splitlines()
                  if line.split("\t")[0].isdigit()]  # not the multi-word token lines (4-5)
    assert upos["words"]["train"] == len(word_lines)
    for name, task in results["tasks"].items():
        assert set(task["results"]) == set(encoders)
        for spec in encoders:
            cell = task["results"][spec]
            assert [c["layer"] for c in cell["layers"]] == [0, 1, 2]
            for c in cell["layers"]:
                for split in ("dev", "test"):
                    assert 0 <= c["task"][split]["accuracy"] <= 1 and 0 <= c["control"][split]["accuracy"] <= 1
                    assert c["selectivity"][split] == pytest.approx(c["task"][split]["accuracy"]
                                                                    - c["control"][split]["accuracy"])
                    assert ("macro_f1" in c["task"][split]) == (name == "conll-ner")
                    assert set(c["control"][split]) == {"accuracy"}
            assert cell["summary"]["best_layer"] in (0, 1, 2)
        assert task["majority"]["test"]["accuracy"] > 0
    # UPOS is a function of the word here: the pre-trained (random, but char-level) encoder's probes learn it
    assert max(c["task"]["test"]["accuracy"] for c in upos["results"][encoders[0]]["layers"]) > 0.9
    assert "machine" in results and results["encoding"][encoders[1]]["ud-train"]["words"] > 0
    report, figure = (out / "report.md").read_text(), (out / "figures" / "layers.png").read_bytes()
    assert "Which layer knows what" in report and "selectivity" in report
    (out / "report.md").unlink()
    (out / "figures" / "layers.png").unlink()
    capsys.readouterr()
    assert hire(["probe-tokens-report", str(out)]) == 0
    assert (out / "report.md").read_text() == report
    assert (out / "figures" / "layers.png").read_bytes() == figure
    # resumable: nothing is probed again
    before = (out / "results.json").read_text()
    assert hire(argv) == 0
    assert "every task already probed" in capsys.readouterr().out
    assert (out / "results.json").read_text() == before


# --- bad input --------------------------------------------------------------------------------------------------


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_bad_input_is_one_line_exit_2_and_writes_nothing(hire, encoder_dir: Path, tmp_path: Path, capsys) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    base = ["probe-tokens", "--encoders", str(encoder_dir), "--output_dir", str(out), "--cache_dir", str(cache),
            "--device", "cpu"]
    treebank = write_treebank(tmp_path / "tb", {"train": 3, "dev": 2, "test": 2})

    assert hire([*base, "--tasks", "ud-upos,ud-nope", "--treebank", str(treebank)]) == 2
    assert "--tasks" in (err := _error(capsys)) and "ud-nope" in err

    assert hire([*base, "--tasks", "ud-upos", "--treebank", str(tmp_path / "missing")]) == 2
    assert "--treebank" in (err := _error(capsys)) and "missing" in err

    bad = tmp_path / "bad"
    bad.mkdir()
    for split in ("train", "dev", "test"):
        (bad / f"yy_bad-ud-{split}.conllu").write_text((treebank / f"xx_tiny-ud-{split}.conllu").read_text())
    dev = bad / "yy_bad-ud-dev.conllu"
    lines = dev.read_text().split("\n")
    lines[3] = lines[3].replace("\t", " ", 1)  # the 4th line: 9 tab-separated columns
    dev.write_text("\n".join(lines))
    assert hire([*base, "--tasks", "ud-deprel", "--treebank", str(bad)]) == 2
    err = _error(capsys)
    assert f"{dev}, line 4" in err and "columns" in err

    assert hire([*base, "--tasks", "conll-ner", "--conll2003", str(tmp_path / "nowhere")]) == 2
    assert "CoNLL-2003" in _error(capsys)

    assert hire([*base, "--tasks", "ud-upos", "--treebank", str(treebank), "--c_grid", "0.1,-1"]) == 2
    assert "--c_grid" in _error(capsys)
    assert not out.exists() and not cache.exists()

    # an output folder probed with other options: refused before any work, nothing changed
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"command": "probe-tokens", "tasks": {}, "config": {"subword": "x"}}))
    assert hire([*base, "--tasks", "ud-upos", "--treebank", str(treebank)]) == 2
    assert "other options" in _error(capsys) and not cache.exists()


def test_tol_reaches_the_solver_is_recorded_and_older_results_count_as_its_default(
        hire, encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import hire.probing.solvers.logistic as fit

    seen: list[float] = []
    solver = fit.fit_logistic

    def spy(*args, **kwargs):
        seen.append(args[9] if len(args) > 9 else kwargs["tol"])
        return solver(*args, **kwargs)

    monkeypatch.setattr(fit, "fit_logistic", spy)
    rng = np.random.default_rng(0)
    features = {s: rng.normal(size=(n, 2, 4)).astype(np.float16) for s, n in (("train", 40), ("dev", 20),
                                                                             ("test", 20))}
    labels = {s: rng.integers(0, 2, len(x)) for s, x in features.items()}
    score = token_metrics(["a", "b"], "pos")
    probe_layers(features, {"task": labels}, {"task": score}, FitSettings(c_grid=(0.1, 1.0), tol=1e-6))
    assert seen == [1e-6] * 4  # two layers x two C

    treebank, out = write_treebank(tmp_path / "tb"), tmp_path / "out"
    run = TokenProbeRun(encoders=[str(encoder_dir)], tasks=["ud-upos"], output_dir=str(out), treebank=str(treebank))
    config = run.config()
    assert config["tol"] == 1e-4
    out.mkdir()
    older = {k: v for k, v in config.items() if k != "tol"}  # a results.json written before --tol existed
    (out / "results.json").write_text(json.dumps({"command": "probe-tokens", "version": 1, "config": older,
                                                  "encoders": [], "tasks": {}, "encoding": {}}))
    results, _ = prepare(run)  # extended as probes made at the default
    assert results["config"] == config
    with pytest.raises(ConfigError, match="tol"):
        prepare(dataclasses.replace(run, fit=FitSettings(tol=1e-6)))
    before = (out / "results.json").read_text()
    for value in ("0", "-1", "abc"):
        assert hire(["probe-tokens", "--encoders", str(encoder_dir), "--tasks", "ud-upos", "--treebank",
                     str(treebank), "--output_dir", str(out), "--tol", value]) == 2
        assert "--tol" in _error(capsys)
    assert (out / "results.json").read_text() == before
