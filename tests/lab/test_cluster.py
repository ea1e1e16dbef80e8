"""``hire experiment run --executor``: a grid through submitit's local executor gives the records the plain loop
gives; a preempted job is requeued and its run resumes; SLURM submission, queue states and resubmission against
a stand-in ``sbatch``/``sacct``; records written atomically by many writers at once; bad scheduler options.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import pytest
from badinput import check_fails_cleanly
from submitit.helpers import DelayedSubmission
from tiny import save_tiny_encoder

from hire.cli import main
from hire.experiments import cluster, loop
from hire.experiments.cluster import CellJob, CellSpec, ClusterOptions, submit_experiment
from hire.experiments.experiment import load_experiment
from hire.experiments.jobs import job_file, job_states
from hire.experiments.loop import interruptible, run_experiment
from hire.experiments.records import records_dir, write_if_changed

ROWS = [("the cat sat on the mat", "yes"), ("a dog ran in the park", "no"), ("birds fly over the sea", "yes"),
        ("fish swim in a deep lake", "no")] * 4
TIMING = ("train_seconds", "wall_seconds")  # what honestly differs between two trainings of one cell

GRID = """\
name: {name}
base:
  options:
    data.task: custom
    data.train_file: {root}/train.csv
    data.dev_file: {root}/dev.csv
    model.encoder: {root}/encoder
    train.batch_size: 8
    train.mixed_precision: "no"
{options}seeds: [1]
grid:
  model.head: {heads}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny CSV files and a tiny random encoder for them."""
    root = tmp_path_factory.mktemp("cluster")
    table = "sentence,label\n" + "".join(f"{text},{label}\n" for text, label in ROWS)
    (root / "train.csv").write_text(table)
    (root / "dev.csv").write_text("sentence,label\n" + "".join(f"{t},{y}\n" for t, y in reversed(ROWS[:6])))
    save_tiny_encoder(root / "encoder", [text for text, _ in ROWS])
    return root


@pytest.fixture
def one_thread_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every training of a test on the CPU with one thread: the same cell gives the same numbers however it runs."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def grid_file(world: Path, tmp_path: Path, name: str, heads: str, options: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(GRID.format(name=name, root=world, heads=heads, options=options))
    return path


def dirs(tmp_path: Path, tag: str) -> list[str]:
    return ["--runs_dir", str(tmp_path / f"runs-{tag}"), "--experiments_dir", str(tmp_path / f"exps-{tag}")]


@pytest.mark.slow  # CI's slow run (.ci/run); fast: the job-file, claim and option tests below
def test_a_grid_through_the_local_executor_equals_the_plain_loop(world: Path, tmp_path: Path, one_thread_cpu: None,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """Two cells as two jobs of submitit's local executor (one `hire train` each, the plain loop's command) and
    the same two cells through the plain loop: every record equal but for the time taken, Figure 2's weights
    byte for byte; the job files name the jobs; a second submission submits nothing and changes nothing."""
    path = grid_file(world, tmp_path, "pair", "[last-layer, hire]", "    train.max_steps: 2\n")
    exp = load_experiment(path)
    assert run_experiment(exp, tmp_path / "runs-loop", tmp_path / "exps-loop" / "pair", say=lambda _: None) == 0
    capsys.readouterr()
    assert main(["experiment", "run", str(path), *dirs(tmp_path, "jobs"), "--executor", "local", "--wait",
                 "--gpus_per_job", "0"]) == 0
    out = capsys.readouterr().out
    assert "pair: 2 cells selected: 0 done, 0 queued or running, 2 to submit" in out
    assert "pair: 2 cells finished now, 0 failed" in out
    loop, jobs = (tmp_path / f"exps-{tag}" / "pair" / "records" for tag in ("loop", "jobs"))
    names = sorted(p.name for p in loop.iterdir() if p.is_file())
    assert names == ["custom__hire__seed1.json", "custom__hire__seed1.layer_weights.json.gz",
                     "custom__last-layer__seed1.json"]
    assert sorted(p.name for p in jobs.iterdir() if p.is_file()) == names  # no temporary file left
    for name in names:
        if name.endswith(".gz"):
            assert (jobs / name).read_bytes() == (loop / name).read_bytes()
            assert json.loads(gzip.decompress((jobs / name).read_bytes()))["weights"]
            continue
        ours, theirs = (json.loads((r / name).read_text()) for r in (jobs, loop))
        assert ours["curve"] and ours["score"] == theirs["score"]
        for record in (ours, theirs):
            for key in TIMING:
                assert record.pop(key) > 0
        assert ours == theirs
    states = job_states(jobs)
    assert sorted(states) == ["custom__hire__seed1", "custom__last-layer__seed1"]
    assert {s.executor for s in states.values()} == {"local"} and {s.state for s in states.values()} == {"ended"}
    assert (jobs / ".jobs" / ".gitignore").read_text() == "*\n"
    logs = tmp_path / "runs-jobs" / "pair" / "logs"
    assert "--output_dir" in (logs / "custom__hire__seed1.log").read_text()  # the job's `hire train` wrote its log

    before = {p: p.stat().st_mtime_ns for p in jobs.iterdir() if p.is_file()}
    assert main(["experiment", "run", str(path), *dirs(tmp_path, "jobs"), "--executor", "local"]) == 0
    assert "pair: 2 cells selected: 2 done, 0 queued or running, 0 to submit" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in jobs.iterdir() if p.is_file()} == before
    assert main(["experiment", "status", str(path), *dirs(tmp_path, "jobs")]) == 0
    assert "2 cells: 2 done, 0 recorded, 0 running, 0 started, 0 left, 0 changed" in capsys.readouterr().out


def _task_of(controller: int) -> int:
    """The process the local executor's controller ``controller`` runs the job in (its child)."""
    for _ in range(600):
        try:
            children = Path(f"/proc/{controller}/task/{controller}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError(f"the local job {controller} started no task")


@pytest.mark.slow  # CI's slow run; fast: tests/core/commands/test_resume.py resumes killed runs
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the job's process through /proc")
def test_a_preempted_job_is_requeued_and_its_run_resumes(world: Path, tmp_path: Path, one_thread_cpu: None) -> None:
    """The scheduler's preemption signal (SIGUSR2, as SLURM sends it) reaches the job once its run has saved a
    checkpoint: `hire train` is stopped, submitit requeues the same cell, and the requeued job resumes the run
    from its checkpoint to the end, and writes the record."""
    options = ("    train.max_steps: 400\n    train.eval_every: 200\n    train.checkpoint_every: 20\n")
    exp = load_experiment(grid_file(world, tmp_path, "long", "[last-layer]", options))
    cell = exp.cells[0]
    runs, out = tmp_path / "runs", tmp_path / "exps" / "long"
    run = runs / "long" / cell.id
    signalled: list[int] = []

    def preempt() -> None:
        path = job_file(records_dir(out), cell.id)
        for _ in range(1200):
            try:
                state = json.loads((run / "state.json").read_text())
            except (OSError, ValueError):
                state = {}
            if path.is_file() and state.get("step", 0) >= 20:
                break
            time.sleep(0.05)
        task = _task_of(int(json.loads(path.read_text())["job_id"]))
        signalled.append(json.loads((run / "state.json").read_text())["step"])
        os.kill(task, signal.SIGUSR2)

    thread = threading.Thread(target=preempt)
    thread.start()
    said: list[str] = []
    code = submit_experiment(exp, runs, out, ClusterOptions("local", gpus_per_job=0), wait=True, say=said.append,
                             poll_seconds=0.2)
    thread.join()
    assert code == 0, said
    assert signalled and signalled[0] < 400
    record = json.loads((records_dir(out) / f"{cell.id}.json").read_text())
    assert record["steps"] == 400
    log = (runs / "long" / "logs" / f"{cell.id}.log").read_text()
    assert "hire train: interrupted" in log and f"Resuming {run} from step" in log
    assert json.loads((run / "experiment.json").read_text())["attempts"] == 2
    job_log = next((runs / "long" / "submitit").glob("*_log.out")).read_text()
    assert "this job is preempted" in job_log and "Requeued job" in job_log and "(resuming)" in job_log


def test_checkpoint_stops_training_and_requeues_the_same_cell(world: Path, tmp_path: Path) -> None:
    """What submitit calls on preemption: `hire train` gets Ctrl-C, and the answer is a fresh job of the same
    cell (picklable, holding no process) for submitit to requeue."""
    exp = load_experiment(grid_file(world, tmp_path, "one", "[hire]"))
    spec = CellSpec(exp, exp.cells[0].id, tmp_path / "run", tmp_path / "out", tmp_path / "log", ("true",), tmp_path,
                    "slurm")
    job = CellJob(spec)
    child = ("import sys, time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
             "except KeyboardInterrupt:\n    sys.exit(130)\n")
    # started as run_cell starts `hire train`: Ctrl-C reaches it even where this test runs with SIGINT ignored
    job._proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, preexec_fn=interruptible)
    assert job._proc.stdout is not None and job._proc.stdout.readline() == b"ready\n"
    delayed = job.checkpoint()
    assert isinstance(delayed, DelayedSubmission)
    assert isinstance(delayed.function, CellJob) and delayed.function is not job
    assert delayed.function.spec == spec and delayed.args == () and delayed.kwargs == {}
    assert job._proc.wait(timeout=30) == 130  # stopped as by Ctrl-C: `hire train` resumes from its checkpoint
    again = cloudpickle.loads(cloudpickle.dumps(delayed))
    assert again.function.spec == spec and again.function._proc is None


