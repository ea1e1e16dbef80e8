"""benchmarks/bench_token_heads.py: token heads' training step against the last layer's. The heads' interleaving,
the multiply-adds of each part against the shapes' arithmetic, the report's sentences on hand-made records, and a
whole run on a tiny random encoder and a tiny CoNLL-2003 folder; bad options are one line and exit status 2."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from badinput import script_refuses
from paths import BENCHMARKS, load_script
from tiny import save_tiny_encoder
from worlds import CONLL2003_SENTENCES

bench = load_script(BENCHMARKS / "bench_token_heads.py")

SENTENCES = CONLL2003_SENTENCES
TAGS = 7  # O and the six B-/I- tags above
D, F, LAYERS = 32, 37, 3  # the tiny encoder: width, feed-forward width, layers (tests/tiny.py)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny random BERT of 3 layers (4 hidden states, as concat-last-4 needs) and a CoNLL-2003 folder (iob2/)."""
    root = tmp_path_factory.mktemp("bench")
    encoder = save_tiny_encoder(root / "encoder", [s for s, _ in SENTENCES], layers=LAYERS)
    (root / "conll" / "iob2").mkdir(parents=True)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for words, tags in SENTENCES * 3:
        lines += [f"{w} NN O {t}" for w, t in zip(words.split(), tags.split(), strict=True)] + [""]
    (root / "conll" / "iob2" / "train.txt").write_text("\n".join(lines))
    return encoder, root / "conll"


