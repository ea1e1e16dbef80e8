"""benchmarks/bench_featurebased.py: an epoch from the feature cache against the encoder in the loop. Its
``--encoder`` is resolved as ``hire features`` resolves it, so an untrained twin (``random:<encoder>``) is
benchmarked with its drawn weights; a whole run on a tiny random encoder and a tiny CoNLL-2003 folder (nothing
timed that means anything); bad options are one line and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from badinput import script_refuses
from paths import BENCHMARKS, load_script
from tiny import save_tiny_encoder
from transformers import BertModel
from worlds import CONLL2003_SENTENCES

from hire.lab.sources import RANDOM_SEED, build_random, module_sha256, resolve_source
from hire.lab.words import encoder_key
from hire.model.encoder import Encoder

bench = load_script(BENCHMARKS / "bench_featurebased.py")

SENTENCES = CONLL2003_SENTENCES[:4]
LAYERS = 3  # 4 hidden states, as concat-last-4 needs


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny BERT of 3 layers and a CoNLL-2003 folder (iob2/) of 8 sentences. The encoder's weights are moved
    off their initialisation (as training would): save_tiny_encoder draws them as the random twin does (the
    same seed and initialisation), and the twin must be told apart from the weights in the folder."""
    root = tmp_path_factory.mktemp("bench")
    encoder = save_tiny_encoder(root / "encoder", [s for s, _ in SENTENCES], layers=LAYERS)
    model = BertModel.from_pretrained(encoder)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    model.save_pretrained(encoder)
    (root / "conll" / "iob2").mkdir(parents=True)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for words, tags in SENTENCES * 2:
        lines += [f"{w} NN O {t}" for w, t in zip(words.split(), tags.split(), strict=True)] + [""]
    (root / "conll" / "iob2" / "train.txt").write_text("\n".join(lines))
    return encoder, root / "conll"


def test_a_random_twin_is_loaded_with_its_drawn_weights(folders: tuple[Path, Path], single_thread) -> None:
    """``random:<folder>`` gives the twin ``hire features`` gives (weights drawn under the fixed seed, the
    folder's tokenizer, the twin's cache key); the folder itself gives its trained weights."""
    encoder, _ = folders
    twin = resolve_source(f"random:{encoder}")
    model, tokenizer, key = bench.load_encoder(twin)
    trained, trained_tokenizer, trained_key = bench.load_encoder(resolve_source(str(encoder)))
    assert twin.seed == RANDOM_SEED and not model.training
    assert module_sha256(model) == module_sha256(build_random(twin))
    assert module_sha256(trained) == module_sha256(Encoder.from_pretrained(str(encoder)))
    assert module_sha256(model) != module_sha256(trained)
    assert key == encoder_key(f"random:{encoder}") != trained_key
    assert tokenizer.get_vocab() == trained_tokenizer.get_vocab()


def test_a_tiny_run_on_a_random_twin_writes_its_records_and_report(folders: tuple[Path, Path], tmp_path: Path,
                                                                   single_thread) -> None:
    encoder, conll = folders
    out = tmp_path / "out"
    spec = f"random:{encoder}"
    argv = ["--encoder", spec, "--data_dir", str(conll), "--sentences", "6", "--rows", "last,concat-last-4:8",
            "--batch_size", "2", "--max_length", "32", "--out", str(out)]
    assert bench.main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == ["report.md", "results.json"]
    result = json.loads((out / "results.json").read_text())
    assert result["encoder"] == spec
    assert result["encoder_source"] == {"encoder": spec, "kind": "random", "path": str(encoder), "seed": RANDOM_SEED}
    words = sum(len(s.split()) for s, _ in (SENTENCES * 2)[:6])
    assert (result["sentences"], result["words"]) == (6, words)
    assert [(r["row"], r["hidden"]) for r in result["records"]] == [("last", 32), ("concat-last-4", 8)]
    for r in result["records"]:
        for side in ("cache", "encoder_in_loop"):
            assert len(r[side]["batch_seconds"]) == 3  # 6 sentences in batches of 2
            assert r[side]["seconds"] == pytest.approx(r[side]["feature_seconds"] + r[side]["tagger_seconds"])
            assert 0 < r[side]["mean_loss"] < 10  # 7 tags: about ln 7 from a fresh tagger, finite
        assert r["arithmetic_ratio"] > 1
    report = (out / "report.md").read_text()
    assert report.startswith("# Feature-based tagging: an epoch from the cache vs. the encoder in the loop\n")
    assert f"`python benchmarks/bench_featurebased.py {' '.join(argv)}`" in report
    assert bench.report(result) == report  # made from results.json's content alone


@pytest.mark.parametrize(("option", "message"), [
    (["--encoder", "random:"], "--encoder random:: random: needs an encoder after it"),
    (["--encoder", "random:{tmp}/none"], "--encoder random:{tmp}/none"),
    (["--rows", "nope"], "--rows: unknown row 'nope'"),
    (["--rows", "last:0"], "--rows last:0: BiLSTM units must be a whole number, at least 1"),
    (["--sentences", "0"], "--sentences 0: must be at least 1"),
    (["--max_length", "600"], "--max_length: must be <= 160"),
    (["--data_dir", "{tmp}/none"], "CoNLL-2003 train data not found: {tmp}/none/iob2/train.txt"),
])
def test_bad_options_are_one_line_and_write_nothing(folders: tuple[Path, Path], tmp_path: Path, option: list[str],
                                                    message: str, capsys: pytest.CaptureFixture[str],
                                                    single_thread) -> None:
    encoder, conll = folders
    option = [o.replace("{tmp}", str(tmp_path)) for o in option]
    argv = ["--encoder", f"random:{encoder}", "--data_dir", str(conll), "--sentences", "2", *option,
            "--out", str(tmp_path / "out")]
    script_refuses(bench.main, argv, "bench_featurebased", message.replace("{tmp}", str(tmp_path)), tmp_path / "out",
                   capsys)
