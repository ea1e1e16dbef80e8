"""Feature-based tagging (hire.featurebased, BERT's Table 7): the word-feature cache (written once, atomically,
then read without the encoder), the rows' shapes, the BiLSTM tagger's padding invariance, and `hire features`
end to end on a tiny random encoder and tiny CoNLL files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from badinput import script_refuses
from tiny import save_tiny_encoder
from worlds import CONLL2003_SENTENCES

from hire.cli import main
from hire.data.examples import TokenExample
from hire.featurebased import ROWS
from hire.featurebased.rows import FeatureRow
from hire.featurebased.tagger import BiLSTMTagger
from hire.lab.words import cached_features, data_key, encoder_key
from hire.model import load_tokenizer
from hire.model.encoder import Encoder

SENTENCES = CONLL2003_SENTENCES
TEXTS = [words for words, _ in SENTENCES]


def examples() -> list[TokenExample]:
    return [TokenExample(str(i), tuple(w.split()), tuple(t.split())) for i, (w, t) in enumerate(SENTENCES)]


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 32-wide BERT of 3 layers (4 hidden states: every row has what it needs), saved as a folder."""
    return save_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny", TEXTS, layers=3)


def reference(encoder: Encoder, tokenizer, words: tuple[str, ...]) -> np.ndarray:
    """The slow, obvious way: encode one whole sentence, read each word's first sub-token: (words, l+1, d)."""
    enc = tokenizer([list(words)], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        H = torch.stack(encoder(enc["input_ids"], enc["attention_mask"]).hidden_states, dim=2)[0]  # (n, l+1, d)
    ids = enc.word_ids(0)
    firsts = [ids.index(w) for w in range(len(words))]
    return H[firsts].numpy()


def test_cache_is_written_once_then_read_without_the_encoder(encoder_dir: Path, tmp_path: Path,
                                                             single_thread) -> None:
    tokenizer = load_tokenizer(encoder_dir, words=True)
    encoder = Encoder.from_pretrained(encoder_dir).eval()
    data, key = examples(), encoder_key(str(encoder_dir))
    first = cached_features(data, tokenizer, encoder, key, tmp_path, "tiny-train", max_length=12, batch_size=2)
    assert not first.cached and first.features.dtype == np.float16
    assert first.features.shape == (sum(len(e.tokens) for e in data), 4, 32)
    assert first.offsets.tolist() == np.cumsum([0] + [len(e.tokens) for e in data]).tolist()
    # Short sentences (one window) match the whole-sentence reference; long ones (several windows of 12
    # sub-tokens) have every word filled.
    for i, example in enumerate(data):
        if len(example.tokens) <= 9:
            np.testing.assert_allclose(first.sentence(i), reference(encoder, tokenizer, example.tokens), atol=2e-2)
        assert (np.abs(first.sentence(i)).sum(axis=(1, 2)) > 0).all()
    assert [p.name for p in tmp_path.iterdir()] == [first.path.name]  # no temporary folder left

    def refuse(*args, **kwargs):
        raise AssertionError("the encoder ran although its features are cached")

    encoder.forward = refuse  # type: ignore[method-assign]
    again = cached_features(data, tokenizer, encoder, key, tmp_path, "tiny-train", max_length=12, batch_size=2)
    assert again.cached and again.path == first.path
    np.testing.assert_array_equal(again.features, first.features)
    # Another max_length, or other words, is another cache: computed (here, refused).
    with pytest.raises(AssertionError, match="the encoder ran"):
        cached_features(data, tokenizer, encoder, key, tmp_path, "tiny-train", max_length=16)
    with pytest.raises(AssertionError, match="the encoder ran"):
        cached_features(data[:-1], tokenizer, encoder, key, tmp_path, "tiny-train", max_length=12)


def test_the_key_ignores_what_the_tokenizers_last_call_left_behind(encoder_dir: Path) -> None:
    """Encoding one split sets truncation on the fast tokenizer: the next split's key must not change with it
    (it did once: a dev split found in the cache by one command was encoded again by the next)."""
    tokenizer = load_tokenizer(encoder_dir, words=True)
    before = data_key(examples(), tokenizer, 12)
    tokenizer([list(TEXTS[0].split())], is_split_into_words=True, truncation=True, max_length=5, padding="max_length")
    assert data_key(examples(), tokenizer, 12) == before
    assert data_key(examples(), tokenizer, 16) != before


def test_a_killed_write_leaves_no_cache(encoder_dir: Path, tmp_path: Path, single_thread) -> None:
    tokenizer = load_tokenizer(encoder_dir, words=True)
    encoder = Encoder.from_pretrained(encoder_dir).eval()
    forward, calls = encoder.forward, []

    def dies_on_the_second_batch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return forward(*args, **kwargs)

    encoder.forward = dies_on_the_second_batch  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        cached_features(examples(), tokenizer, encoder, "tiny", tmp_path, "x", batch_size=2)
    assert list(tmp_path.iterdir()) == []
    done = cached_features(examples(), tokenizer, lambda: Encoder.from_pretrained(encoder_dir), "tiny", tmp_path, "x")
    assert not done.cached and [p.name for p in tmp_path.iterdir()] == [done.path.name]
    # What a SIGKILL leaves (no handler runs) is removed by the next write, unless its process still runs.
    shutil.rmtree(done.path)
    dead, live = (tmp_path / f".tmp-{done.path.name}-{pid}-abc" for pid in (2**22 + 1, os.getpid()))
    dead.mkdir(), live.mkdir()
    again = cached_features(examples(), tokenizer, encoder, "tiny", tmp_path, "x", batch_size=100)
    assert not again.cached and sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, done.path.name])


