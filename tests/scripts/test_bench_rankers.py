"""benchmarks/bench_rankers.py: the cross-encoder of each head against the last layer's, and the bi-encoder. The
report's ratios and sentences on hand-made results, the timing rule (each batch's fastest pass, then the median), a
whole run on a tiny random encoder and a made-up set of WikiQA's shape; bad options are one line and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paths import BENCHMARKS, load_script

bench = load_script(BENCHMARKS / "bench_rankers.py")


def ranker(head: str | None, inference_s: float, step_s: float) -> dict:
    return {"head": head,
            "inference": {"candidates": 90, "texts_encoded": 99 if head is None else 90, "seconds": inference_s,
                          "tokenize_seconds": 0.1, "candidates_per_second": round(90 / inference_s, 1)},
            "training_step": {"batch_candidates": 27, "step_seconds": step_s, "batches": 5, "passes": 3,
                              "mean_padded_length": 61.0, "candidates_per_second": round(27 / step_s, 1)}}


def results(**machine: object) -> dict:
    return {"machine": {"date": "2026-12-02 05:00 UTC", "cpu": "AMD EPYC", "cores": 2, "torch_threads": 2,
                        "torch": "2.13.0+cpu", "transformers": "5.24.0", "python": "3.11.7", **machine},
            "encoder": "all-MiniLM-L6-v2", "data": "WikiQA dev", "questions": 10, "candidates": 90,
            "batch_size": 32, "max_length": 128, "seconds": 600.0,
            "command": "benchmarks/bench_rankers.py --heads hire --out x",
            "rankers": {"cross-encoder": ranker("last-layer", 40.0, 4.0),
                        "cross-encoder, hire": ranker("hire", 200.0, 18.0), "bi-encoder": ranker(None, 20.0, 3.0)}}


def test_the_report_gives_each_heads_step_over_the_last_layers_and_the_machines_bf16_units() -> None:
    text = bench.report(results(fast_bf16_cpu=False))
    assert "Machine: AMD EPYC, no bf16 units, 2 cores" in text and "the benchmark took 10.0 min" in text
    assert "| cross-encoder, hire | 90 | 200.000 | 0.5 | 0.100 | 18.0000 | 4.50 | 27 |" in text
    assert "| cross-encoder | 90 | 40.000 | 2.2 | 0.100 | 4.0000 | 1.00 | 27 |" in text
    assert "each its fastest of 3 passes" in text and "mean padded length 61.0 tokens" in text
    assert "The bi-encoder scores 2.0 x as many candidates a second" in text
    assert "on one machine: here hire 4.5 x." in text
    assert "with bf16 units" in bench.report(results(fast_bf16_cpu=True))
    plain = results()
    del plain["rankers"]["cross-encoder, hire"]
    assert "each head" not in bench.report(plain).splitlines()[0]  # no head but the last layer: no head sentence
    assert "here hire" not in bench.report(plain) and "bf16 units" not in bench.report(plain)  # not recorded


def test_a_step_is_each_batchs_fastest_pass_then_the_median() -> None:
    """Batches b1..b3 take 9, 2, 5 s in pass 1 and 1, 8, 6 s in pass 2: fastest 1, 2, 5; median 2. A slowdown of the
    shared machine in one pass (b1's 9 s, b2's 8 s) does not reach the figure."""
    assert bench.fastest_median([[9.0, 2.0, 5.0], [1.0, 8.0, 6.0]]) == 2.0
    assert bench.fastest_median([[3.0, 1.0]]) == 2.0  # one pass: the plain median
    with pytest.raises(ValueError):
        bench.fastest_median([[1.0, 2.0], [1.0]])  # passes over different batches: refused, not zipped short


def test_a_whole_run_on_a_tiny_encoder_writes_every_heads_row(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert bench.main(["--tiny", "--synthetic", "--questions", "6", "--steps", "1", "--step_repeats", "1",
                       "--repeats", "1", "--heads", "hire,scalar-mix", "--out", str(out)]) == 0
    found = json.loads((out / "results.json").read_text())
    assert list(found["rankers"]) == ["cross-encoder", "cross-encoder, hire", "cross-encoder, scalar-mix", "bi-encoder"]
    assert [r["head"] for r in found["rankers"].values()] == ["last-layer", "hire", "scalar-mix", None]
    assert found["candidates"] == 54 and found["data"] == "synthetic (WikiQA's shape)" and found["seconds"] > 0
    assert all(r["training_step"]["step_seconds"] > 0 for r in found["rankers"].values())
    assert (out / "report.md").read_text() == bench.report(found)


@pytest.mark.parametrize(("argv", "message"), [
    (["--heads", "hire,nope"], "--heads: unknown head nope; choose from"),
    (["--heads", ","], "--heads: unknown head (none given)"),
    (["--step_repeats", "0"], "--step_repeats: expected 1 or more, got 0"),
])
def test_bad_options_are_one_line_and_exit_status_2(argv: list[str], message: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        bench.main([*argv, "--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_an_out_that_is_a_file_a_missing_encoder_or_data_folder_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("kept")
    for argv, message in ((["--tiny", "--out", str(afile)], f"--out: {afile} is a file, not a folder"),
                          (["--encoder", str(tmp_path / "none"), "--out", str(tmp_path / "o")], "--encoder: "),
                          (["--tiny", "--data_dir", str(tmp_path / "none"), "--out", str(tmp_path / "o")],
                           "--data_dir: ")):
        with pytest.raises(SystemExit) as stop:
            bench.main(argv)
        assert stop.value.code == 2 and message in capsys.readouterr().err
    assert afile.read_text() == "kept" and not (tmp_path / "o").exists()
