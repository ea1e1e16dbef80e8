"""``hire probe``: pooling, the feature cache, the probes, pair features, and the command end to end."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from badinput import hire_process
from conftest import make_batch, make_config
from threadpoolctl import threadpool_limits
from tiny import save_tiny_encoder
from transformers import BertModel

from hire import build_model, load_tokenizer
from hire.cli import main
from hire.data import default_glue_dir
from hire.lab.features import FeatureSettings, split_features
from hire.lab.pooling import POOLINGS, pool_hidden_states
from hire.lab.sources import fingerprint, resolve_source
from hire.model.encoder import Encoder
from hire.model.heads import pool
from hire.probing.classifiers import (
    FeatureSet,
    ProbeSettings,
    cv_folds,
    design_matrix,
    feature_sets,
    pair_features,
)
from hire.probing.fit import probe_feature_set
from hire.probing.tasks import default_senteval_dir, load_probe_task, subsample

MR, MRPC = default_senteval_dir() / "MR" / "all.tsv", default_glue_dir() / "MRPC" / "train.tsv"
SETTINGS = FeatureSettings(max_length=32, batch_size=4, precision="no", dtype="float32")


@pytest.fixture(autouse=True)
def _one_thread(single_thread: None) -> Iterator[None]:
    """Tiny problems: a second torch or BLAS thread on a busy 2-core machine only waits (see conftest)."""
    with threadpool_limits(1):
        yield


# --- pooling --------------------------------------------------------------------------------------------------


def test_pooling_equals_hand_computation_and_ignores_padding() -> None:
    torch.manual_seed(0)
    encoder = Encoder.from_config(make_config("bert")).eval()
    lengths = (3, 7, 11)
    ids, mask = make_batch(lengths, extra_pad=4)
    with torch.no_grad():
        out = encoder(ids, mask)
        pooled = pool_hidden_states(out.hidden_states, out.mask)  # (B, l + 1, 4, d)
    assert pooled.shape == (3, encoder.num_hidden_states, 4, 32) and pooled.dtype == torch.float32
    for i, n in enumerate(lengths):
        for layer, h in enumerate(out.hidden_states):
            real = h[i, :n]  # (n, d): the example's real tokens only
            expected = {"cls": real[0], "sep": real[-1], "mean": real.mean(0), "max": real.max(0).values}
            for p, mode in enumerate(POOLINGS):
                torch.testing.assert_close(pooled[i, layer, p], expected[mode])
                torch.testing.assert_close(pooled[i, layer, p], pool(h, mask, mode)[i])  # the heads agree
        with torch.no_grad():  # the example alone, without any padding: the same vectors
            alone = encoder(ids[i : i + 1, :n], mask[i : i + 1, :n])
            torch.testing.assert_close(pool_hidden_states(alone.hidden_states, alone.mask)[0], pooled[i],
                                       atol=1e-5, rtol=1e-5)


# --- the feature cache ----------------------------------------------------------------------------------------


def _write_tsv(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("label\tsentence\n" + "".join(f"{label}\t{text}\n" for label, text in rows))
    return path


SENTENCES = [("1", "a fine , moving film ."), ("0", "dull and far too long ."), ("1", "a joy to watch"),
             ("0", "nothing works here"), ("1", "warm and funny"), ("0", "a mess from start to end .")]


def _features(folder: Path, data: Path, cache: Path, task: str = "toy"):
    from hire.data import read_table

    source = resolve_source(str(folder))
    examples = read_table(data, ["sentence"], "label")
    return split_features(source, fingerprint(source)["sha256"], task, "all", examples, SETTINGS, cache)


def test_cache_is_reused_and_invalidated(tmp_path: Path) -> None:
    folder = save_tiny_encoder(tmp_path / "encoder", [t for _, t in SENTENCES])
    data, cache = _write_tsv(tmp_path / "toy.tsv", SENTENCES), tmp_path / "cache"
    first = _features(folder, data, cache)
    assert not first.cached and first.b is None and first.a.shape == (6, 3, 4, 32)
    again = _features(folder, data, cache)
    assert again.cached and again.path == first.path and np.array_equal(again.a, first.a)
    meta = json.loads(first.path.with_suffix(".json").read_text())
    assert meta["examples"] == 6 and meta["shape"] == [6, 3, 4, 32] and meta["dtype"] == "float32"
    assert not list(cache.glob("*.tmp")) and not list(cache.glob(".*"))  # atomic writes leave nothing behind

    _write_tsv(data, [("0" if label == "1" else "1", text) for label, text in SENTENCES])
    assert _features(folder, data, cache).cached  # labels alone do not change features

    _write_tsv(data, [*SENTENCES[:-1], ("0", "a mess from start to finish .")])
    changed = _features(folder, data, cache)
    assert not changed.cached and changed.path != first.path
    np.testing.assert_array_equal(changed.a[:5], first.a[:5])

    torch.manual_seed(1)  # new weights in the same folder: the fingerprint, hence the key, changes
    BertModel(BertModel.from_pretrained(folder).config).save_pretrained(folder)
    _write_tsv(data, SENTENCES)
    retrained = _features(folder, data, cache)
    assert not retrained.cached and not np.allclose(retrained.a, first.a)

    retrained.path.write_bytes(b"not a zip file")  # a damaged file is computed again, not trusted
    assert not _features(folder, data, cache).cached and _features(folder, data, cache).cached


def test_texts_cut_to_max_length_are_counted_in_one_warning_also_from_the_cache(tmp_path: Path) -> None:
    """A text longer than ``max_length`` tokens is cut (its features read only the first tokens): one warning
    counts them, when encoding and again when the features come from the cache."""
    long = " ".join(["warm"] * 10_000)
    rows = [("1", long), *SENTENCES[:3], ("0", " ".join(["dull"] * 31)), ("1", " ".join(["fine"] * 30))]
    folder = save_tiny_encoder(tmp_path / "encoder", [t for _, t in rows])
    data, cache = _write_tsv(tmp_path / "toy.tsv", rows), tmp_path / "cache"
    for cached in (False, True):
        with pytest.warns(RuntimeWarning, match=r"^toy all: 2 of 6 texts were cut short to fit --max_length 32 "
                                                r"tokens") as seen:
            features = _features(folder, data, cache)
        assert len(seen) == 1 and features.cached is cached and features.cut == 2
    with np.load(features.path) as stored:  # a cache written before the count was stored: counted from the text
        old = {name: stored[name] for name in stored.files if name != "cut"}
    np.savez(features.path, **old)
    with pytest.warns(RuntimeWarning, match=r"^toy all: 2 of 6 texts were cut short"):
        assert _features(folder, data, cache).cached
    # 30 words + [CLS] + [SEP] = 32 tokens fit exactly (the 30 "fine" above); one word more is cut
    _write_tsv(data, [*SENTENCES[:3], ("0", " ".join(["dull"] * 30)), ("1", " ".join(["fine"] * 31))])
    with pytest.warns(RuntimeWarning, match=r"1 of 5 texts were cut short"):
        assert _features(folder, data, cache).cut == 1
    _write_tsv(data, SENTENCES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing cut: no warning
        assert _features(folder, data, cache).cut == 0


def test_senteval_folders_give_their_protocol(tmp_path: Path) -> None:
    (tmp_path / "Toy").mkdir()
    (tmp_path / "Toy" / "all.tsv").write_text("label\tsentence\n1\tgood\n0\t \n0\tbad\n1\tfine\n")
    toy = load_probe_task("toy", senteval_dir=str(tmp_path))
    assert toy.protocol == "cv" and toy.headline == "cv" and [e.text_a for e in toy.splits["all"]] == [
        "good", "bad", "fine"] and "lines 3" in toy.notes[0]  # the empty sentence is left out, and said so
    (tmp_path / "Five").mkdir()
    for split in ("train", "dev", "test"):
        _write_tsv(tmp_path / "Five" / f"{split}.tsv", SENTENCES)
    five = load_probe_task("five", senteval_dir=str(tmp_path))
    assert five.protocol == "split" and five.headline == "test" and five.eval_splits == ["dev", "test"]
    small = subsample(five, 4, 2, seed=0)
    assert [len(small.splits[s]) for s in ("train", "dev", "test")] == [4, 2, 2]
    assert small.splits["train"] == sorted(small.splits["train"], key=lambda e: int(e.guid))  # file order


# --- probes ---------------------------------------------------------------------------------------------------


def _synthetic(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features (n, 3, 4, 8) of noise, but layer 2's mean pooling separates the two classes."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    a = rng.normal(size=(n, 3, 4, 8)).astype(np.float32)
    a[:, 2, POOLINGS.index("mean"), 0] += np.where(y == 1, 4.0, -4.0)
    return a, y


def test_probe_scores_separable_features_perfectly() -> None:
    a, y = _synthetic()
    settings = ProbeSettings(folds=5, c_grid=(0.1, 1.0))
    folds = cv_folds(y, 5, False, 0)
    signal, noise = FeatureSet("2", (2,), "mean"), FeatureSet("0", (0,), "mean")
    cv = probe_feature_set({"all": (a, None)}, {"all": y}, signal, ("accuracy",), False, settings, folds)
    assert cv["splits"]["cv"]["accuracy"] == 1.0 and len(cv["chosen"]) == 5 and cv["dim"] == 8
    assert probe_feature_set({"all": (a, None)}, {"all": y}, noise, ("accuracy",), False, settings,
                             folds)["splits"]["cv"]["accuracy"] < 0.75
    b, yb = _synthetic(60, seed=1)  # train -> dev (GLUE-style) and train -> dev + test (SentEval-style)
    feats = {"train": (a, None), "dev": (b, None)}
    split = probe_feature_set(feats, {"train": y, "dev": yb}, signal, ("accuracy", "f1"), False, settings)
    assert split["splits"]["dev"]["accuracy"] == 1.0 and split["splits"]["dev"]["f1"] == 1.0
    both = probe_feature_set({**feats, "test": (b, None)}, {"train": y, "dev": yb, "test": yb}, signal,
                             ("mcc",), False, settings)
    assert set(both["splits"]) == {"dev", "test"} and both["splits"]["test"]["mcc"] == 1.0


def test_ridge_probe_on_a_linear_target() -> None:
    a, _ = _synthetic(150)
    target = a[:, 1, POOLINGS.index("cls")] @ np.linspace(-1, 1, 8) + 3.0
    result = probe_feature_set({"all": (a, None)}, {"all": target}, FeatureSet("1", (1,), "cls"),
                               ("pearson", "spearman"), True, ProbeSettings(folds=3), cv_folds(target, 3, True, 0))
    assert result["splits"]["cv"]["pearson"] > 0.99 and "alpha" in result["chosen"][0]


def test_pair_features_layout() -> None:
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    x = pair_features(u, v)
    for block, expected in enumerate((u, v, u * v, np.abs(u - v))):
        np.testing.assert_array_equal(x[:, 3 * block : 3 * block + 3], expected)
    a, b = rng.normal(size=(5, 4, 4, 3)), rng.normal(size=(5, 4, 4, 3))
    fs = FeatureSet("first+last (1+3)", (1, 3), "max")
    ua, vb = a[:, [1, 3], 3].reshape(5, 6), b[:, [1, 3], 3].reshape(5, 6)  # layers 1 and 3, side by side
    np.testing.assert_allclose(design_matrix(a, b, fs), pair_features(ua, vb), rtol=1e-6)
    np.testing.assert_allclose(design_matrix(a, None, fs), ua, rtol=1e-6)


def test_feature_sets_cover_every_state_pooling_and_concatenation() -> None:
    rows = list(dict.fromkeys(fs.row for fs in feature_sets(7)))
    assert rows == [*map(str, range(7)), "first+last (1+6)", "last 4 (3-6)", "all (0-6)"]
    assert len(feature_sets(7)) == 4 * len(rows) and [fs.row for fs in feature_sets(3)][-4:] == ["all (0-2)"] * 4


# --- the command ----------------------------------------------------------------------------------------------

needs_data = pytest.mark.skipif(not (MR.is_file() and MRPC.is_file()), reason="no MR / MRPC data beside the repo")


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny pre-trained encoder, and a saved model (as `hire train` writes) whose encoder differs."""
    from hire.data import read_glue_split, read_table

    texts = [e.text_a for e in read_table(MR, ["sentence"], "label")]
    texts += [t for e in read_glue_split("MRPC", "train") + read_glue_split("MRPC", "dev")
              for t in (e.text_a, e.text_b or "")]
    root = tmp_path_factory.mktemp("encoders")
    pretrained = save_tiny_encoder(root / "pretrained", texts)
    model = build_model(str(pretrained), head="last-layer", num_labels=2)
    with torch.no_grad():
        for p in model.encoder.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(root / "run" / "best", load_tokenizer(str(pretrained)))
    return pretrained, root / "run"


