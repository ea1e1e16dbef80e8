"""``benchmarks/ridge_floor.py``: the cost of exact leave-one-out ridge at a grid's regression task's sizes, on a
hand-made grid record small enough to time in a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

ROOT = REPO


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ridge_floor.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)


def _grid(tmp_path: Path) -> tuple[Path, Path]:
    """A grid record: a ridge task of 120 training rows with sets of width 48 (x3, the D x D route) and 240 (x2,
    the kernel route), and a logistic task; and an encoding report of both tasks."""
    rows = [{"dim": 48}] * 3 + [{"dim": 240}] * 2
    grid = {"config": {"probe": {"alpha_grid": [0.1, 1.0, 10.0]}},
            "tasks": {"REG": {"regression": True, "examples": {"train": 120, "dev": 30},
                              "results": {"pre": {"rows": rows}}},
                      "CLS": {"regression": False, "examples": {"train": 120}, "results": {"pre": {"rows": rows}}}}}
    def timing(task: str, encoder: str, fit: float, encode: float, **more: float) -> dict:
        return {"task": task, "encoder": encoder, "batched_seconds": fit, "encode_here_seconds": encode, **more}

    encoding = {"timings": [timing("REG", "pre", 9.0, 4.0, reference_seconds=12.0),
                            timing("CLS", "pre", 6.0, 5.0, reference_seconds=30.0), timing("CLS", "other", 1.0, 100.0)]}
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    (tmp_path / "enc.json").write_text(json.dumps(encoding))
    return tmp_path / "grid.json", tmp_path / "enc.json"


def test_the_floor_times_each_width_on_the_fitters_route_and_puts_it_beside_encoding(tmp_path: Path) -> None:
    grid, enc = _grid(tmp_path)
    out = tmp_path / "out"
    run = _script(str(out), "--results", str(grid), "--encoding", str(enc), "--task", "REG", "--encoder", "pre")
    assert run.returncode == 0, run.stderr[-2000:]
    r = json.loads((out / "results.json").read_text())
    narrow, wide = r["timings"]
    assert (narrow["width"], narrow["sets"], wide["width"], wide["sets"]) == (48, 3, 240, 2)
    assert narrow["route"].startswith("D x D") and "one_eigh_seconds" not in narrow  # 48 <= 120 rows
    assert wide["route"].startswith("N x N") and "(3)" in wide["route"]  # 240 > 120: a factor per alpha
    assert wide["decomposition_seconds"] == 3 * wide["per_alpha_seconds"] and wide["one_eigh_seconds"] > 0
    assert r["floor_seconds"] == round(3 * narrow["set_seconds"] + 2 * wide["set_seconds"], 1)
    # only this encoder's tasks: 4 + 5 s of encoding; the other task fitted in 6 s, scikit-learn in 30 s
    assert r["grid_encoding_seconds"] == 9.0 and r["other_tasks"] == ["CLS"]
    assert r["other_tasks_batched_seconds"] == 6.0 and r["other_tasks_reference_seconds"] == 30.0
    assert r["left_for_other_tasks_seconds"] == round(9.0 - r["floor_seconds"], 1)
    report = (out / "report.md").read_text()
    assert "| 240 | 2 | N x N kernel" in report and "**9.0 s**" in report and "(CLS)" in report


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # as when the script runs: it imports bench_common beside it
    from ridge_floor import main

    grid, enc = _grid(tmp_path)
    out = tmp_path / "out"
    for bad, message in ((["--task", "CLS"], "--task CLS: not a regression task"),
                         (["--encoder", "nobody"], "--encoder nobody: no rows"),
                         (["--threads", "0"], "--threads 0"),
                         (["--results", str(tmp_path / "none.json")], "none.json: file not found")):
        assert main([str(out), "--results", str(grid), "--encoding", str(enc), "--task", "REG", "--encoder", "pre",
                     *bad]) == 2
        assert message in capsys.readouterr().err and not out.exists()
    (tmp_path / "notjson.json").write_text("[1")
    other = tmp_path / "other"  # another report's folder: never written over
    other.mkdir()
    (other / "report.md").write_text("theirs")
    for bad, message in ((["--results", str(tmp_path / "notjson.json")], "not a probe grid's results.json"),
                         (["--encoding", str(grid)], "KeyError"), ([], "holds files this script did not write")):
        target = other if not bad else out
        assert main([str(target), "--results", str(grid), "--encoding", str(enc), "--task", "REG", "--encoder", "pre",
                     *bad]) == 2
        assert message in capsys.readouterr().err and not out.exists()
    assert [p.name for p in other.iterdir()] == ["report.md"] and (other / "report.md").read_text() == "theirs"
    (tmp_path / "file").write_text("")
    assert main([str(tmp_path / "file"), "--results", str(grid), "--encoding", str(enc), "--task", "REG",
                 "--encoder", "pre"]) == 2
    assert "is a file" in capsys.readouterr().err