def test_heads_interleave_on_the_same_batch_in_rotating_order(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_step(model: str, optimizer: None, batch: dict, precision: str) -> float:
        calls.append((model, batch["i"]))
        return {"a": 1.0, "b": 2.0, "c": 3.0}[model] * (1 + batch["i"])

    monkeypatch.setattr(bench, "train_step", fake_step)
    models = {h: (h, None) for h in "abc"}
    batches = [{"i": 0}, {"i": 1}, {"i": 2}]
    times = bench.interleaved_times(models, batches, "fp32", reps=4, warmup=1)
    # Untimed first: one step of each head on every batch (more batches than warm-up steps).
    assert calls[:9] == [(h, i) for i in range(3) for h in "abc"]
    assert calls[9:] == [("a", 0), ("b", 0), ("c", 0), ("b", 1), ("c", 1), ("a", 1),
                         ("c", 2), ("a", 2), ("b", 2), ("a", 0), ("b", 0), ("c", 0)]
    assert times == {"a": [1.0, 2.0, 3.0, 1.0], "b": [2.0, 4.0, 6.0, 2.0], "c": [3.0, 6.0, 9.0, 3.0]}
    calls.clear()
    bench.interleaved_times(models, batches[:1], "fp32", reps=1, warmup=3)
    assert calls == [(h, 0) for _ in range(4) for h in "abc"]  # 3 warm-up rounds, then one timed


def _record(head: str, seq_len: str, precision: str, step: float, paired: float, arith: float) -> dict:
    return {"head": head, "seq_len": seq_len, "precision": precision, "step_seconds": step, "paired_ratio": paired,
            "arithmetic_ratio": arith, "ratio_to_last_layer": paired, "mean_tokens": 32, "real_token_share": 1.0,
            **{f"macs_{p}": 0.0 for p in (*bench.PARTS, "train_step")}}


def test_findings_are_computed_from_the_records() -> None:
    records = [_record("last-layer", "32", "fp32", 1.0, 1.0, 1.0), _record("hire", "32", "fp32", 2.5, 2.5, 2.0),
               _record("last-layer", "128", "fp32", 4.0, 1.0, 1.0), _record("hire", "128", "fp32", 12.0, 3.0, 2.0),
               _record("last-layer", "32", "bf16", 0.5, 1.0, 1.0), _record("hire", "32", "bf16", 2.5, 5.0, 2.0),
               _record("last-layer", "128", "bf16", 1.0, 1.0, 1.0), _record("hire", "128", "bf16", 3.0, 3.0, 2.0)]
    records[3].update(macs_encoder=60.0, macs_extractor=30.0, macs_fusion=10.0)
    lines = bench.findings(records, {"fast_bf16_cpu": False})
    # Gaps (paired / arithmetic): 1.25, 1.5, 2.5, 1.5; median 1.5, the widest 2.5 (bf16 at 32 tokens).
    assert lines[0] == ("- hire: a training step takes x2.50 to x5.00 the last layer's (paired) over 4 settings, "
                        "where the multiply-adds alone imply x2.00: 1.50 times the arithmetic ratio at the median, "
                        "2.50 times in the widest case (bf16, 32 tokens); slower than its arithmetic alone implies.")
    assert lines[1] == "- hire's Bi-GRUs (extractor and fusion) are 40% of its forward multiply-adds at 128 tokens."
    # bf16 / fp32 step: last-layer 0.5 and 0.25 (median 0.375), hire 1.0 and 0.25 (median 0.625).
    assert lines[2] == ("- bf16 autocast against fp32 on this CPU (has no bf16 units), median step-time ratio over "
                        "lengths: last-layer 0.38, hire 0.62.")


def test_a_tiny_run_writes_its_records_and_report(folders: tuple[Path, Path], tmp_path: Path, single_thread) -> None:
    encoder, conll = folders
    out = tmp_path / "out"
    argv = ["--encoder", str(encoder), "--data_dir", str(conll), "--heads", "hire,concat-last-4", "--lengths", "8",
            "--precisions", "fp32", "--batch_size", "4", "--reps", "2", "--warmup", "1", "--out", str(out)]
    assert bench.main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == ["report.md", "results.json"]  # partial.json removed
    result = json.loads((out / "results.json").read_text())
    records = result["records"]
    assert [(r["seq_len"], r["head"]) for r in records] == [
        (n, h) for n in ("8", "conll") for h in ("last-layer", "hire", "concat-last-4")]
    for r in records:
        base = next(b for b in records if b["seq_len"] == r["seq_len"] and b["head"] == "last-layer")
        assert len(r["step_seconds_all"]) == 2
        assert r["step_seconds"] == statistics.median(r["step_seconds_all"])
        assert r["ratio_to_last_layer"] == pytest.approx(r["step_seconds"] / base["step_seconds"])
        assert r["paired_ratio"] == pytest.approx(statistics.median(
            h / b for h, b in zip(r["step_seconds_all"], base["step_seconds_all"], strict=True)))
        assert r["arithmetic_ratio"] == pytest.approx(r["macs_train_step"] / base["macs_train_step"])
    # Multiply-adds per sentence at 8 tokens, from the shapes: the encoder's matrix products and attention, the
    # output layer (dense d_in -> d, then d -> tags) at every token, HIRE's Bi-GRUs (3 gates, input and hidden).
    n = 8
    fixed = {r["head"]: r for r in records if r["seq_len"] == "8"}
    encoder_macs = n * LAYERS * (4 * D * D + 2 * D * F + 2 * n * D)
    gru = lambda i, h: 2 * 3 * (i * h + h * h)  # noqa: E731 (one token, both directions, one layer)
    for head, width in (("last-layer", D), ("concat-last-4", 4 * D), ("hire", 2 * D)):
        assert fixed[head]["macs_encoder"] == encoder_macs
        assert fixed[head]["macs_output"] == n * (width * D + D * TAGS)
    assert fixed["hire"]["macs_extractor"] == (LAYERS + 1) * n * (gru(D, D) + gru(2 * D, D))
    assert fixed["hire"]["macs_fusion"] == n * (gru(4 * D, D) + gru(2 * D, D))
    assert fixed["last-layer"]["macs_extractor"] == fixed["last-layer"]["macs_fusion"] == 0
    assert fixed["hire"]["arithmetic_ratio"] > fixed["concat-last-4"]["arithmetic_ratio"] > 1
    real = [r for r in records if r["seq_len"] == "conll"]
    assert all(r["mean_tokens"] <= 128 and 0 < r["real_token_share"] <= 1 for r in real)
    report = (out / "report.md").read_text()
    assert report.startswith("# Token-level heads: training step against the last layer\n")
    assert f"`python benchmarks/bench_token_heads.py {' '.join(argv)}`" in report
    h = fixed["hire"]
    assert (f"| hire | {h['step_seconds']:.3f} (x{h['ratio_to_last_layer']:.2f}; paired x{h['paired_ratio']:.2f}; "
            f"arith x{h['arithmetic_ratio']:.2f}) |") in report
    assert "- hire: a training step takes x" in report and "- concat-last-4: a training step takes x" in report
    # The report is made again from results.json alone, the same.
    (out / "report.md").unlink()
    assert bench.main(["--report-from", str(out / "results.json")]) == 0
    assert (out / "report.md").read_text() == report


@pytest.mark.parametrize(("option", "message"), [
    (["--heads", "pool-mean"], "--heads pool-mean: pool-mean pools a sentence's tokens"),
    (["--heads", "nope"], "--heads: unknown head 'nope'"),
    (["--lengths", "2"], "--lengths: '2' is not a length"),
    (["--lengths", "600"], "--lengths: must be <= 160"),
    (["--precisions", "fp16"], "--precisions: 'fp16'; use fp32 and/or bf16"),
    (["--reps", "0"], "--reps 0: must be at least 1"),
    (["--data_dir", "{tmp}/none"], "CoNLL-2003 train data not found: {tmp}/none/iob2/train.txt"),
    (["--report-from", "{tmp}/none.json"], "--report-from {tmp}/none.json: no such file"),
])
def test_bad_options_are_one_line_and_write_nothing(folders: tuple[Path, Path], tmp_path: Path, option: list[str],
                                                    message: str, capsys: pytest.CaptureFixture[str],
                                                    single_thread) -> None:
    encoder, conll = folders
    option = [o.replace("{tmp}", str(tmp_path)) for o in option]
    argv = ["--encoder", str(encoder), "--data_dir", str(conll), "--lengths", "8", *option,
            "--out", str(tmp_path / "out")]
    script_refuses(bench.main, argv, "bench_token_heads", message.replace("{tmp}", str(tmp_path)), tmp_path / "out",
                   capsys)
