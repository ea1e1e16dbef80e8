"""``hire experiment``: a grid run end to end on a tiny random encoder and real MRPC rows, in slices; records;
reports regenerated from records alone, byte for byte; statistics against hand-computed values; bad files."""

from __future__ import annotations

import fcntl
import gzip
import json
import math
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from paths import REPO
from tiny import save_tiny_encoder

from hire.cli import main
from hire.data import default_glue_dir, read_glue_split
from hire.experiments import loop
from hire.experiments.experiment import Experiment, load_experiment
from hire.experiments.figures import examples_counts
from hire.experiments.loop import run_experiment
from hire.experiments.publish import write_experiment_report
from hire.experiments.records import collect, load_records, run_dir
from hire.experiments.spec import Cell
from hire.experiments.stats import bootstrap_mean_interval, glue_average, paired, summarize, wilcoxon_p
from hire.experiments.status import (
    CellClaim,
    CellStatus,
    Device,
    Estimates,
    cell_statuses,
    device_of,
    run_progress,
    status_report,
)
from hire.experiments.tables import markdown as table_markdown
from hire.experiments.tables import precision_text
from hire.runs import mark_run_folder

GLUE = default_glue_dir()
ROOT = REPO
needs_glue = pytest.mark.skipif(not (GLUE / "MRPC").is_dir(), reason=f"no GLUE data at {GLUE}")

TINY = """\
name: tiny
description: two heads, two seeds, two steps each
base:
  options:
    data.task: MRPC
    model.encoder: {encoder}
    data.max_train_examples: 16
    data.max_eval_examples: 8
    train.batch_size: 8
    train.max_steps: 2
    train.lr: 1.0e-3
    train.mixed_precision: "no"
seeds: [1, 2]
grid:
  model.head: [last-layer, hire]
baseline: {{model.head: last-layer}}
tables:
  main: {{title: Tiny table, tasks: [MRPC]}}
figure2: {{examples: 5}}
"""


@dataclass
class Grid:
    path: Path
    runs: Path
    results: Path  # experiments/<name>
    logs: list[list[str]]  # what each of the three `run`s said
    states_after_one: list[str]
    mtimes_before_third: dict[Path, int]


def dirs(grid: Grid, results: Path | None = None) -> list[str]:
    return ["--runs_dir", str(grid.runs), "--experiments_dir", str(results or grid.results.parent)]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Grid:
    """Advance the 2 x 2 grid in slices: one cell (--max_runs 1), then the rest, then nothing is left."""
    if not (GLUE / "MRPC").is_dir():
        pytest.skip(f"no GLUE data at {GLUE}")
    root = tmp_path_factory.mktemp("experiment")
    texts = [t for e in read_glue_split("MRPC", "train")[:16] + read_glue_split("MRPC", "dev")[:8]
             for t in (e.text_a, e.text_b or "")]
    encoder = save_tiny_encoder(root / "encoder", texts)
    path = root / "tiny.yaml"
    path.write_text(TINY.format(encoder=encoder))
    exp, runs, results = load_experiment(path), root / "runs", root / "experiments" / "tiny"
    logs: list[list[str]] = [[], [], []]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OMP_NUM_THREADS", "1")  # tiny tensors: a second thread only spins (the cells run faster)
        assert run_experiment(exp, runs, results, max_runs=1, say=logs[0].append) == 0
        states = [s.state for s in cell_statuses(exp, runs)]
        assert run_experiment(exp, runs, results, say=logs[1].append) == 0
        mtimes = {p: p.stat().st_mtime_ns for p in [*runs.rglob("metrics.json"), *results.rglob("*.json*")]}
        assert run_experiment(exp, runs, results, say=logs[2].append) == 0
    return Grid(path, runs, results, logs, states, mtimes)


@needs_glue
@pytest.mark.slow  # a grid of real runs; skipping finished cells alone: test_runners_with_other_runs_dirs_never_...
def test_runs_advance_in_slices_and_finished_cells_are_skipped(grid: Grid, capsys: pytest.CaptureFixture) -> None:
    assert grid.states_after_one == ["done", "left", "left", "left"]  # seed-major: last-layer seed 1 first
    assert any("--max_runs 1 reached; 3 cells left" in line for line in grid.logs[0])
    assert "tiny: 3 cells finished now, 1 were done already, 0 failed" in grid.logs[1][-1]
    assert "tiny: 0 cells finished now, 4 were done already, 0 failed" in grid.logs[2][-1]
    assert {p: p.stat().st_mtime_ns for p in grid.mtimes_before_third} == grid.mtimes_before_third
    cells = sorted(p.name for p in (grid.runs / "tiny").iterdir() if p.name != "logs")
    assert cells == ["MRPC__hire__seed1", "MRPC__hire__seed2", "MRPC__last-layer__seed1", "MRPC__last-layer__seed2"]
    for cell in cells:  # compared on dev: no test-set prediction in a cell
        assert (grid.runs / "tiny" / cell / "predictions" / "dev.jsonl").is_file()
        assert not (grid.runs / "tiny" / cell / "submission").exists()
    assert main(["experiment", "status", str(grid.path), *dirs(grid)]) == 0
    assert "4 cells: 4 done, 0 recorded, 0 running, 0 started, 0 left, 0 changed" in capsys.readouterr().out
    assert main(["experiment", "status", str(grid.path), "--only", "model.head=hire", *dirs(grid)]) == 0
    assert "2 cells: 2 done" in capsys.readouterr().out


@needs_glue
def test_a_fresh_checkout_does_not_retrain_recorded_cells(grid: Grid, tmp_path: Path) -> None:
    """Run folders are not committed: in a new checkout the committed records stand for the finished cells,
    a missing record (or one whose configuration the file has changed since) means the cell is trained."""
    results = tmp_path / "experiments" / "tiny"
    shutil.copytree(grid.results / "records", results / "records")
    exp, runs = load_experiment(grid.path), tmp_path / "runs"
    assert [s.state for s in cell_statuses(exp, runs, results / "records")] == ["recorded"] * 4
    assert [s.state for s in cell_statuses(exp, runs)] == ["left"] * 4  # no records given: nothing known
    (results / "records" / "MRPC__hire__seed2.json").unlink()
    stale = results / "records" / "MRPC__last-layer__seed2.json"
    record = json.loads(stale.read_text())
    record["config"]["train"]["lr"] = 0.5  # the file has changed since this record was made
    stale.write_text(json.dumps(record))
    said: list[str] = []
    assert run_experiment(exp, runs, results, dry_run=True, say=said.append) == 0
    assert "tiny: 4 cells selected: 2 done, 2 to run" in said[0]
    assert sorted(line.split()[2] for line in said if line.startswith("would run")) == [
        "MRPC__hire__seed2", "MRPC__last-layer__seed2"]
    assert not runs.exists() or not any((runs / "tiny").glob("MRPC*"))


