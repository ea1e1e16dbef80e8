"""The scripts that refit a committed ``hire probe`` grid: ``scripts/check_probe_fitter.py`` (the batched fitter
against scikit-learn on the grid's cells) and ``benchmarks/bench_probe_grid.py`` (the grid's fitting timed again),
on a tiny grid made here by ``hire probe``; and :func:`hire.probing.grid.grid_task`, which both use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO
from threadpoolctl import threadpool_limits
from tiny import save_tiny_encoder

from hire.cli import main
from hire.data import default_glue_dir, read_glue_split, read_table
from hire.probing.grid import GridTask, grid_task
from hire.probing.tasks import default_senteval_dir

ROOT = REPO
MR, MRPC = default_senteval_dir() / "MR" / "all.tsv", default_glue_dir() / "MRPC" / "train.tsv"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (MR.is_file() and MRPC.is_file()), reason="no MR / MRPC data beside the repo")]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny grid (MR: cross-validation; MRPC: pairs, split) of a tiny encoder: its results.json and cache."""
    texts = [e.text_a for e in read_table(MR, ["sentence"], "label")]
    texts += [t for e in read_glue_split("MRPC", "train") for t in (e.text_a, e.text_b or "")]
    root = tmp_path_factory.mktemp("grid")
    encoder = save_tiny_encoder(root / "encoder", texts)
    out, cache = root / "probe", root / "cache"
    with threadpool_limits(1):
        assert main(["probe", "--encoder", str(encoder), "--labels", "pre", "--task", "MR,MRPC",
                     "--max_train_examples", "60", "--max_eval_examples", "30", "--folds", "3", "--c_grid", "0.1,1",
                     "--cache_dir", str(cache), "--output_dir", str(out), "--mixed_precision", "no",
                     "--device", "cpu", "--max_length", "48"]) == 0
    return out / "results.json", cache


def _script(path: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / path), *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}, timeout=600)


def test_grid_task_gives_the_cached_features_or_says_why_not(grid: tuple[Path, Path]) -> None:
    results_path, cache = grid
    results = json.loads(results_path.read_text())
    task = grid_task(results, "MRPC", "pre", cache)
    assert isinstance(task, GridTask) and task.task.pair and task.folds is None
    a, b = task.features["train"]
    assert b is not None and a.shape[0] == 60 and len(task.sets) == 5 * 4
    assert task.probe.c_grid == (0.1, 1.0) and task.probe.folds == 3
    cv = grid_task(results, "MR", "pre", cache)
    assert isinstance(cv, GridTask) and cv.folds is not None and len(cv.folds) == 3
    results["encoders"][0]["fingerprint"] = "0" * 64  # the grid names other weights than the ones here
    assert grid_task(results, "MR", "pre", cache) == "other weights than the grid's (sha256 differs)"
    results["encoders"][0]["encoder"] = str(results_path.parent / "no-such-encoder")
    assert str(grid_task(results, "MR", "pre", cache)).startswith("encoder not here")