@pytest.mark.parametrize("row", ROWS)
def test_each_row_reads_its_layers_and_has_its_width(row: str) -> None:
    L1, d = 6, 32
    layers = {"embeddings": (0,), "second-to-last": (4,), "last": (5,), "sum-last-4": (2, 3, 4, 5),
              "concat-last-4": (2, 3, 4, 5), "sum-all": tuple(range(6)), "hire-mix": tuple(range(6))}[row]
    module = FeatureRow(row, d, L1).eval()
    assert module.layers == layers
    x, mask = torch.randn(3, 7, len(layers), d), torch.ones(3, 7, dtype=torch.bool)
    out = module(x, mask)
    assert out.shape == (3, 7, module.output_dim)
    assert module.output_dim == (4 * d if row == "concat-last-4" else d)
    if len(layers) == 1:
        torch.testing.assert_close(out, x[:, :, 0])
    if row in ("sum-last-4", "sum-all"):  # equal weights at the start
        torch.testing.assert_close(out, x.mean(2))


@pytest.mark.parametrize("row", ["last", "sum-all", "hire-mix"])
def test_padding_never_changes_a_words_logits(row: str, single_thread) -> None:
    torch.manual_seed(0)
    tagger = BiLSTMTagger(FeatureRow(row, 32, 4), num_tags=5, hidden_size=16).eval()
    k = len(tagger.row.layers)
    lengths = (2, 5, 7)
    x = torch.randn(3, 9, k, 32)  # 2 columns more than the longest: every sentence is padded
    mask = torch.arange(9) < torch.tensor(lengths)[:, None]
    x = x.masked_fill(~mask[:, :, None, None], 1e3)  # padding's values must not matter
    with torch.no_grad():
        batched = tagger(x, mask)
        for b, n in enumerate(lengths):
            alone = tagger(x[b:b + 1, :n], mask[b:b + 1, :n])
            torch.testing.assert_close(batched[b, :n], alone[0], atol=1e-5, rtol=1e-5)


def conll(path: Path, sentences: list[tuple[str, str]]) -> str:
    path.write_text("-DOCSTART- -X- -X- O\n\n" + "\n\n".join(
        "\n".join(f"{w} {t}" for w, t in zip(words.split(), tags.split(), strict=True)) for words, tags in sentences)
        + "\n")
    return str(path)