@pytest.mark.slow  # CI's slow run (two cells trained again); fast: the bad-input test below
def test_check_rerun_trains_a_recorded_cell_again_and_finds_it_identical_or_says_what_differs(
        grid: Grid, tmp_path: Path) -> None:
    """scripts/check_rerun.py: a recorded cell trained again from scratch (its own scratch folders) repeats every
    number of its record; a committed record that differs (here: edited) is reported number by number."""
    def check(out: Path, experiments: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "scripts" / "check_rerun.py"), str(out), "--experiment",
                               str(grid.path), "--cell", "MRPC__hire__seed1", "--experiments_dir", str(experiments)],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)

    same = check(tmp_path / "same", grid.results.parent)
    assert same.returncode == 0, same.stderr[-2000:]
    result = json.loads((tmp_path / "same" / "results.json").read_text())["checks"][0]
    assert result["identical"] and result["compared"] >= 5 and result["threads"] == 1, result
    assert "| tiny | `MRPC__hire__seed1` | 1 |" in (tmp_path / "same" / "report.md").read_text()

    edited = tmp_path / "experiments" / "tiny" / "records"
    shutil.copytree(grid.results / "records", edited)
    record = json.loads((edited / "MRPC__hire__seed1.json").read_text())
    record["dev"]["dev"]["accuracy"] += 0.25
    (edited / "MRPC__hire__seed1.json").write_text(json.dumps(record))
    differs = check(tmp_path / "differs", tmp_path / "experiments")
    assert differs.returncode == 0, differs.stderr[-2000:]
    result = json.loads((tmp_path / "differs" / "results.json").read_text())["checks"][0]
    assert not result["identical"] and list(result["differences"]) == ["dev dev accuracy"]
    assert abs(result["largest_score_difference"] - 0.25) < 1e-9


def test_check_rerun_refuses_bad_input_in_one_line(grid: Grid, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from check_rerun import main as check_rerun

    base = ["--experiment", str(grid.path), "--experiments_dir", str(grid.results.parent)]
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "old").write_text("")
    for args, message in ((["--cell", "nope"], "--cell nope: no record"),
                          (["--cell", "MRPC__hire__seed1", "--experiment", str(tmp_path / "none.yaml")],
                           "none.yaml: file not found"),
                          (["--cell", "MRPC__hire__seed1", "--work", str(tmp_path / "busy")], "is not empty")):
        assert check_rerun([str(tmp_path / "bad"), *base, *args]) == 2
        assert message in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert check_rerun([str(grid.results), *base, "--cell", "MRPC__hire__seed1"]) == 2  # the experiment's own folder
    assert "did not write" in capsys.readouterr().err and not (grid.results / "results.json").exists()


@pytest.mark.slow  # CI's slow run; fast: test_runs_advance_in_slices_and_finished_cells_are_skipped
@needs_glue
def test_jobs_train_cells_at_once_with_the_same_results(grid: Grid, tmp_path: Path) -> None:
    """--jobs 2 trains the grid two cells at a time, their output in their logs, and every record's score and
    dev curve equal the cells trained one at a time (same seeds, same data order, one thread each)."""
    exp, runs, results = load_experiment(grid.path), tmp_path / "runs", tmp_path / "experiments" / "tiny"
    said: list[str] = []
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OMP_NUM_THREADS", "1")
        assert run_experiment(exp, runs, results, jobs=2, say=said.append) == 0
    assert sum("started" in line and "of 2 at once" in line for line in said) == 4
    assert sum(line.startswith("=== MRPC__") and "finished (dev score" in line for line in said) == 4
    assert said[-1].startswith("tiny: 4 cells finished now, 0 were done already, 0 failed")
    for cell in ("MRPC__hire__seed1", "MRPC__hire__seed2", "MRPC__last-layer__seed1", "MRPC__last-layer__seed2"):
        ours, theirs = (json.loads((r / "records" / f"{cell}.json").read_text()) for r in (results, grid.results))
        assert ours["score"] == theirs["score"] and ours["curve"] == theirs["curve"]
        assert "train" in (runs / "tiny" / "logs" / f"{cell}.log").read_text()


