"""benchmarks/compare_runs.py: the spread of step times over runs, read from the suite's results.json files."""

import json
from pathlib import Path

import pytest
from paths import BENCHMARKS, load_script

compare_runs = load_script(BENCHMARKS / "compare_runs.py")


def _run(folder: Path, steps: dict[tuple[str, str], float], gru: str = "cudnn", gpu: str = "G") -> Path:
    records = []
    for (length, head), t in steps.items():
        last = steps[(length, "last-layer")]
        records.append({"precision": "fp32", "seq_len": length, "head": head, "step_seconds": t,
                        "ratio_to_last_layer": t / last, "arithmetic_ratio": 4.0 if head == "hire" else 1.0})
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({
        "machine": {"date": "d", "gpu": gpu, "cpu": "c", "torch": "t"}, "seconds": 1,
        "settings": {"reps": 3, "gru": gru}, "records": records}))
    return folder


def test_spread_and_ratios_per_run(tmp_path):
    a = _run(tmp_path / "a", {("32", "last-layer"): 0.010, ("32", "hire"): 0.030, ("64", "last-layer"): 0.020,
                              ("64", "hire"): 0.040, ("64", "pool-cls"): 0.02})
    b = _run(tmp_path / "b", {("32", "last-layer"): 0.020, ("32", "hire"): 0.030, ("64", "last-layer"): 0.020,
                              ("64", "hire"): 0.080})
    out = tmp_path / "spread.md"
    compare_runs.write([a, b], [compare_runs.load(a), compare_runs.load(b)], None, out)
    text = out.read_text()
    assert "| fp32 | 32 | hire | 30.0 | 30.0 | 1.00 | 3.00 / 1.50 | 4.00 |" in text
    assert "| fp32 | 64 | hire | 40.0 | 80.0 | 2.00 | 2.00 / 4.00 | 4.00 |" in text
    assert "pool-cls" not in text  # measured by one run only
    assert "by a factor of 1.00 to 2.00" in text
    assert "The last-layer head's, which every ratio divides by: 1.00 to 2.00." in text
    assert "hire/last-layer step ratio over 2 settings: run 1 2.00 to 3.00 (median 2.50); run 2 1.50 to 4.00" in text
    assert "differ in the GRU path" not in text and "different machines" not in text


def test_mixed_paths_and_machines_are_named(tmp_path):
    a = _run(tmp_path / "a", {("32", "last-layer"): 0.01, ("32", "hire"): 0.03})
    b = _run(tmp_path / "b", {("32", "last-layer"): 0.01, ("32", "hire"): 0.09}, gru="loop", gpu="H")
    out = tmp_path / "spread.md"
    compare_runs.write([a, b], [compare_runs.load(a), compare_runs.load(b)], ["hire", "last-layer"], out)
    text = out.read_text()
    assert "differ in the GRU path" in text and "different machines (G, H)" in text


def test_missing_results_names_the_file(tmp_path):
    with pytest.raises(SystemExit, match=r"results\.json: not found"):
        compare_runs.load(tmp_path)