def test_hire_features_end_to_end_and_from_the_cache(encoder_dir: Path, tmp_path: Path, monkeypatch,
                                                     capsys, single_thread) -> None:
    train = conll(tmp_path / "train.txt", SENTENCES * 2)
    dev = conll(tmp_path / "dev.txt", SENTENCES[:3])
    common = ["features", "--encoder", str(encoder_dir), "--task", "custom", "--train_file", train, "--dev_file", dev,
              "--test_file", dev, "--cache_dir", str(tmp_path / "cache"), "--epochs", "2", "--hidden_size", "8",
              "--max_length", "16", "--device", "cpu"]
    out = tmp_path / "run"
    assert main([*common, "--rows", "last,hire-mix", "--output_dir", str(out)]) == 0
    assert "features written" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert list(results["rows"]) == ["last", "hire-mix"]
    for row in ("last", "hire-mix"):
        folder = out / row
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["metric"] == "f1" and {"dev", "test", "machine", "best_epoch"} <= set(metrics)
        assert len((folder / "epochs.jsonl").read_text().splitlines()) == metrics["epochs_run"]
        config = json.loads((folder / "config.json").read_text())
        assert config["row"] == row and config["settings"]["seed"] == 1
        predictions = [json.loads(line) for line in (folder / "predictions" / "dev.jsonl").read_text().splitlines()]
        assert [p["tokens"] for p in predictions] == [w.split() for w in TEXTS[:3]]  # hire train's fields
        assert all(len(p["prediction"]) == len(p["tokens"]) == len(p["tags"]) for p in predictions)
    assert (out / "results.md").read_text().count("\n| ") == 3  # separator line and two rows
    finished = (out / "last" / "metrics.json").stat().st_mtime_ns

    def refuse(*args, **kwargs):
        raise AssertionError("the encoder ran although its features are cached")

    monkeypatch.setattr(Encoder, "forward", refuse)
    monkeypatch.setattr(Encoder, "from_pretrained", refuse)
    assert main([*common, "--rows", "sum-all", "--output_dir", str(tmp_path / "again")]) == 0
    assert capsys.readouterr().out.count("features found") == 3
    assert (tmp_path / "again" / "sum-all" / "metrics.json").is_file()
    # The same command again finds its rows done; other options in the same folder are refused.
    assert main([*common, "--rows", "last", "--output_dir", str(out)]) == 0
    assert (out / "last" / "metrics.json").stat().st_mtime_ns == finished
    assert main([*common, "--rows", "last", "--seed", "2", "--output_dir", str(out)]) == 2
    assert "holds a finished run of other options" in capsys.readouterr().err


def test_hire_features_on_a_random_twin(encoder_dir: Path, tmp_path: Path, capsys, single_thread) -> None:
    """``--encoder random:<folder>``: the features are those of the folder's architecture drawn with seed 0 (built
    here by hand), cached apart from the encoder's own."""
    from transformers import AutoConfig, AutoModel, BertModel

    trained = tmp_path / "trained"
    shutil.copytree(encoder_dir, trained)
    torch.manual_seed(1)  # not seed 0, the twin's: the fixture's weights are seed 0's
    BertModel(BertModel.from_pretrained(trained).config).save_pretrained(trained)
    train = conll(tmp_path / "train.txt", SENTENCES)
    cache = tmp_path / "cache"
    common = ["--task", "custom", "--train_file", train, "--dev_file", train, "--cache_dir", str(cache),
              "--max_length", "64", "--device", "cpu", "--cache_only"]
    spec = f"random:{trained}"
    assert main(["features", "--encoder", spec, "--output_dir", str(tmp_path / "twin"), *common]) == 0
    assert main(["features", "--encoder", str(trained), "--output_dir", str(tmp_path / "own"), *common]) == 0
    assert "features written" in capsys.readouterr().out
    folders = sorted(cache.glob("custom-train-*"))
    assert len(folders) == 2  # one per encoder
    metas = {json.loads((f / "meta.json").read_text())["encoder_name"]: f for f in folders}
    assert set(metas) == {spec, str(trained)}

    torch.manual_seed(0)
    by_hand = Encoder(AutoModel.from_config(AutoConfig.from_pretrained(trained))).eval()
    tokenizer = load_tokenizer(str(trained), words=True)
    twin = np.load(metas[spec] / "features.npy")
    own = np.load(metas[str(trained)] / "features.npy")
    offsets = np.load(metas[spec] / "offsets.npy")
    for i, words in enumerate(TEXTS):
        expected = reference(by_hand, tokenizer, tuple(words.split()))
        np.testing.assert_allclose(twin[offsets[i]:offsets[i + 1]], expected, atol=2e-2, rtol=2e-3)
        assert not np.allclose(own[offsets[i]:offsets[i + 1]], expected, atol=2e-2, rtol=2e-3)


@pytest.mark.parametrize(("words", "message"), [
    (["--encoder", "random:"], "--encoder random:: random: needs an encoder after it (random:all-MiniLM-L6-v2)"),
    (["--encoder", "random:/no/such/folder"], "--encoder random:/no/such/folder: no such folder"),
    (["--rows", "last,nope"], "--rows: unknown row 'nope'; choose from all, embeddings"),
    (["--epochs", "0"], "--epochs: must be >= 1, not 0"),
    (["--task", "custom"], "--train_file: --task custom needs a train file"),
    (["--train_file", "x.txt"], "--train_file: only with --task custom"),
])
def test_bad_options_are_one_line_errors(words: list[str], message: str, tmp_path: Path, capsys) -> None:
    script_refuses(main, ["features", "--output_dir", str(tmp_path / "out"), *words], "hire features", message,
                   tmp_path / "out", capsys)