def test_jobs_overlap_and_report_each_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two cells of --jobs 2 run at the same time (their processes' lifetimes overlap), each failure is
    reported with its log, and a bad count is refused."""
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp = load_experiment(tmp_path / "fake.yaml")
    script = ("import sys, time, pathlib; p = pathlib.Path(sys.argv[1]); p.parent.mkdir(parents=True, exist_ok=True); "
              "p.write_text(f'{time.time()} '); time.sleep(1.5); p.write_text(p.read_text() + f'{time.time()}'); "
              "print('hire train: error: boom'); sys.exit(3)")
    monkeypatch.setattr(loop, "train_command",
                        lambda cell, run: [sys.executable, "-c", script, str(run.parent / f"{cell.id}.times")])
    said: list[str] = []
    assert run_experiment(exp, tmp_path / "runs", tmp_path / "out", jobs=2, say=said.append) == 1
    times = sorted((tmp_path / "runs" / "fake").glob("*.times"))
    (a0, a1), (b0, b1) = (map(float, p.read_text().split()) for p in times)
    assert a0 < b1 and b0 < a1  # both were alive at once
    assert sorted(line.split(":")[0] for line in said if "failed (exit 3): hire train: error: boom" in line) == [
        "RTE__hire__seed1", "RTE__last-layer__seed1"]
    assert said[-1].startswith("fake: 0 cells finished now, 0 were done already, 2 failed")
    with pytest.raises(ValueError, match="jobs"):
        run_experiment(exp, tmp_path / "runs", tmp_path / "out", jobs=0)


@needs_glue
def test_records_hold_config_metrics_curve_machine_and_layer_weights(grid: Grid) -> None:
    records = grid.results / "records"
    for cell in ("MRPC__hire__seed1", "MRPC__hire__seed2", "MRPC__last-layer__seed1", "MRPC__last-layer__seed2"):
        r = json.loads((records / f"{cell}.json").read_text())
        assert r["cell"] == cell and r["config"]["model"]["head"] == cell.split("__")[1]
        assert r["config"]["train"]["seed"] == int(cell[-1])
        assert "output_dir" not in r["config"] and "predict_test" not in r["config"]
        assert r["steps"] == 2 and r["best_step"] == 2 and r["mixed_precision"] == "no"
        assert set(r["dev"]["dev"]) == {"accuracy", "f1", "score"} and r["score"] == r["dev"]["dev"]["score"]
        assert r["train_seconds"] > 0 and r["wall_seconds"] > 0 and r["machine"]["cpu_count"] >= 1
        assert [e["step"] for e in r["curve"]] == [2]
        gz = records / f"{cell}.layer_weights.json.gz"
        if "hire" in cell.split("__")[1]:
            mean = r["layer_weights"]["dev"]["mean"]
            assert len(mean) == 3 and abs(sum(mean) - 1) < 1e-4 and r["layer_weights"]["dev"]["n"] == 8
            assert gz.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime 0: the same weights give the same bytes
        else:
            assert r["layer_weights"] == {} and not gz.exists()
    exp = load_experiment(grid.path)
    again = collect(exp, grid.runs, grid.results)  # re-collecting changes nothing
    assert again["written"] == [] and len(again["unchanged"]) == 4


@needs_glue
def test_report_from_records_alone_is_byte_identical(grid: Grid, tmp_path: Path) -> None:
    results = tmp_path / "experiments"
    shutil.copytree(grid.results / "records", results / "tiny" / "records")  # no run folders at all
    args = ["experiment", "report", str(grid.path), "--quiet", "--runs_dir", str(tmp_path / "none"),
            "--experiments_dir", str(results)]
    assert main(args) == 0
    first = {p: p.read_bytes() for p in sorted((results / "tiny").rglob("*")) if p.is_file()}
    for p in first:
        if "records" not in p.parts:
            p.unlink()
    assert main(args) == 0
    second = {p: p.read_bytes() for p in sorted((results / "tiny").rglob("*")) if p.is_file()}
    assert second == first
    names = {str(p.relative_to(results / "tiny")) for p in first}
    assert {"tables/main.md", "tables/main.csv", "tables/main.json", "figures/figure2.png", "figures/main_seeds.png",
            "figures/figure2_tasks.csv", "figures/figure2_examples.csv", "report.html", "report.md",
            "summary.json", "experiment.yaml"} <= names
    table = json.loads(first[results / "tiny" / "tables" / "main.json"])
    assert [r["label"] for r in table["rows"]] == ["last-layer", "hire"]
    assert table["rows"][1]["tasks"]["MRPC"]["vs_baseline"]["seeds"] == [1, 2]
    markdown = first[results / "tiny" / "tables" / "main.md"].decode()
    assert "## Tiny table" in markdown and "median of n=2 seeds" in markdown and "| hire | " in markdown
    page = first[results / "tiny" / "report.html"].decode()
    assert page.count("data:image/png;base64,") == 2 and "<table>" in page and "model.head: [last-layer, hire]" in page
    assert len(first[results / "tiny" / "figures" / "figure2_examples.csv"].decode().splitlines()) == 1 + 5
    # the right panel, counted, under the figure in report.md and in its caption in report.html
    note = first[results / "tiny" / "report.md"].decode().split("![figure2](figures/figure2.png)\n\n")[1]
    assert note.startswith("Figure 2, right (MRPC__hire__seed") and "of the first 5 MRPC dev examples, " in note
    assert note.splitlines()[0] in page


@needs_glue
def test_layer_weights_table_counts_the_states_whose_scores_died(grid: Grid, tmp_path: Path) -> None:
    results = tmp_path / "experiments" / "tiny"
    shutil.copytree(grid.results / "records", results / "records")
    record = results / "records" / "MRPC__hire__seed2.json"
    data = json.loads(record.read_text())
    data["layer_weights"]["dev"]["mean"] = [0.3, 0.3, 0.4]  # two states at alpha = 0 on every example
    record.write_text(json.dumps(data))
    write_experiment_report(load_experiment(grid.path), results)
    lines = (results / "tables" / "layer_weights.csv").read_text().splitlines()
    assert lines[0] == "run,score,h0,h1,h2,flat states"
    rows = {line.split(",")[0]: line.split(",") for line in lines[1:]}
    assert sorted(rows) == ["MRPC__hire__seed1", "MRPC__hire__seed2"]  # last-layer weights no states
    assert rows["MRPC__hire__seed2"][2:] == ["0.3000", "0.3000", "0.4000", "2"]
    assert abs(sum(map(float, rows["MRPC__hire__seed1"][2:5])) - 1) < 1e-3
    assert "## Mean importance score per hidden state" in (results / "report.md").read_text()
    page = (results / "report.html").read_text()
    assert "<h2>Mean importance score per hidden state (dev)</h2>" in page and "<td>0.3000</td>" in page


# -- runner behaviour without training ---------------------------------------------------------------
FAKE = """\
base: {options: {data.task: RTE, model.encoder: unused}}
seeds: [1]
grid: {model.head: [last-layer, hire]}
"""


def record_text(**fields: Any) -> str:
    """A record as `hire experiment collect` writes one, holding ``fields`` (a cell, a configuration and a score
    where the test gives none: every record has them)."""
    return json.dumps({"cell": "RTE__hire__seed9", "config": {}, "score": 0.5, **fields})


def fake_train(code: int) -> list[str]:
    return [sys.executable, "-c", f"import sys; print('hire train: error: boom'); sys.exit({code})"]


@pytest.mark.parametrize("stop", [False, True])
def test_a_failing_cell_is_reported_and_the_runner_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           stop: bool) -> None:
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp = load_experiment(tmp_path / "fake.yaml")
    monkeypatch.setattr(loop, "train_command", lambda cell, run: fake_train(2))
    said: list[str] = []
    assert run_experiment(exp, tmp_path / "runs", tmp_path / "out", stop_on_error=stop, say=said.append) == 1
    failures = [line for line in said if "failed (exit 2): hire train: error: boom" in line]
    assert len(failures) == (1 if stop else 2)
    assert said[-1].startswith("fake: 0 cells finished now, 0 were done already, " + ("1" if stop else "2"))
    assert not list((tmp_path / "out" / "records").glob("*.json"))
    assert not list((tmp_path / "runs" / "fake").glob("RTE__*/*"))  # nothing written into a folder with no run
    assert "boom" in (tmp_path / "runs" / "fake" / "logs" / "RTE__last-layer__seed1.log").read_text()


def test_a_cell_of_a_runner_started_in_the_background_still_stops_at_ctrl_c(tmp_path: Path) -> None:
    """`hire experiment run ... &` (a script, nohup) inherits SIGINT ignored; its `hire train` gets Ctrl-C back,
    so `kill -INT` stops a cell cleanly at a point it resumes from, as the cluster path's jobs do."""
    child = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = loop.stream([sys.executable, "-c", child], tmp_path / "cell.log", echo=False)
    finally:
        signal.signal(signal.SIGINT, before)
    assert code == 0 and (tmp_path / "cell.log").read_text().splitlines()[-1] == "True"


def test_time_budget_and_estimates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp = load_experiment(tmp_path / "fake.yaml")
    records = tmp_path / "out" / "records"
    records.mkdir(parents=True)
    for i, seconds in enumerate([50, 70, 300]):  # median of the hire records: 70 s
        (records / f"r{i}.json").write_text(record_text(task="RTE", head="hire", train_seconds=seconds))
    estimates = Estimates.from_records(records, default_minutes=5)
    assert estimates.seconds(exp.cell("RTE__hire__seed1")) == 70
    assert estimates.seconds(exp.cell("RTE__last-layer__seed1")) == 300  # no record: the default
    # Records name their machine and precision: this device's records in the cell's precision decide, else this
    # device's in any precision, else those of a device of the same kind (a GPU's minutes are a CPU's hours).
    epyc, h100 = {"cpu": "EPYC"}, {"cpu": "EPYC", "gpu": "H100"}
    for i, (seconds, machine, precision) in enumerate([(60, h100, "bf16"), (80, h100, "bf16"), (4000, epyc, "bf16"),
                                                       (9000, epyc, "no"), (5000, {"cpu": "Xeon"}, "no")]):
        (records / f"m{i}.json").write_text(record_text(task="RTE", head="last-layer", wall_seconds=seconds,
                                                        machine=machine, mixed_precision=precision))
    cell = exp.cell("RTE__last-layer__seed1")  # set to auto
    bf16_epyc, fp32_epyc = Device("EPYC", False, "bf16"), Device("EPYC", False, "no")
    assert Estimates.from_records(records, 5, device=bf16_epyc).seconds(cell) == 4000
    assert Estimates.from_records(records, 5, device=fp32_epyc).seconds(cell) == 9000
    assert Estimates.from_records(records, 5, device=Device("EPYC", False)).seconds(cell) == 6500  # unknown: any
    assert Estimates.from_records(records, 5, device=Device("H100", True, "bf16")).seconds(cell) == 70
    m2 = Estimates.from_records(records, 5, device=Device("M2", False, "no"))  # the CPUs' records in its fp32
    assert m2.seconds(cell) == 7000 and m2.basis(cell) == "another device in its precision"
    assert Estimates.from_records(records, 5, device=Device("A100", True, "bf16")).seconds(cell) == 70  # the GPU's
    assert Estimates.from_records(records, 5, device=bf16_epyc).seconds(exp.cell("RTE__hire__seed1")) == 70
    cpu_only = tmp_path / "cpu-only"
    cpu_only.mkdir()
    (cpu_only / "r.json").write_text(record_text(task="RTE", head="hire", wall_seconds=3000, machine=epyc))
    on_a_gpu = Estimates.from_records(cpu_only, 5, device=Device("A100", True, "bf16"))
    assert on_a_gpu.seconds(exp.cell("RTE__hire__seed1")) == 300 and not on_a_gpu.known(exp.cell("RTE__hire__seed1"))
    assert device_of({"cpu": "EPYC", "gpu": "H100"}) == ("H100", True, None, None) and device_of({}) is None
    assert device_of({"cpu": "EPYC", "fast_bf16_cpu": False}) == ("EPYC", False, None, False)
    for path in records.glob("m*.json"):
        path.unlink()
    monkeypatch.setattr(loop, "train_command", lambda cell, run: fake_train(0))
    said: list[str] = []
    assert run_experiment(exp, tmp_path / "runs", tmp_path / "out", time_budget=4, default_minutes=5,
                          say=said.append) == 0
    assert any(line.startswith("stopping before RTE__last-layer__seed1: it takes about 5 min") for line in said)


def test_a_cpu_of_the_same_name_without_bf16_units_is_another_device(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An "AMD EPYC" with bf16 units ran HIRE in bf16 in 61 minutes; one without runs `auto` in fp32 several times
    slower, so its estimate is not those minutes: it comes from fp32 records on a CPU, and the runner says so."""
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp = load_experiment(tmp_path / "fake.yaml")
    records = tmp_path / "out" / "records"
    records.mkdir(parents=True)
    for i, (seconds, machine, precision) in enumerate([
            (3660, {"cpu": "AMD EPYC", "fast_bf16_cpu": True}, "bf16"),
            (21000, {"cpu": "Intel Xeon", "fast_bf16_cpu": False}, "no")]):
        (records / f"r{i}.json").write_text(record_text(task="RTE", head="hire", wall_seconds=seconds,
                                                        machine=machine, mixed_precision=precision))
    cell = exp.cell("RTE__hire__seed1")
    with_units, without = Device("AMD EPYC", False, "bf16", True), Device("AMD EPYC", False, "no", False)
    here = Estimates.from_records(records, 5, device=with_units)
    assert here.seconds(cell) == 3660 and here.basis(cell) == "this device in its precision"
    there = Estimates.from_records(records, 5, device=without)
    assert there.seconds(cell) == 21000 and there.basis(cell) == "another device in its precision"
    unknown = Estimates.from_records(records, 5, device=Device("AMD EPYC", False, "no"))  # an older record's device
    assert unknown.seconds(cell) == 3660 and unknown.basis(cell) == "this device in another precision"
    assert not without.same(with_units) and without.same(Device("AMD EPYC", False)) and not without.same(None)
    monkeypatch.setattr(loop, "this_device", lambda: without)
    monkeypatch.setattr(loop, "train_command", lambda cell, run: fake_train(0))
    said: list[str] = []
    run_experiment(exp, tmp_path / "runs", tmp_path / "out", only={"cell": ["RTE__hire__seed1"]}, say=said.append)
    assert any("RTE__hire__seed1: about 350 min, from records of another device in its precision" in line
               for line in said), said


def test_estimates_prefer_the_records_of_the_cells_own_setting(tmp_path: Path) -> None:
    """A pairwise loss or a frozen encoder changes a cell's time: the records of the cell's own options (all but the
    seed) decide where there are any, for the time and for a started cell's steps; else its task and head's."""
    grid = "grid: {model.head: [hire], train.rank_loss: [pointwise, pairwise]}"
    (tmp_path / "grid.yaml").write_text(FAKE.replace("grid: {model.head: [last-layer, hire]}", grid))
    exp = load_experiment(tmp_path / "grid.yaml")
    pairwise = exp.cell("RTE__hire__rank_loss=pairwise__seed1")
    pointwise = exp.cell("RTE__hire__rank_loss=pointwise__seed1")
    records = tmp_path / "records"
    records.mkdir()
    for i, (loss, seconds, steps) in enumerate([("pointwise", 3600, 1800), ("pointwise", 3700, 1911),
                                                ("pointwise", 3500, 1800), ("pairwise", 5100, 813)]):
        options = {"data.task": "RTE", "model.head": "hire", "train.rank_loss": loss, "train.seed": i + 1}
        (records / f"r{i}.json").write_text(record_text(task="RTE", head="hire", train_seconds=seconds, steps=steps,
                                                        options=options))
    estimates = Estimates.from_records(records, default_minutes=5)
    assert estimates.seconds(pairwise) == 5100 and estimates.seconds(pointwise) == 3600
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("train:\n  epochs: 3\n  max_steps: null\n")
    (run / "state.json").write_text(json.dumps({"step": 400, "train_seconds": 2400.0}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 271, "epoch": 1.0}) + "\n")
    assert estimates.seconds_left(CellStatus(pairwise, run, "started")) == 6 * (813 - 400)  # not 1800's steps
    (tmp_path / "other.yaml").write_text(FAKE)  # the loss left at its default (pointwise) is that setting too
    assert estimates.seconds(load_experiment(tmp_path / "other.yaml").cell("RTE__hire__seed1")) == 3600


def test_estimates_match_a_task_by_its_option_value_not_its_display_name(tmp_path: Path) -> None:
    """A token or ranking task's record names it for display (CoNLL-2003, WikiQA) where the cell has the option's
    value (conll2003, wikiqa): the estimate still comes from that record, not the default."""
    (tmp_path / "ner.yaml").write_text(FAKE.replace("data.task: RTE", "data.task: conll2003"))
    exp = load_experiment(tmp_path / "ner.yaml")
    cell = next(c for c in exp.cells if c.head == "hire")
    (tmp_path / "r.json").write_text(record_text(task="CoNLL-2003", head="hire", train_seconds=420,
                                                 config={"data": {"task": "conll2003"}}))
    estimates = Estimates.from_records(tmp_path, default_minutes=30)
    assert cell.task == "conll2003" and estimates.known(cell) and estimates.seconds(cell) == 420


def test_a_started_cell_is_estimated_from_its_own_pace(tmp_path: Path) -> None:
    """A started cell's time left is its seconds per step so far times the steps it has left: up to the median
    length of its task and head's records where it is short of that, else up to its step limit."""
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp = load_experiment(tmp_path / "fake.yaml")
    cell = exp.cell("RTE__hire__seed1")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("train:\n  epochs: 10\n  max_steps: null\n")
    (run / "state.json").write_text(json.dumps({"step": 300, "train_seconds": 3000.0}))
    started = CellStatus(cell, run, "started")
    assert run_progress(run) == (300, 3000.0, None, None)  # no evaluation yet: the steps per epoch are unknown
    records = tmp_path / "records"
    records.mkdir()
    assert Estimates.from_records(records, 5).seconds_left(started) == 300  # nothing to go by: the default
    (run / "metrics.jsonl").write_text('{"step": 180, "ep')  # a kill mid-write leaves the last line cut short
    assert run_progress(run) == (300, 3000.0, None, None)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 180, "epoch": 1.0}) + "\n")
    assert run_progress(run) == (300, 3000.0, 1800, None)  # 10 epochs of 180 steps; no best step yet
    assert Estimates.from_records(records, 5).seconds_left(started) == 10 * 1500  # up to the limit
    for i, steps in enumerate([1080, 1800, 1620]):  # another device's records: their lengths count, not times
        (records / f"r{i}.json").write_text(record_text(task="RTE", head="hire", steps=steps, train_seconds=60,
                                                                  machine={"gpu": "H100"}))
    estimates = Estimates.from_records(records, 5, device=Device("EPYC", False, "bf16"))
    assert estimates.seconds(cell) == 300  # a GPU's minutes say nothing about this CPU
    assert estimates.seconds_left(started) == 10 * (1620 - 300)  # up to the records' median length
    assert estimates.seconds_left(CellStatus(cell, run, "left")) == 300  # not started: the estimate as before
    (run / "state.json").write_text(json.dumps({"step": 1700, "train_seconds": 17000.0}))
    assert estimates.seconds_left(started) == 10 * 100  # past the median: up to the limit
    lines = status_report(exp, [started], estimates, listing=True)
    assert lines[0].endswith("about 17 min left")
    assert lines[-1] == "  started  RTE__hire__seed1  (step 1700 of at most 1800, 4.7 h so far, about 17 min left)"
    (run / "config.yaml").write_text("train:\n  epochs: 10\n  max_steps: 1750\n")
    assert estimates.seconds_left(started) == 10 * 50
    # Early stopping cannot end a run sooner than `patience` evaluations after its best step.
    (run / "config.yaml").write_text("train:\n  epochs: 10\n  max_steps: null\n  patience: 3\n")
    (run / "state.json").write_text(json.dumps({"step": 1260, "train_seconds": 12600.0, "best_step": 1260}))
    assert run_progress(run).earliest == 1800 and estimates.seconds_left(started) == 10 * 540  # not the median's 360
    (run / "state.json").write_text(json.dumps({"step": 1000, "train_seconds": 10000.0, "best_step": 360}))
    assert estimates.seconds_left(started) == 10 * 620  # 900 is past: up to the median length
    (run / "state.json").write_text("{not json")
    assert run_progress(run) is None and estimates.seconds_left(started) == 300