def test_the_fitter_check_passes_on_a_grid_and_adds_runs_to_its_folder(grid: tuple[Path, Path],
                                                                       tmp_path: Path) -> None:
    results_path, cache = grid
    out = tmp_path / "check"
    first = _script("scripts/check_probe_fitter.py", str(out), "--results", str(results_path), "--cache_dir",
                    str(cache), "--task", "MR")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "Checked: 1 of the grid's 2 (task, encoder) pairs" in (out / "report.md").read_text()
    assert "not checked yet: MRPC / pre." in (out / "report.md").read_text()
    second = _script("scripts/check_probe_fitter.py", str(out), "--results", str(results_path), "--cache_dir",
                     str(cache), "--task", "MRPC")
    assert second.returncode == 0, second.stderr[-2000:]
    record = json.loads((out / "results.json").read_text())
    assert [(c["task"], c["encoder"]) for c in record["checks"]] == [("MR", "pre"), ("MRPC", "pre")]
    assert len(record["commands"]) == 2 and all(c["machine"]["cpu_count"] >= 1 for c in record["commands"])
    assert all(c["tight_over_tolerance"] == 0 and len(c["cells"]) >= 20 for c in record["checks"])
    report = (out / "report.md").read_text()
    assert "--task MR`" in report and "--task MRPC`" in report and "where settled at 1e-08): yes" in report
    assert "\n1. `python" in report and "\n2. `python" in report and "2 of the grid's 2" in report
    assert "every pair of the grid" in report and "not checked yet" not in report

    again = _script("scripts/check_probe_fitter.py", str(out), "--results", str(results_path), "--cache_dir",
                    str(cache), "--task", "MR")  # a pair checked again replaces its check
    assert again.returncode == 0, again.stderr[-2000:]
    assert [c["task"] for c in json.loads((out / "results.json").read_text())["checks"]] == ["MRPC", "MR"]

    both = tmp_path / "both"  # two runs at once into one folder (one per core): each keeps the other's checks
    runs = [subprocess.Popen([sys.executable, str(ROOT / "scripts/check_probe_fitter.py"), str(both), "--results",
                              str(results_path), "--cache_dir", str(cache), "--task", task],
                             cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for task in ("MR", "MRPC")]
    assert [r.wait(timeout=600) for r in runs] == [0, 0]
    record = json.loads((both / "results.json").read_text())
    assert sorted(c["task"] for c in record["checks"]) == ["MR", "MRPC"] and len(record["commands"]) == 2
    assert sorted(p.name for p in both.iterdir()) == ["report.md", "results.json"]

    other = _script("scripts/check_probe_fitter.py", str(out), "--results", str(results_path), "--cache_dir",
                    str(cache), "--task", "MR", "--reference_tol", "1e-5")  # not comparable with what is there
    assert other.returncode == 2 and "--reference_tol" in other.stderr and "Traceback" not in other.stderr
    nobody = _script("scripts/check_probe_fitter.py", str(tmp_path / "elsewhere"), "--results", str(results_path),
                     "--encoder", "nobody")
    assert nobody.returncode == 2 and "--encoder nobody" in nobody.stderr and not (tmp_path / "elsewhere").exists()
    missing = _script("scripts/check_probe_fitter.py", str(tmp_path / "elsewhere"), "--results",
                      str(tmp_path / "no-such.json"))
    assert missing.returncode == 2 and "--results" in missing.stderr and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr and not (tmp_path / "elsewhere").exists()


def test_a_cell_over_the_tolerance_is_settled_at_a_tighter_tol(grid: tuple[Path, Path], tmp_path: Path) -> None:
    """Where the two fitters differ by more than --tolerance at --reference_tol (here: any difference, at a loose
    tol), the cell's feature set is fitted again by both at --settle_tol and judged there; --settle does that alone
    for the checks already in OUT."""
    results_path, cache = grid
    out = tmp_path / "check"
    common = ["--results", str(results_path), "--cache_dir", str(cache), "--task", "MR", "--tolerance", "0"]
    loose = _script("scripts/check_probe_fitter.py", str(out), *common, "--reference_tol", "1e-1",
                    "--settle_tol", "1e-1")  # settling at the same tol: still over, so the check fails
    check = json.loads((out / "results.json").read_text())["checks"][0]
    over = [c for c in check["cells"] if abs(c["tight_difference_points"]) > 0]
    assert over, "a tol of 0.1 should leave the two fitters apart somewhere"
    assert all("settled" in c and c["settled"]["tol"] == 0.1 for c in over)
    assert check["settled_cells"] >= len(over) and check["over_at_reference_tol"] == len(over)
    assert (loose.returncode == 1) == (check["tight_over_tolerance"] > 0)
    assert "settled at tol 0.1" in (out / "report.md").read_text()

    again = _script("scripts/check_probe_fitter.py", str(out), *common, "--reference_tol", "1e-1", "--settle")
    assert again.returncode in (0, 1), again.stderr[-2000:]  # nothing left unsettled: nothing fitted
    assert "nothing to settle" in again.stderr
    for cell in check["cells"]:  # settle them afresh at the default (1e-3) from a record without them
        cell.pop("settled", None)
    record = json.loads((out / "results.json").read_text())
    record["checks"] = [check]
    (out / "results.json").write_text(json.dumps(record))
    settled = _script("scripts/check_probe_fitter.py", str(out), *common, "--reference_tol", "1e-1", "--settle")
    assert settled.returncode in (0, 1) and "cells settled at tol 0.001" in settled.stderr, settled.stderr[-2000:]
    after = json.loads((out / "results.json").read_text())
    assert all(c["settled"]["tol"] == 1e-3 for c in after["checks"][0]["cells"] if "settled" in c)
    assert len(after["commands"]) == 2 and "--settle" in after["commands"][-1]["command"]  # no-op: not recorded
    bad = _script("scripts/check_probe_fitter.py", str(tmp_path / "bad"), *common, "--settle_tol", "1e-3")
    assert bad.returncode == 2 and "--settle_tol" in bad.stderr and not (tmp_path / "bad").exists()
    nothing = _script("scripts/check_probe_fitter.py", str(tmp_path / "bad"), *common, "--settle")
    assert nothing.returncode == 2 and "no results.json" in nothing.stderr and not (tmp_path / "bad").exists()


def test_a_retrained_encoder_takes_the_place_of_one_that_is_gone(grid: tuple[Path, Path], tmp_path: Path) -> None:
    """The grid's encoder is gone (a fine-tuned run folder is not committed): the same recipe trained again, named
    by --retrained, gives the same-features check on its own features; the committed scores are not compared."""
    results_path, cache = grid
    results = json.loads(results_path.read_text())
    texts = [e.text_a for e in read_table(MR, ["sentence"], "label")]
    other = save_tiny_encoder(tmp_path / "retrained", texts, max_words=300)  # other weights, the same shape
    results["encoders"][0]["encoder"] = str(tmp_path / "gone")
    moved = tmp_path / "results.json"
    moved.write_text(json.dumps(results))
    args = ["--results", str(moved), "--cache_dir", str(cache), "--task", "MR"]
    skipped = _script("scripts/check_probe_fitter.py", str(tmp_path / "skipped"), *args)
    assert skipped.returncode == 0 and "skipped MR / pre: encoder not here" in (tmp_path / "skipped" / "report.md"
                                                                                ).read_text()
    out = tmp_path / "check"
    run = _script("scripts/check_probe_fitter.py", str(out), *args, "--retrained", f"pre={other}")
    assert run.returncode == 0, run.stderr[-2000:]
    check = json.loads((out / "results.json").read_text())["checks"][0]
    assert check["retrained"] == str(other) and check["tight_over_tolerance"] == 0 and len(check["cells"]) >= 20
    assert check["max_difference_points"] is None and all(c["committed"] is None for c in check["cells"])
    report = (out / "report.md").read_text()
    assert "| MR | pre (retrained) |" in report and "**Retrained**" in report and str(other) in report
    for bad, message in ((f"nobody={other}", "has no encoder 'nobody'"), ("pre", "expected LABEL=PATH"),
                         (f"pre={tmp_path / 'nowhere'}", "no such file or folder"),
                         (f"pre={moved}", "not a model folder")):
        failed = _script("scripts/check_probe_fitter.py", str(tmp_path / "bad"), *args, "--retrained", bad)
        assert failed.returncode == 2 and message in failed.stderr and "Traceback" not in failed.stderr
        assert not (tmp_path / "bad").exists()


def test_the_grid_benchmark_times_both_fitters_task_by_task(grid: tuple[Path, Path], tmp_path: Path) -> None:
    results_path, cache = grid
    out = tmp_path / "bench"
    run = _script("benchmarks/bench_probe_grid.py", str(out), "--results", str(results_path), "--cache_dir",
                  str(cache))
    assert run.returncode == 0, run.stderr[-2000:]
    record = json.loads((out / "results.json").read_text())
    timings = {t["task"]: t for t in record["timings"]}
    assert set(timings) == {"MR", "MRPC"}
    assert timings["MRPC"]["pair"] and timings["MRPC"]["widths"] == [4 * 32, 4 * 64, 4 * 96]
    for t in timings.values():
        assert t["batched_seconds"] > 0 and t["reference_seconds"] > 0 and t["max_difference_points"] >= 0
    report = (out / "report.md").read_text()
    assert "| MR | pre | cv |" in report and "Over the 2 (task, encoder) pairs timed with both" in report

    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for bad, message in ((["--task", "Nope"], "--task Nope"), (["--threads", "0"], "--threads 0"),
                         (["--results", str(tmp_path / "no-such.json")], "no such file")):
        failed = _script("benchmarks/bench_probe_grid.py", str(out), "--results", str(results_path), *bad)
        assert failed.returncode == 2 and message in failed.stderr and "Traceback" not in failed.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    encoded = _script("benchmarks/bench_probe_grid.py", str(out), "--results", str(results_path), "--task", "MR",
                      "--time_encoding")  # the encoding again, into an empty cache: the fitters' figures stay
    assert encoded.returncode == 0, encoded.stderr[-2000:]
    again = {t["task"]: t for t in json.loads((out / "results.json").read_text())["timings"]}
    assert again["MR"]["encode_here_seconds"] > 0 and again["MR"]["encode_run"] == 2
    assert {k: v for k, v in again["MR"].items() if not k.startswith("encode_")} == \
        {k: v for k, v in timings["MR"].items() if not k.startswith("encode_")}
    assert "encode_here_seconds" not in again["MRPC"]
    assert "Fitting against encoding, both on this machine, over the 1 (task, encoder) pairs" in \
        (out / "report.md").read_text()

    part = tmp_path / "part"  # MRPC not timed there: --time_encoding encodes MR alone and says so
    part.mkdir()
    record = json.loads((out / "results.json").read_text())
    record["timings"] = [t for t in record["timings"] if t["task"] == "MR"]
    (part / "results.json").write_text(json.dumps(record))
    partly = _script("benchmarks/bench_probe_grid.py", str(part), "--results", str(results_path), "--time_encoding")
    assert partly.returncode == 0 and "leaves out MRPC / pre" in partly.stderr, partly.stderr[-2000:]
    assert [t["task"] for t in json.loads((part / "results.json").read_text())["timings"]] == ["MR"]

    fresh = tmp_path / "fresh"
    untimed = _script("benchmarks/bench_probe_grid.py", str(fresh), "--results", str(results_path), "--task", "MR",
                      "--time_encoding")  # nothing timed there yet: nothing to put the encoding beside
    assert untimed.returncode == 2 and "not timed" in untimed.stderr and not fresh.exists()