def _probe_args(encoders: tuple[Path, Path], out: Path, cache: Path, tasks: str = "MR,MRPC") -> list[str]:
    return ["probe", "--encoder", str(encoders[0]), "--encoder", str(encoders[1]), "--labels", "pre,tuned",
            "--task", tasks, "--max_train_examples", "40", "--max_eval_examples", "20", "--folds", "3",
            "--c_grid", "0.1,1", "--cache_dir", str(cache), "--output_dir", str(out), "--mixed_precision", "no",
            "--device", "cpu", "--max_length", "48"]


@needs_data
def test_probe_command_writes_every_output_and_the_report_regenerates(
        encoders: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out, cache = tmp_path / "probe", tmp_path / "cache"
    assert main(_probe_args(encoders, out, cache)) == 0
    printed = capsys.readouterr().out
    assert "## MR" in printed and "## MRPC" in printed and "tuned minus pre" in printed
    results = json.loads((out / "results.json").read_text())
    assert [e["label"] for e in results["encoders"]] == ["pre", "tuned"]
    assert results["encoders"][1]["kind"] == "hire-model" and results["encoders"][1]["path"].endswith("best")
    mr, mrpc = results["tasks"]["MR"], results["tasks"]["MRPC"]
    assert mr["protocol"] == "cv" and mr["examples"] == {"all": 40} and not mr["pair"]
    assert mrpc["protocol"] == "split" and mrpc["headline"] == "dev" and mrpc["pair"]
    rows = mrpc["results"]["tuned"]["rows"]
    assert len(rows) == 5 * 4 and rows[0]["dim"] == 4 * 32 and set(rows[0]["splits"]["dev"]) == {
        "accuracy", "f1", "score"}
    seconds = mr["results"]["pre"]["seconds"]
    assert seconds["encode"] > 0 and seconds["fit"] > 0 and results["machine"]["precision"] == "no"
    expected = ["report.md", "poolings.md", "poolings.csv", "which_layer.md", "which_layer.csv", "results.json",
                ".hire-output"]  # the marker that makes the folder the probe's (hire.runs.mark_output_folder)
    for task in ("MR", "MRPC"):
        expected += [f"{task}/{name}" for name in ("table.md", "table-pre.csv", "table-tuned.csv",
                                                   "difference-tuned.csv", "layers.png")]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == sorted(expected)
    header, *table = (out / "MR" / "table-pre.csv").read_text().splitlines()
    assert header == "hidden state,cls,sep,mean,max,best" and len(table) == 5
    assert sum(bool(line.split(",")[-1]) for line in table) == 1  # exactly one best cell
    assert (out / "MR" / "layers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for p in before:
        if p.name != "results.json":
            p.unlink()
    redraw = hire_process("probe-report", str(out), timeout=300)
    assert redraw.returncode == 0, redraw.stderr[-2000:]
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    assert main(_probe_args(encoders, out, cache)) == 0  # the same command again: nothing to redo
    assert json.loads((out / "results.json").read_text())["tasks"] == results["tasks"]


@needs_data
def test_a_probe_grid_grows_by_encoders_and_tasks_without_refitting(
        encoders: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out, cache = tmp_path / "probe", tmp_path / "cache"
    first = _probe_args(encoders, out, cache, tasks="MR")
    del first[3:5]  # the second --encoder
    first[first.index("pre,tuned")] = "pre"
    assert main(first) == 0
    before = json.loads((out / "results.json").read_text())
    assert list(before["tasks"]) == ["MR"] and list(before["tasks"]["MR"]["results"]) == ["pre"]

    assert main(_probe_args(encoders, out, cache, tasks="MR,MRPC")) == 0  # one more encoder, one more task
    after = json.loads((out / "results.json").read_text())
    assert after["tasks"]["MR"]["results"]["pre"] == before["tasks"]["MR"]["results"]["pre"]  # kept, not refit
    assert set(after["tasks"]["MR"]["results"]) == {"pre", "tuned"} and set(after["tasks"]) == {"MR", "MRPC"}
    assert [e["label"] for e in after["encoders"]] == ["pre", "tuned"]
    capsys.readouterr()

    swapped = _probe_args(encoders, out, cache, tasks="MR,MRPC")
    swapped[swapped.index("pre,tuned")] = "tuned,pre"  # the label "pre" would name other weights
    assert main(swapped) == 2
    assert "only add encoders and tasks" in capsys.readouterr().err
    assert main(_probe_args(encoders, out, cache, tasks="MRPC")) == 2  # a task left out would be lost
    assert json.loads((out / "results.json").read_text()) == after


@needs_data
def test_probe_command_errors_name_the_option(encoders: tuple[Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    assert main(_probe_args(encoders, tmp_path / "out", tmp_path / "cache", tasks="NoSuchTask")) == 2
    assert "--task NoSuchTask" in capsys.readouterr().err
    assert main([*_probe_args(encoders, tmp_path / "out", tmp_path / "cache"), "--labels", "x"]) == 2
    assert "--labels" in capsys.readouterr().err
    assert main(["probe-report", str(tmp_path / "nowhere")]) == 2
    assert "results.json" in capsys.readouterr().err


def test_resolve_source_kinds(tmp_path: Path) -> None:
    folder = save_tiny_encoder(tmp_path / "enc", ["a b c"])
    assert resolve_source(str(folder)).kind == "pretrained"
    model = build_model(str(folder), head="pool-mean", num_labels=2)
    model.save_pretrained(tmp_path / "run" / "best")  # no tokenizer saved: the base encoder's is used
    for spec in (tmp_path / "run", tmp_path / "run" / "best"):
        source = resolve_source(str(spec))
        assert source.kind == "hire-model" and source.path == str(tmp_path / "run" / "best")
    encoder, tokenizer = resolve_source(str(tmp_path / "run")).load()
    assert encoder.num_hidden_states == 3 and tokenizer("a b")["input_ids"][0] == tokenizer.cls_token_id
    with pytest.raises(ValueError, match="not a model folder"):
        resolve_source(str(tmp_path))
    # a bi-encoder's run folder: best/ is the fine-tuned encoder itself (a plain model folder), taken as is
    shutil.copytree(folder, tmp_path / "bi" / "best")
    source = resolve_source(str(tmp_path / "bi"))
    assert source.kind == "pretrained" and source.path == str(tmp_path / "bi" / "best")
    assert fingerprint(source) == fingerprint(resolve_source(str(tmp_path / "bi" / "best")))


# --- random:<encoder>: the untrained twin -----------------------------------------------------------------------


def _state(encoder: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in encoder.state_dict().items()}


def _pretrained(folder: Path) -> Path:
    """A tiny encoder whose weights are not seed 0's (``save_tiny_encoder`` draws them with seed 0, as the
    random: twin does: they would be the same weights)."""
    save_tiny_encoder(folder, [t for _, t in SENTENCES])
    torch.manual_seed(1)
    BertModel(BertModel.from_pretrained(folder).config).save_pretrained(folder)
    return folder


def test_a_random_twin_is_the_same_weights_every_time_and_not_the_trained_ones(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoModel

    folder = _pretrained(tmp_path / "enc")
    spec = f"random:{folder}"
    rng = torch.get_rng_state()
    first, second = resolve_source(spec), resolve_source(spec)
    a, b = _state(first.load()[0]), _state(second.load()[0])
    assert torch.equal(torch.get_rng_state(), rng)  # the caller's random state is left as it was
    assert first.kind == "random" and first.describe() == {"encoder": spec, "kind": "random", "path": str(folder),
                                                           "seed": 0}
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert fingerprint(first) == fingerprint(second)

    # seed 0 over the folder's configuration, built by hand: the same weights
    torch.manual_seed(0)
    by_hand = AutoModel.from_config(AutoConfig.from_pretrained(folder)).state_dict()
    assert all(torch.equal(a[k], by_hand[k.removeprefix("model.")]) for k in a)  # (the Encoder drops the pooler)

    trained_source = resolve_source(str(folder))
    trained = _state(trained_source.load()[0])
    assert trained.keys() == a.keys()
    weights = [k for k in a if k.endswith("weight") and "LayerNorm" not in k]  # LayerNorm starts at 1 in both
    assert weights and not any(torch.equal(a[k], trained[k]) for k in weights)
    assert fingerprint(first)["sha256"] != fingerprint(trained_source)["sha256"]
    # the real tokenizer: the base's
    text = "a fine , moving film ."
    assert first.tokenizer()(text)["input_ids"] == trained_source.tokenizer()(text)["input_ids"]

    # by content: a copy elsewhere is the same twin; other weights in the folder do not change it (never read),
    # another architecture does
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert fingerprint(resolve_source(f"random:{copy}"))["sha256"] == fingerprint(first)["sha256"]
    torch.manual_seed(5)
    BertModel(BertModel.from_pretrained(copy).config).save_pretrained(copy)
    assert fingerprint(resolve_source(f"random:{copy}"))["sha256"] == fingerprint(first)["sha256"]
    assert fingerprint(resolve_source(str(copy)))["sha256"] != fingerprint(trained_source)["sha256"]
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    shallow = resolve_source(f"random:{copy}")
    assert fingerprint(shallow)["sha256"] != fingerprint(first)["sha256"]
    assert shallow.load()[0].num_hidden_states == 2

    # the twin of a fine-tuned model (saved without a tokenizer): its encoder's architecture, the same draw
    build_model(str(folder), head="pool-mean", num_labels=2).save_pretrained(tmp_path / "run" / "best")
    twin = resolve_source(f"random:{tmp_path / 'run'}")
    assert twin.kind == "random" and twin.base is not None and twin.base.kind == "hire-model"
    c = _state(twin.load()[0])
    assert all(torch.equal(a[k], c[k]) for k in a)
    assert twin.tokenizer()(text)["input_ids"] == first.tokenizer()(text)["input_ids"]
    assert fingerprint(twin) == fingerprint(resolve_source(f"random:{tmp_path / 'run'}"))


def _custom_args(encoders: str, folder: Path, out: Path, cache: Path) -> list[str]:
    rows = SENTENCES * 4
    train, dev = _write_tsv(folder / "toy.tsv", rows), _write_tsv(folder / "toy-dev.tsv", SENTENCES)
    return ["probe", "--encoder", encoders, "--task", "custom", "--train_file", str(train), "--dev_file", str(dev),
            "--c_grid", "0.1,1", "--cache_dir", str(cache), "--output_dir", str(out), "--mixed_precision", "no",
            "--device", "cpu", "--max_length", "16"]


def test_probe_takes_a_random_twin_beside_its_encoder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = _pretrained(tmp_path / "enc")
    specs = [str(folder), f"random:{folder}"]
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = _custom_args(",".join(specs), tmp_path, out, cache)
    assert main(args) == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert [e["label"] for e in results["encoders"]] == specs  # the labels default to the specs, as given
    assert [e["kind"] for e in results["encoders"]] == ["pretrained", "random"]
    assert results["encoders"][0]["fingerprint"] != results["encoders"][1]["fingerprint"]
    task = results["tasks"]["toy"]  # a custom task is named after its training file
    assert list(task["results"]) == specs
    for spec in specs:
        assert len(task["results"][spec]["rows"]) == 5 * 4  # hidden states 0-2, first+last, all; 4 poolings
    assert f"random:{folder}" in printed and f"random:{folder}" in (out / "report.md").read_text()
    tables = sorted(p.name for p in (out / "toy").glob("table-*.csv"))
    assert len(tables) == 2 and any("random" in name for name in tables)
    # the features differ: the twin is another encoder, cached apart
    assert len(list(cache.glob("*.npz"))) == 2 * 2
    assert task["results"][specs[0]]["rows"] != task["results"][specs[1]]["rows"]
    # the same command again: the twin's fingerprint is stable, so nothing is redone
    assert main(args) == 0
    assert json.loads((out / "results.json").read_text())["tasks"] == results["tasks"]


@pytest.mark.parametrize(("spec", "message"), [
    ("random:", "--encoder random:: random: needs an encoder after it (random:all-MiniLM-L6-v2)"),
    ("random:random:x", "--encoder random:random:x: random: takes an encoder with weights"),
    ("random:{tmp}/nowhere", "--encoder random:{tmp}/nowhere: no such folder"),
    ("random:no/such-model", "--encoder random:no/such-model: no such folder, and not a known name"),
])
def test_a_bad_random_spec_is_a_one_line_error(spec: str, message: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(_custom_args(spec.format(tmp=tmp_path), tmp_path, out, cache)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(tmp=tmp_path) in err, err
    assert not out.exists() and not cache.exists()