def test_runners_with_other_runs_dirs_never_train_one_cell_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """Two runners with their own runs_dirs share the experiment's records: a cell another runner has claimed
    (it is training it) is left alone and counts as running, and a cell another runner finished after this one
    looked is not trained again (each runner decides what to run from the states it saw at its start)."""
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp = load_experiment(tmp_path / "fake.yaml")
    out = tmp_path / "fake"  # <experiments_dir>/<name>, as `hire experiment status` finds it
    records, started = out / "records", tmp_path / "started.txt"
    script = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10)); sys.exit(2)"
    monkeypatch.setattr(loop, "train_command",
                        lambda cell, run: [sys.executable, "-c", script, str(started), cell.id])
    other = CellClaim(records, "RTE__hire__seed1")  # another runner is training the hire cell
    assert other.acquire()
    try:
        assert main(["experiment", "status", str(tmp_path / "fake.yaml"), "--runs_dir", str(tmp_path / "runs"),
                     "--experiments_dir", str(tmp_path)]) == 0
        said: list[str] = []
        assert run_experiment(exp, tmp_path / "runs", out, say=said.append) == 1  # the fake last-layer cell fails
        assert "RTE__hire__seed1: another runner is training it right now; left alone" in said
        assert started.read_text().split() == ["RTE__last-layer__seed1"]
    finally:
        other.release()
    assert "2 cells: 0 done, 0 recorded, 1 running, 0 started, 1 left" in capsys.readouterr().out
    assert not other.held_elsewhere()
    assert (records / ".claims" / ".gitignore").read_text() == "*\n"  # the claims never reach git

    # Another runner claims the hire cell while this one trains the last-layer cell (a process that holds the
    # claim for a few seconds, started by the fake cell).
    holder = ("import fcntl, sys, time, pathlib; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
              "pathlib.Path(sys.argv[2]).touch(); time.sleep(4)")
    flag = tmp_path / "held"
    script = (f"import subprocess, sys, time, pathlib; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10)); "
              f"subprocess.Popen([sys.executable, '-c', {holder!r}, {str(other.path)!r}, {str(flag)!r}], "
              f"stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
              f"[time.sleep(0.05) for _ in range(200) if not pathlib.Path({str(flag)!r}).exists()]; sys.exit(2)")
    started.unlink()
    said = []
    assert run_experiment(exp, tmp_path / "runs1", out, say=said.append) == 1
    assert started.read_text().split() == ["RTE__last-layer__seed1"]
    assert "RTE__hire__seed1: another runner is training it right now; left alone" in said
    while other.held_elsewhere():
        time.sleep(0.2)

    # The last-layer cell's process finishes the hire cell "in another runner": its record appears meanwhile.
    hire_cell = exp.cell("RTE__hire__seed1")
    record = record_text(cell=hire_cell.id, config=hire_cell.options, task="RTE", head="hire")
    script = (f"import sys, pathlib; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10)); "
              f"pathlib.Path({str(records / (hire_cell.id + '.json'))!r}).write_text({record!r}); sys.exit(2)")
    started.unlink()
    said = []
    assert run_experiment(exp, tmp_path / "runs2", out, say=said.append) == 1
    assert started.read_text().split() == ["RTE__last-layer__seed1"]  # the hire cell was not trained again
    assert said[-1].startswith("fake: 0 cells finished now, 1 were done already, 1 failed")