def test_a_job_leaves_a_cell_its_job_file_gives_to_another(world: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Two jobs of one cell (two submitters at once): the one its job file does not name trains nothing."""
    exp = load_experiment(grid_file(world, tmp_path, "one", "[hire]"))
    cell, out = exp.cells[0], tmp_path / "exps" / "one"
    path = job_file(records_dir(out), cell.id)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"cell": cell.id, "executor": "local", "job_id": "111"}))
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "local")
    monkeypatch.setenv("SUBMITIT_LOCAL_JOB_ID", "999")
    spec = CellSpec(exp, cell.id, tmp_path / "runs" / cell.id, out, tmp_path / "log", ("false",), tmp_path, "local")
    assert CellJob(spec)() == {"cell": cell.id, "outcome": "left to another job"}
    assert not (tmp_path / "runs").exists() and json.loads(path.read_text())["job_id"] == "111"


FAKE_SBATCH = """#!/bin/sh
n=$(cat "$FAKE_SLURM/next")
echo $((n + 1)) > "$FAKE_SLURM/next"
cp "$1" "$FAKE_SLURM/sbatch-$n.sh"
echo "Submitted batch job $n"
"""


def test_slurm_submission_queue_states_and_resubmission(world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    """Against a stand-in `sbatch` (it only files the script) and `sacct`: one job array with the options given;
    queued and running cells are shown so, left alone by a second submission and by the plain loop; a cell whose
    job failed is submitted again; a job whose state sacct cannot tell is never submitted twice."""
    fake = tmp_path / "slurm"
    (fake / "bin").mkdir(parents=True)
    for name, text in {"sbatch": FAKE_SBATCH, "srun": "#!/bin/sh\n", "sacct": '#!/bin/sh\ncat "$FAKE_SLURM/sacct"\n'
                       }.items():
        (fake / "bin" / name).write_text(text)
        (fake / "bin" / name).chmod(0o755)
    (fake / "next").write_text("4242\n")
    (fake / "sacct").write_text("")
    monkeypatch.setenv("FAKE_SLURM", str(fake))
    monkeypatch.setenv("PATH", f"{fake / 'bin'}{os.pathsep}{os.environ['PATH']}")
    path = grid_file(world, tmp_path, "sl", "[last-layer, hire]")
    slurm = ["--executor", "slurm", "--slurm_partition", "gpu", "--slurm_array_parallelism", "1", "--slurm_option",
             "account=proj", "--timeout_min", "30", "--cpus_per_job", "4", "--mem_gb", "16"]
    last, hire = "custom__last-layer__seed1", "custom__hire__seed1"

    def submit() -> str:
        assert main(["experiment", "run", str(path), *dirs(tmp_path, "s"), *slurm]) == 0
        return capsys.readouterr().out

    def status() -> str:
        assert main(["experiment", "status", str(path), *dirs(tmp_path, "s"), "--list"]) == 0
        return capsys.readouterr().out

    said = submit()
    assert f"{last}: submitted as slurm job 4242_0" in said and f"{hire}: submitted as slurm job 4242_1" in said
    assert "hire experiment status" in said and "--list" in said
    script = (fake / "sbatch-4242.sh").read_text().splitlines()
    for line in ("--partition=gpu", "--array=0-1%1", "--account=proj", "--time=30", "--gpus-per-node=1",
                 "--cpus-per-task=4", "--mem=16GB", "--signal=USR2@90", "--job-name=hire-sl"):
        assert f"#SBATCH {line}" in script
    records = tmp_path / "exps-s" / "sl" / "records"
    assert json.loads(job_file(records, hire).read_text())["job_id"] == "4242_1"

    (fake / "sacct").write_text("JobID|State\n4242_0|PENDING\n4242_1|RUNNING\n")
    listing = status()
    assert "2 cells: 0 done, 0 recorded, 1 running, 1 queued, 0 started, 0 left, 0 changed" in listing
    assert f"queued   {last}  (slurm job 4242_0 (PENDING))" in listing
    said = submit()
    assert "0 to submit" in said and (fake / "next").read_text().strip() == "4243"
    assert f"{last}: waiting in the scheduler's queue as slurm job 4242_0 (PENDING); left alone" in said
    assert f"{hire}: slurm job 4242_1 (RUNNING) is training it right now; left alone" in said
    monkeypatch.setattr(loop, "train_command", lambda cell, run: [sys.executable, "-c", "raise SystemExit(3)"])
    plain: list[str] = []
    assert run_experiment(load_experiment(path), tmp_path / "runs-s", tmp_path / "exps-s" / "sl", say=plain.append) == 0
    assert "sl: 2 cells selected: 0 done, 0 to run" in plain[0]

    (fake / "sacct").write_text("JobID|State\n4242_0|FAILED\n4242_1|RUNNING\n")
    said = submit()
    assert f"{last}: submitted as slurm job 4243" in said and hire + ": submitted" not in said
    assert json.loads(job_file(records, last).read_text())["job_id"] == "4243"

    (fake / "sacct").write_text("")  # no accounting: nothing tells whether the jobs still run
    said = submit()
    assert "0 to submit" in said and (fake / "next").read_text().strip() == "4244"
    assert f"slurm job 4243 (state unknown: sacct does not list it); if the job is gone, delete " \
           f"{job_file(records, last)} to submit the cell again" in said

    result = tmp_path / "runs-s" / "sl" / "submitit" / "4243_0_result.pkl"
    result.write_bytes(b"a result of an earlier attempt")
    (fake / "sacct").write_text("JobID|State\n4243|REQUEUED\n")  # the scheduler's word goes first
    assert "0 to submit" in submit()
    (fake / "sacct").write_text("")  # sacct cannot tell, but the job wrote its result: it ended
    assert f"{last}: submitted as slurm job 4244" in submit()


def test_a_job_whose_training_got_sigterm_leaves_its_end_to_the_scheduler(world: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """SLURM ends a job (a preemption without the early signal, a cancel) with SIGTERM to every process: the job
    writes no result at once (it would say the job ended while SLURM may requeue it) but waits to be ended."""
    monkeypatch.setattr(cluster, "TERM_GRACE_SECONDS", 1.0)
    exp = load_experiment(grid_file(world, tmp_path, "one", "[hire]"))
    kill = (sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    spec = CellSpec(exp, exp.cells[0].id, tmp_path / "run", tmp_path / "out", tmp_path / "log", kill, tmp_path,
                    "slurm")
    t0 = time.monotonic()
    with pytest.raises(cluster.CellFailed, match=f"failed \\(exit -{int(signal.SIGTERM)}\\)"):
        CellJob(spec)()
    assert time.monotonic() - t0 >= 1.0


def _write_many(path: str, tag: int, times: int) -> None:
    for i in range(times):
        write_if_changed(Path(path), f"{tag}:{i}:".encode() + b"x" * 300_000 + b":end")


def test_records_are_written_atomically_by_many_writers_at_once(tmp_path: Path) -> None:
    """Four processes rewrite one record over and over (as jobs of many nodes may): none fails, a reader only
    ever sees a whole file, and no temporary file is left behind."""
    path = tmp_path / "records" / "cell.json"
    path.parent.mkdir()
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_many, args=(str(path), tag, 40)) for tag in range(4)]
    for w in writers:
        w.start()
    seen = 0
    while any(w.is_alive() for w in writers):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        assert data.endswith(b":end") and data.count(b"x") == 300_000  # one writer's whole file
        seen += 1
    for w in writers:
        w.join()
    assert [w.exitcode for w in writers] == [0, 0, 0, 0]
    assert seen and [p.name for p in path.parent.iterdir()] == ["cell.json"]


CASE_EXP = "base: {options: {data.task: RTE, model.encoder: '{enc}'}}\ngrid: {model.head: [hire]}\n"
RUN = ["experiment", "run", "{tmp}/exp.yaml", "--runs_dir", "{tmp}/runs", "--experiments_dir", "{tmp}/exps"]
CASES: list[tuple[str, list[str], str]] = [
    ("partition-without-executor", [*RUN, "--slurm_partition", "gpu"], "--slurm_partition: only with --executor slurm"),
    ("wait-without-executor", [*RUN, "--wait"], "--wait: only with --executor slurm or --executor local"),
    ("gpus-without-executor", [*RUN, "--gpus_per_job", "1"], "--gpus_per_job: only with --executor"),
    ("jobs-with-executor", [*RUN, "--executor", "local", "--jobs", "2"], "--jobs: not with --executor"),
    ("time-budget-with-executor", [*RUN, "--executor", "local", "--time_budget", "5"],
     "--time_budget: not with --executor"),
    ("slurm-option-with-local", [*RUN, "--executor", "local", "--slurm_option", "qos=x"],
     "--slurm_option: only with --executor slurm"),
    ("zero-timeout", [*RUN, "--executor", "local", "--timeout_min", "0"], "--timeout_min: must be >= 1, not 0"),
    ("negative-gpus", [*RUN, "--executor", "local", "--gpus_per_job", "-1"], "--gpus_per_job: must be >= 0, not -1"),
    ("nan-memory", [*RUN, "--executor", "local", "--mem_gb", "nan"], "--mem_gb: must be a finite number, not nan"),
    ("slurm-option-not-key-value", [*RUN, "--executor", "slurm", "--slurm_option", "account"],
     "--slurm_option: expected KEY=VALUE (e.g. account=my-project), not 'account'"),
    ("damaged-job-file", ["experiment", "status", "{tmp}/exp.yaml", "--runs_dir", "{tmp}/runs", "--experiments_dir",
                          "{tmp}/exps"], "{tmp}/exps/exp/records/.jobs/RTE__hire__seed42.json: not a job file"),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_scheduler_options_fail_cleanly(args: list[str], message: str, shared: dict[str, Path],
                                            tmp_path: Path, via: str) -> None:
    (tmp_path / "exp.yaml").write_text(CASE_EXP.replace("{enc}", str(shared["enc"])))
    if "status" in args:
        (tmp_path / "exps" / "exp" / "records" / ".jobs").mkdir(parents=True)
        (tmp_path / "exps" / "exp" / "records" / ".jobs" / "RTE__hire__seed42.json").write_text('{"cell": "RTE')
    check_fails_cleanly(args, message, shared, tmp_path, via)


@pytest.mark.skipif(shutil.which("sbatch") is not None, reason="this machine has SLURM's sbatch")
def test_slurm_without_sbatch_fails_cleanly(shared: dict[str, Path], tmp_path: Path, via: str) -> None:
    (tmp_path / "exp.yaml").write_text(CASE_EXP.replace("{enc}", str(shared["enc"])))
    check_fails_cleanly([*RUN, "--executor", "slurm"], "--executor slurm: `sbatch` or `srun` is not on this "
                        "machine's PATH", shared, tmp_path, via)