def finished_cell(exp: Experiment, cell: Cell, runs: Path, marked: bool = True) -> Path:
    """The cell's run folder as a finished ``hire train`` leaves it, as far as status and collect read it
    (``marked=False``: the same files in a folder without the run marker, e.g. a user's copy)."""
    from hire.options import parse_options

    run = run_dir(runs, exp, cell)
    run.mkdir(parents=True)
    if marked:
        mark_run_folder(run)
    parse_options({**cell.options, "output_dir": str(run)}).save(run / "config.yaml")
    (run / "metrics.json").write_text(json.dumps({
        "task": cell.task, "head": cell.head, "score": 0.6, "dev": {"dev": {"accuracy": 0.6, "score": 0.6}},
        "steps": 2, "best_step": 2, "train_seconds": 1.0, "mixed_precision": "no", "machine": {"cpu": "test"}}))
    (run / "state.json").write_text(json.dumps({"step": 2, "finished": True}))
    return run


@pytest.mark.parametrize("damage", ["[]\n", '{"cell": "RTE__hire__seed1", "sco', "{}\n"])
def test_a_damaged_record_is_named_and_collect_rewrites_it(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                           damage: str) -> None:
    """A record cut short, a JSON list or ``{}`` is one error naming the file and the command that rewrites it,
    in every command that reads records (``run`` before it trains anything); ``collect`` does rewrite it."""
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp = load_experiment(tmp_path / "fake.yaml")
    finished_cell(exp, exp.cell("RTE__hire__seed1"), tmp_path / "runs")
    places = [str(tmp_path / "fake.yaml"), "--runs_dir", str(tmp_path / "runs"), "--experiments_dir",
              str(tmp_path / "exps")]
    assert main(["experiment", "collect", *places]) == 0
    record = tmp_path / "exps" / "fake" / "records" / "RTE__hire__seed1.json"
    good = record.read_text()
    record.write_text(damage)
    capsys.readouterr()
    for command in ("status", "report", "run"):
        assert main(["experiment", command, *places]) == 2, command
        err = capsys.readouterr().err
        assert err.startswith(f"hire experiment: error: {record}: ") and "`hire experiment collect " in err, err
        assert err.count("\n") == 1
    assert not (tmp_path / "runs" / ".runner.lock").exists()  # `run` stopped before it took its lock
    assert main(["experiment", "collect", *places]) == 0
    assert record.read_text() == good
    assert main(["experiment", "status", *places]) == 0
    assert "2 cells: 1 done, 0 recorded, 0 running, 0 started, 1 left" in capsys.readouterr().out


def test_only_a_folder_with_the_run_marker_is_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder in a cell's place that holds a finished run's files but not the marker (a user's copy) is no
    run: the cell is left, collect records nothing from it, and the runner writes nothing into it (``hire
    train`` refuses the folder). A marked folder with the cell's configuration and no result yet is a started
    cell, which resumes, and the runner counts its attempt there."""
    (tmp_path / "fake.yaml").write_text(FAKE)
    exp, runs, out = load_experiment(tmp_path / "fake.yaml"), tmp_path / "runs", tmp_path / "out"
    last, hire = exp.cell("RTE__last-layer__seed1"), exp.cell("RTE__hire__seed1")
    users = finished_cell(exp, last, runs, marked=False)
    started = finished_cell(exp, hire, runs)
    (started / "metrics.json").unlink()
    (started / "state.json").write_text(json.dumps({"step": 1, "finished": False}))
    assert {s.cell.id: s.state for s in cell_statuses(exp, runs)} == {last.id: "left", hire.id: "started"}
    assert collect(exp, runs, out)["unfinished"] == [last.id, hire.id]
    assert not (out / "records").exists()
    before = sorted(p.name for p in users.iterdir())
    monkeypatch.setattr(loop, "train_command", lambda cell, run: fake_train(2))
    said: list[str] = []
    assert run_experiment(exp, runs, out, say=said.append) == 1
    assert sorted(p.name for p in users.iterdir()) == before  # no experiment.json in the user's folder
    assert json.loads((started / "experiment.json").read_text())["attempts"] == 1
    assert any(f"{hire.id} (resuming)" in line for line in said)


def test_a_folder_locked_by_a_training_process_counts_as_running(tmp_path: Path, capsys: pytest.CaptureFixture
                                                                 ) -> None:
    (tmp_path / "fake.yaml").write_text(FAKE)
    run = tmp_path / "runs" / "fake" / "RTE__hire__seed1"
    run.mkdir(parents=True)
    with (run / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert main(["experiment", "status", str(tmp_path / "fake.yaml"), "--runs_dir", str(tmp_path / "runs")]) == 0
    assert "2 cells: 0 done, 0 recorded, 1 running, 0 started, 1 left" in capsys.readouterr().out


def test_a_cell_adopts_only_the_record_of_an_identical_configuration(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """The sweep's cell at the chosen rate is the table's seed-1 cell: trained once, recorded in both."""
    from hire.options import parse_options

    (tmp_path / "sweep.yaml").write_text("name: sweep\n" + FAKE)
    (tmp_path / "table.yaml").write_text("name: table\n" + FAKE.replace("seeds: [1]", "seeds: [1, 2]"))
    sweep, table = load_experiment(tmp_path / "sweep.yaml"), load_experiment(tmp_path / "table.yaml")
    source = tmp_path / "experiments" / "sweep" / "records"
    source.mkdir(parents=True)
    for cell in sweep.cells:
        config = parse_options(cell.options).to_dict()
        for key in ("output_dir", "overwrite"):
            config.pop(key, None)
        if cell.head == "hire":
            config["train"]["lr"] = 3e-4  # trained with another rate than the table's: not the same cell
        record = {"experiment": "sweep", "cell": cell.id, "config": config, "task": cell.task, "head": cell.head,
                  "score": 0.7, "dev": {"dev": {"accuracy": 0.7, "score": 0.7}}, "mixed_precision": "no"}
        (source / f"{cell.id}.json").write_text(json.dumps(record))
    args = ["experiment", "adopt", str(tmp_path / "table.yaml"), "--from", str(tmp_path / "sweep.yaml"),
            "--runs_dir", str(tmp_path / "runs"), "--experiments_dir", str(tmp_path / "experiments")]
    assert main([*args, "--dry_run"]) == 0
    assert "would adopt RTE__last-layer__seed1 <- sweep/RTE__last-layer__seed1" in capsys.readouterr().out
    target = tmp_path / "experiments" / "table" / "records"
    assert not target.exists()
    assert main(args) == 0
    assert "table: 1 cells adopted a record" in capsys.readouterr().out
    assert sorted(p.name for p in target.iterdir()) == ["RTE__last-layer__seed1.json"]
    copy = json.loads((target / "RTE__last-layer__seed1.json").read_text())
    assert copy["experiment"] == "table" and copy["score"] == 0.7
    assert copy["adopted_from"] == {"experiment": "sweep", "cell": "RTE__last-layer__seed1"}
    states = {s.cell.id: s.state for s in cell_statuses(table, tmp_path / "runs", target)}
    assert states == {"RTE__last-layer__seed1": "recorded", "RTE__hire__seed1": "left",
                      "RTE__last-layer__seed2": "left", "RTE__hire__seed2": "left"}
    assert main(args) == 0 and "table: 0 cells adopted" in capsys.readouterr().out  # never twice
    hire = json.loads((source / "RTE__hire__seed1.json").read_text())  # the same rate after all
    hire["config"]["train"]["lr"] = table.cell("RTE__hire__seed1").options["train.lr"]
    (source / "RTE__hire__seed1.json").write_text(json.dumps(hire))
    assert main(args) == 0  # but Figure 2 (RTE's hire cells) wants per-example weights the source lacks
    assert "RTE__hire__seed1: " in capsys.readouterr().out and not (target / "RTE__hire__seed1.json").exists()
    examples = {"cell": "RTE__hire__seed1", "split": "dev", "guids": ["a"], "labels": [1], "weights": [[0.5, 0.5]]}
    (source / "RTE__hire__seed1.layer_weights.json.gz").write_bytes(gzip.compress(json.dumps(examples).encode()))
    assert main(args) == 0 and "table: 1 cells adopted" in capsys.readouterr().out
    copied = target / "RTE__hire__seed1.layer_weights.json.gz"
    assert json.loads(gzip.decompress(copied.read_bytes())) == examples
    write_experiment_report(table, tmp_path / "experiments" / "table")
    assert "2 of 4 cells recorded (2 of them trained once, for another experiment: sweep 2)" in (
        tmp_path / "experiments" / "table" / "report.md").read_text()
    assert main([*args[:4], str(tmp_path / "nowhere"), *args[5:]]) == 2
    assert "--from " in capsys.readouterr().err


# -- statistics and aggregation against hand-computed values -----------------------------------------
def test_a_record_set_to_auto_precision_answers_a_cell_set_to_what_it_resolved_to(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``auto`` is only resolved and handed to Accelerate: a run set to auto that resolved to fp32 trained as one set
    to fp32 (``no``), so a cell set to ``no`` adopts it and counts it recorded; a cell set to bf16 does not, and a
    record set to ``no`` does not answer a cell set to ``auto`` (machine-dependent)."""
    from hire.options import parse_options

    (tmp_path / "src.yaml").write_text("name: src\n" + FAKE)
    grid = "grid: {model.head: [last-layer, hire], train.mixed_precision: [auto, 'no', bf16]}"
    (tmp_path / "dst.yaml").write_text("name: dst\n" + FAKE.replace("grid: {model.head: [last-layer, hire]}", grid))
    src, dst = load_experiment(tmp_path / "src.yaml"), load_experiment(tmp_path / "dst.yaml")
    source = tmp_path / "experiments" / "src" / "records"
    source.mkdir(parents=True)
    for cell, setting, resolved in zip(src.cells, ["auto", "no"], ["no", "no"], strict=True):
        config = parse_options({**cell.options, "train.mixed_precision": setting}).to_dict()
        for key in ("output_dir", "overwrite"):
            config.pop(key, None)
        record = {"experiment": "src", "cell": cell.id, "config": config, "task": cell.task, "head": cell.head,
                  "score": 0.7, "dev": {"dev": {"accuracy": 0.7, "score": 0.7}}, "mixed_precision": resolved}
        (source / f"{cell.id}.json").write_text(json.dumps(record))
    args = ["experiment", "adopt", str(tmp_path / "dst.yaml"), "--from", str(tmp_path / "src.yaml"),
            "--runs_dir", str(tmp_path / "runs"), "--experiments_dir", str(tmp_path / "experiments")]
    assert main(args) == 0
    out = capsys.readouterr().out
    target = tmp_path / "experiments" / "dst" / "records"
    # last-layer was set to auto and ran in fp32: it answers the auto cell and the fp32 cell, not the bf16 one;
    # hire was set to fp32: it answers the fp32 cell only.
    assert sorted(p.stem for p in target.glob("*.json")) == [
        "RTE__hire__mixed_precision=no__seed1", "RTE__last-layer__mixed_precision=auto__seed1",
        "RTE__last-layer__mixed_precision=no__seed1"], out
    states = {s.cell.id: s.state for s in cell_statuses(dst, tmp_path / "runs", target)}
    assert sorted(cid for cid, state in states.items() if state == "recorded") == sorted(
        p.stem for p in target.glob("*.json"))
    assert sorted(load_records(dst, tmp_path / "experiments" / "dst").by_cell) == sorted(
        p.stem for p in target.glob("*.json"))
    # A record that resolved to fp32 placed under the bf16 cell's name is stale, not counted.
    wrong = json.loads((target / "RTE__last-layer__mixed_precision=no__seed1.json").read_text())
    (target / "RTE__last-layer__mixed_precision=bf16__seed1.json").write_text(
        json.dumps({**wrong, "cell": "RTE__last-layer__mixed_precision=bf16__seed1"}))
    records = load_records(dst, tmp_path / "experiments" / "dst")
    assert records.stale == {"RTE__last-layer__mixed_precision=bf16__seed1": ["train.mixed_precision"]}


def test_figure2_examples_are_counted_uniform_within_a_thousandth_and_last_over_half() -> None:
    weights = [[1 / 3] * 3,                # uniform
               [0.3334, 0.3333, 0.3333],   # uniform within 0.001
               [0.33, 0.33, 0.34],         # 0.0067 from 1/3: not uniform
               [0.2, 0.2, 0.6],            # the last one more than half
               [0.25, 0.25, 0.5],          # exactly half is not more than half
               [0.6, 0.2, 0.2]]
    assert examples_counts(weights) == {"examples": 6, "uniform": 2, "last_over_half": 1}


def test_statistics_against_hand_computed_values() -> None:
    s = summarize([3, 1, 2, 5, 4])
    assert (s["n"], s["median"], s["mean"], s["min"], s["max"]) == (5, 3, 3, 1, 5)
    assert s["std"] == pytest.approx(math.sqrt(2.5))  # sum of squares 10, over n - 1 = 4
    assert summarize([2.0])["std"] is None and summarize([1, 2, 3, 10])["median"] == 2.5
    c = paired({1: 71.0, 2: 72.0, 3: 73.0, 4: 74.0, 5: 75.0, 6: 99.0}, {1: 70.0, 2: 70.0, 3: 70.0, 4: 70.0, 5: 70.0})
    assert c["seeds"] == [1, 2, 3, 4, 5] and c["differences"] == [1, 2, 3, 4, 5] and c["median"] == 3
    # Exact signed-rank test: all 5 differences positive happens with probability 1/32 each way.
    assert c["wilcoxon_p"] == pytest.approx(2 / 32)
    # One negative, of the smallest-but-one rank: W- = 2; P(W- <= 2) = |{}, {1}, {2}| / 32, twice.
    assert wilcoxon_p([1, -2, 3, 4, 5])[0] == pytest.approx(6 / 32)
    assert wilcoxon_p([1, 2, 3, 4]) == (None, "n/a (n=4 < 5)")
    assert wilcoxon_p([0, 0, 0, 0, 0]) == (None, "n/a (all differences 0)")
    assert bootstrap_mean_interval([2, 2, 2, 2, 2]) == (2, 2) and bootstrap_mean_interval([1]) is None
    low, high = bootstrap_mean_interval([1, 2, 3, 4, 5])  # mean 3, standard error sqrt(2 / 5) = 0.63
    assert 1.6 < low < 2.0 and 4.0 < high < 4.4
    assert glue_average({"CoLA": 50.0, "RTE": 70.0, "MRPC": 1.0}, ["CoLA", "RTE"]) == 60
    assert glue_average({"CoLA": 50.0}, ["CoLA", "RTE"]) is None


SYNTHETIC = """\
base: {options: {model.encoder: unused}}
seeds: [1, 2, 3, 4, 5]
grid: {data.task: [RTE, CoLA], model.head: [last-layer, hire]}
baseline: {model.head: last-layer}
figure2: null
"""


def test_report_aggregates_synthetic_records(tmp_path: Path) -> None:
    """CoLA: hire beats last-layer by 1..5 points seed by seed; RTE: equal, and hire lacks seed 5."""
    (tmp_path / "synthetic.yaml").write_text(SYNTHETIC)
    exp = load_experiment(tmp_path / "synthetic.yaml")
    scores = {("CoLA", "last-layer"): [0.60, 0.58, 0.62, 0.59, 0.61], ("CoLA", "hire"): [0.61, 0.60, 0.65, 0.63, 0.66],
              ("RTE", "last-layer"): [0.70] * 5, ("RTE", "hire"): [0.70] * 4}
    records = tmp_path / "out" / "records"
    records.mkdir(parents=True)
    for cell in exp.cells:
        values = scores[(cell.task, cell.head)]
        if cell.seed <= len(values):
            score = values[cell.seed - 1]
            precision = "no" if cell.task == "CoLA" else "bf16"
            record = {"cell": cell.id, "config": cell.options, "task": cell.task, "head": cell.head, "score": score,
                      "dev": {"dev": {"mcc": score, "score": score}}, "train_seconds": 60.0,
                      "mixed_precision": precision,
                      "machine": {"cpu": "test CPU", "cpu_count": 2}}
            (records / f"{cell.id}.json").write_text(json.dumps(record))
    data = write_experiment_report(exp, tmp_path / "out")["tables"][0]
    assert data["tasks"] == ["CoLA", "RTE"]  # the paper's order, whatever the grid's
    last, hire = data["rows"]
    assert (last["label"], hire["label"], hire["baseline"]) == ("last-layer", "hire", "last-layer")
    cola = hire["tasks"]["CoLA"]
    assert cola["median"] == pytest.approx(63) and last["tasks"]["CoLA"]["median"] == pytest.approx(60)
    assert cola["vs_baseline"]["differences"] == pytest.approx([1, 2, 3, 4, 5])
    assert cola["vs_baseline"]["median_difference"] == pytest.approx(3)
    assert cola["vs_baseline"]["wilcoxon_p"] == pytest.approx(0.0625)
    rte = hire["tasks"]["RTE"]
    assert rte["n"] == 4 and rte["vs_baseline"]["wilcoxon"] == "n/a (n=4 < 5)"
    assert last["average"]["of_medians"] == pytest.approx(65) and hire["average"]["of_medians"] == pytest.approx(66.5)
    markdown = (tmp_path / "out" / "tables" / "all.md").read_text()
    assert "| last-layer | 60.0 | **70.0** | 65.0 |" in markdown
    assert "| hire | **63.0** (+3.0) | **70.0** (+0.0) n=4 | **66.5** (+1.5) n=4 |" in markdown
    assert "Precision: bf16 (RTE); fp32 (CoLA): the table mixes precisions across tasks." in markdown
    assert data["precisions"] == {"CoLA": ["fp32"], "RTE": ["bf16"]}
    # a task whose cells trained in two precisions says so, beside the tasks that differ from each other
    assert precision_text({"CoLA": ["bf16", "fp32"], "RTE": ["bf16"]}) == (
        "Precision: bf16 (RTE); bf16 and fp32 (CoLA): the table mixes precisions across tasks, and the cells of "
        "CoLA differ in precision (by seed or row).")
    assert precision_text({"RTE": ["bf16", "fp32"]}) == (
        "Precision: bf16 and fp32: the cells of RTE differ in precision (by seed or row).")
    assert precision_text({"CoLA": ["bf16"], "RTE": ["bf16"]}) == "Precision: bf16."
    assert "| hire − last-layer | +3.0 [" in markdown and "p=0.062; median +3.0 (n=5)" in markdown
    assert "in brackets the difference to the median of the baseline (last-layer);" in markdown
    # one baseline per head (as deepen's: each head against itself on the original encoder): say whose is whose
    deeper = {**hire, "label": "hire, deeper", "baseline": "hire"}
    two = table_markdown({**data, "rows": [last, hire, deeper]})
    assert "the median of the row's own baseline, named in the paired differences below (hire; last-layer);" in two
    assert "| hire, deeper − hire | +3.0 [" in two
    csv_lines = (tmp_path / "out" / "tables" / "all.csv").read_text().splitlines()
    assert csv_lines[0].startswith("table,row,baseline,task,metric,cells,n,median")
    assert "all,hire,last-layer,CoLA,score,5,5,63.0000,63.0000," in "\n".join(csv_lines)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["with_records"] == 19 and summary["total"]["train_seconds"] == 19 * 60


# -- the experiment file -------------------------------------------------------------------------------
def test_cell_ids_are_readable_and_stable(tmp_path: Path) -> None:
    (tmp_path / "ids.yaml").write_text("""\
base: {options: {data.task: cola}}
seeds: [3]
grid: {model.head: [hire], model.head_options: [{fusion_layers: 1}, {}]}
cells:
  - {data.task: RTE, model.head: last-layer, train.lr: [5.0e-5, 1.0e-4], model.encoder: /models/bert-base}
""")
    ids = [c.id for c in load_experiment(tmp_path / "ids.yaml").cells]
    assert ids == ["CoLA__hire__fusion_layers=1__seed3", "CoLA__hire__seed3",
                   "RTE__last-layer__encoder=bert-base__lr=5e-05__seed3",
                   "RTE__last-layer__encoder=bert-base__lr=0.0001__seed3"]


def test_example_experiment_files_load() -> None:
    counts = {p.stem: len(load_experiment(p).cells) for p in sorted((ROOT / "configs" / "experiments").glob("*.yaml"))}
    assert counts == {"ablations-minilm": 70, "beyond-minilm": 125, "deepen-minilm": 96, "feature-based-minilm": 15,
                      "feature-based-glue-minilm": 18, "head-lr-minilm": 18, "lr-sweep-minilm": 18,
                      "lr-sweep-conll-minilm": 3, "lr-sweep-mpnet": 12, "precision-minilm": 12, "table1-minilm": 60,
                      "table1-mpnet": 42, "wikiqa-minilm": 53, "ner-minilm": 20,
                      "codah-minilm": 20, "lr-sweep-codah-minilm": 3}
    figure2 = load_experiment(ROOT / "configs" / "experiments" / "head-lr-minilm.yaml").figure2
    assert figure2 is not None and figure2.cells["CoLA"] == tuple(  # a row picked by its head options in where
        f"CoLA__hire__score_activation=none__head_lr=None__seed{s}" for s in (1, 2, 3))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grids: {model.head: [hire]}", "top level: unknown key 'grids' (did you mean 'grid'?)"),
        ("grid: {model.hed: [hire]}", "grid.model.hed: unknown run option 'model.hed' (did you mean 'model.head'?)"),
        ("grid: {model.head: [hyre]}", "grid.model.head: unknown head 'hyre'"),
        ("grid: {data.task: [conll2004]}", "grid.data.task: unknown task 'conll2004'; the tasks read by name: CoLA"),
        ("grid: {train.output_dir: [x]}", "unknown run option 'train.output_dir'"),
        ("grid: {train.mixed_precision: [no]}", "write it in quotes"),
        ("grid: {model.head_options: [{fusion_layer: 1}]}", "grid: head 'hire' has no option 'fusion_layer'"),
        ("grid: {train.lr: [fast]}", "grid.train.lr: expected a number, not 'fast'"),
        ("base: {config: nowhere.yaml}\ngrid: {train.seed: [1]}", "base.config: no such file 'nowhere.yaml'"),
        ("grid: {train.seed: [1]}\ntables: {t: {colums: [CoLA]}}", "tables.t: unknown key 'colums'"),
        ("grid: {train.seed: [1]}\ntables: {t: {tasks: [SST-2]}}", "tables.t.tasks: no cell of the experiment has "
                                                                   "task SST-2"),
        ("grid: {train.seed: [1, 1]}", "is the same cell as one of grid"),
        ("grid: {model.head: [hire]}\nper_task: {CoLA: {train.lr: 1}}", "per_task.CoLA: no cell of the experiment"),
        ("grid: {model.head: [hire]}\nfigure2: {where: {train.lr: 0.5}}", "figure2: no cell of the experiment "
                                                                          "matches its row and where"),
    ],
)
def test_bad_experiment_files_fail_with_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture, text: str,
                                                       message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text + "\n")
    assert main(["experiment", "status", str(path), "--runs_dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hire experiment: error: {path}: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
