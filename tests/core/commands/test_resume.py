"""Runs killed anywhere resume to exactly the run that never stopped; run folders lose nothing.

Every test runs the real command (``tests/killer.py`` wraps it to die at a chosen point) on a tiny
random encoder and real STS-B rows (a continuous dev score, so that later evaluations find new best
models): 32 training examples in batches of 8 are 4 steps an epoch, 3 epochs, an evaluation at the end
of each epoch and a checkpoint every 3 steps (steps 3, 4, 6, 8, 9, 12).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from badinput import given_once, hire_process
from safetensors.torch import load_file
from tiny import save_tiny_encoder

from hire.data import default_glue_dir, read_glue_split
from hire.runs import CHECKPOINT, COMPLETE, RunLock, recover

GLUE = default_glue_dir()
pytestmark = pytest.mark.skipif(not (GLUE / "STS-B").is_dir(), reason=f"no GLUE data at {GLUE}")


def run(*args: str, kill: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``hire ARGS`` as a real process (killed at ``kill``, a point of ``tests/killer.py``)."""
    return hire_process(*args, kill=kill, env=env)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [t for split in ("train", "dev") for e in read_glue_split("STS-B", split)[:32]
             for t in (e.text_a, e.text_b or "")]
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder", texts)


def args(encoder: Path, out: Path, *extra: str) -> list[str]:
    return given_once(["train", "--output_dir", str(out), "--data.task", "STS-B", "--model.encoder", str(encoder),
                       "--data.max_train_examples", "32", "--data.max_eval_examples", "16", "--train.batch_size", "8",
                       "--train.epochs", "3", "--train.checkpoint_every", "3", "--train.lr", "1e-3",
                       "--train.mixed_precision", "no", *extra])  # extra replaces the options it gives again


@pytest.fixture(scope="module")
def reference(encoder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "reference"
    result = run(*args(encoder, out))
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def assert_same_run(out: Path, reference: Path) -> None:
    """Byte-identical evaluations, identical final scores, bit-identical best weights."""
    assert (out / "metrics.jsonl").read_text() == (reference / "metrics.jsonl").read_text()
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (out, reference))
    assert a["dev"] == b["dev"] and a["best_step"] == b["best_step"] and a["steps"] == b["steps"] == 12
    wa, wb = (load_file(d / "best" / "model.safetensors") for d in (out, reference))
    assert wa.keys() == wb.keys()
    assert all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wb)
    assert not any((out / name).exists() for name in ("checkpoint", "checkpoint.tmp", "checkpoint.old",
                                                     "best.old"))


def kill_then_finish(encoder: Path, out: Path, kills: list[str]) -> list[int]:
    """Run with each kill point in turn (each a new process, resuming the last), then to the end."""
    codes = []
    for kill in kills:
        result = run(*args(encoder, out), kill=kill)
        assert result.returncode in (0, 137), result.stderr[-3000:]
        codes.append(result.returncode)
        if result.returncode == 0:
            break
    else:
        result = run(*args(encoder, out))
        assert result.returncode == 0, result.stderr[-3000:]
    return codes


def test_killed_at_steps_over_three_epochs(encoder: Path, reference: Path, tmp_path: Path) -> None:
    """Killed after step 2 (no checkpoint yet: starts again), after step 5 (epoch 2, resumes from 4),
    after step 9 (epoch 3, resumes from 8): the same run as the one never stopped."""
    out = tmp_path / "run"
    assert [run(*args(encoder, out), kill=k).returncode for k in ("step:2", "step:5")] == [137, 137]
    before = json.loads((out / CHECKPOINT / COMPLETE).read_text())  # step 4's checkpoint
    assert before["step"] == 4 and before["train_seconds"] > 0
    assert kill_then_finish(encoder, out, ["step:5"]) == [137]
    assert_same_run(out, reference)
    # The training time before the interruptions is kept, not forgotten by the resumed process.
    assert json.loads((out / "metrics.json").read_text())["train_seconds"] > before["train_seconds"]


@pytest.mark.slow  # six processes; test_recover_every_intermediate_state recovers each state in-process
def test_killed_inside_checkpoint_saves(encoder: Path, reference: Path, tmp_path: Path) -> None:
    """Killed before the n-th file rename of a process (inside atomic writes, between the checkpoint
    swaps, while a new best model replaces best/) and half-way through removing a checkpoint."""
    out = tmp_path / "run"
    codes = kill_then_finish(encoder, out, [
        "rename:checkpoint/best:1",  # step 4: the checkpoint in place, its new best model not yet in best/
        "rename:checkpoint/best:2",  # step 8: best/ moved aside, the new one not yet in (1 = recovery's move)
        "rename:checkpoint.tmp:1",  # step 9: the old checkpoint moved aside, the new one not yet in place
        "unlink:checkpoint.old/optimizer.bin:1",  # step 12: half-way through removing the old checkpoint
        "rename:metrics.json.tmp:1",  # the end: predictions written, metrics.json not yet
    ])
    assert codes == [137] * 5
    assert_same_run(out, reference)
    bests = [json.loads(line)["selection_score"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert bests[1] > bests[0]  # step 8 replaced step 4's best model: that window was really crossed


@pytest.mark.slow  # resuming itself: test_killed_at_steps_over_three_epochs
def test_a_run_resumes_without_test_predictions(encoder: Path, reference: Path, tmp_path: Path) -> None:
    """``--predict_test`` decides only what is written after training: a run started with test predictions
    resumes without them (as an experiment cell started before the runner turned them off) and is the same
    run, less its test files."""
    out = tmp_path / "run"
    assert run(*args(encoder, out), kill="step:5").returncode == 137  # a checkpoint at step 4: results exist
    result = run(*args(encoder, out, "--predict_test", "false"))
    assert result.returncode == 0, result.stderr[-3000:]  # not refused as "another configuration"
    assert_same_run(out, reference)
    assert (reference / "submission" / "STS-B.tsv").is_file() and (reference / "predictions" / "test.jsonl").is_file()
    assert not (out / "submission").exists() and not (out / "predictions" / "test.jsonl").exists()
    assert (out / "predictions" / "dev.jsonl").read_bytes() == (reference / "predictions" / "dev.jsonl").read_bytes()


@pytest.mark.slow  # the message alone: test_bad_input's test_interrupt_is_one_line_and_exit_130
def test_interrupt_says_how_to_resume(encoder: Path, reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run(*args(encoder, out), kill="interrupt:6")  # Ctrl-C after step 6, before its checkpoint
    assert result.returncode == 130
    assert "Traceback" not in result.stderr and "resume" in result.stderr.strip().splitlines()[-1]
    assert json.loads((out / CHECKPOINT / COMPLETE).read_text())["step"] == 4
    result = run(*args(encoder, out))
    assert result.returncode == 0 and "Resuming" in result.stdout + result.stderr
    assert_same_run(out, reference)


@pytest.mark.slow  # three processes; the rule alone: test_run_folders' test_a_config_yaml_without_the_marker_...
@pytest.mark.skipif(torch.cuda.is_available(), reason="'auto' picks from the GPU there, not from the CPU's bf16 units")
def test_a_resumed_run_keeps_the_precision_it_began_in(encoder: Path, reference: Path, tmp_path: Path) -> None:
    """``auto`` is resolved when a run begins: begun on a CPU without bf16 units (fp32), killed, and resumed on
    one with them, the run goes on in fp32, says so, and is the run that never stopped (``reference`` is fp32)."""
    out = tmp_path / "run"
    auto = args(encoder, out, "--train.mixed_precision", "auto")  # in place of "no"
    assert run(*auto, kill="step:5", env={"FAKE_FAST_BF16": "0"}).returncode == 137
    assert json.loads((out / CHECKPOINT / COMPLETE).read_text())["mixed_precision"] == "no"
    result = run(*auto, kill="step:1000", env={"FAKE_FAST_BF16": "1"})  # a bf16 CPU: 'auto' would pick bf16
    assert result.returncode == 0, result.stderr[-3000:]
    assert "began in mixed precision 'no'" in result.stderr and "picks 'bf16' on this machine" in result.stderr
    assert json.loads((out / "metrics.json").read_text())["mixed_precision"] == "no"
    assert_same_run(out, reference)
    # A new run resolves 'auto' on the machine it runs on.
    fresh = tmp_path / "fresh"
    assert run(*args(encoder, fresh, "--train.mixed_precision", "auto", "--train.max_steps", "3"), kill="step:1000",
               env={"FAKE_FAST_BF16": "1"}).returncode == 0
    assert json.loads((fresh / "metrics.json").read_text())["mixed_precision"] == "bf16"


@pytest.mark.slow  # a NaN loss's one-line error without a checkpoint: test_a_real_nan_run_exits_with_a_clear_error
def test_diverging_loss_stops_and_keeps_the_last_checkpoint(encoder: Path, reference: Path, tmp_path: Path,
                                                            ) -> None:
    out = tmp_path / "run"
    result = run(*args(encoder, out), kill="nan:7")  # the 7th training loss is NaN
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert "step 7" in last and "nan" in last and "--train.lr" in last and "Traceback" not in result.stderr
    assert json.loads((out / CHECKPOINT / COMPLETE).read_text())["step"] == 6
    assert (out / "best" / "model.safetensors").is_file() and not (out / "metrics.json").exists()
    # Nothing of the bad step was applied: the same command finishes as the run that never diverged.
    result = run(*args(encoder, out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(out, reference)


def test_a_real_nan_run_exits_with_a_clear_error(encoder: Path, tmp_path: Path) -> None:
    result = run(*args(encoder, tmp_path / "run", "--train.lr", "1e6", "--train.max_grad_norm", "1e30"))
    assert result.returncode == 2 and "nan" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_folder_in_use_is_refused(encoder: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    lock = RunLock(out).acquire()
    try:
        result = run(*args(encoder, out))
    finally:
        lock.release()
    assert result.returncode == 2 and "in use" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_overwrite_never_touches_what_is_not_a_run(encoder: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    for name in ("best", "predictions"):
        (mine / name).mkdir(parents=True)
        (mine / name / "keep.txt").write_text(name)
    (mine / "notes.txt").write_text("mine")
    before = sorted(str(p.relative_to(mine)) for p in mine.rglob("*"))
    result = run(*args(encoder, mine, "--overwrite", "true"))
    assert result.returncode == 2 and "holds no run" in result.stderr
    assert sorted(str(p.relative_to(mine)) for p in mine.rglob("*")) == before
    empty_args = args(encoder, Path("x"))
    empty_args[2] = ""  # --output_dir ""
    empty = run(*empty_args)
    assert empty.returncode == 2 and "--output_dir" in empty.stderr


def test_overwrite_keeps_a_finished_run_when_an_option_is_bad(encoder: Path, reference: Path) -> None:
    before = (reference / "metrics.json").read_text()
    result = run(*args(encoder, reference, "--overwrite", "true", "--train.lr", "-1"))
    assert result.returncode == 2 and "--train.lr" in result.stderr
    assert (reference / "metrics.json").read_text() == before and (reference / "best").is_dir()


def test_a_run_that_failed_before_any_result_can_be_corrected(encoder: Path, tmp_path: Path) -> None:
    """A crash before the first checkpoint leaves only config.yaml: a corrected command may reuse the folder."""
    out = tmp_path / "run"
    assert run(*args(encoder, out), kill="step:1").returncode == 137
    result = run(*args(encoder, out, "--train.max_steps", "2"))
    assert result.returncode == 0, result.stderr[-3000:]


# -- recovery of every intermediate state, without a process ----------------------------------------
def _checkpoint(path: Path, step: int, best: bool = False) -> None:
    path.mkdir()
    (path / "model.safetensors").write_text(f"weights {step}")
    if best:
        (path / "best").mkdir()
        (path / "best" / "model.safetensors").write_text(f"best {step}")
    (path / COMPLETE).write_text(json.dumps({"step": step}))


def _state(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("make", "expected_step", "expected_best"),
    [
        # tmp half-written (no trainer_state.json): the old checkpoint stands
        (lambda o: (_checkpoint(o / "checkpoint", 3), (o / "checkpoint.tmp").mkdir()), 3, "best 1"),
        # tmp complete, the old one already moved aside: tmp is the newest
        (lambda o: (_checkpoint(o / "checkpoint.old", 3), _checkpoint(o / "checkpoint.tmp", 4, best=True)),
         4, "best 4"),
        # only the old one, the new one half-written
        (lambda o: (_checkpoint(o / "checkpoint.old", 3), (o / "checkpoint.tmp").mkdir()), 3, "best 1"),
        # the new checkpoint in place, its best model not yet moved
        (lambda o: (_checkpoint(o / "checkpoint", 4, best=True), _checkpoint(o / "checkpoint.old", 3)),
         4, "best 4"),
        # best/ moved aside, the staged best not yet moved in
        (lambda o: (_checkpoint(o / "checkpoint", 4, best=True), (o / "best").rename(o / "best.old")),
         4, "best 4"),
        # a leftover, non-empty checkpoint.old beside a complete checkpoint
        (lambda o: (_checkpoint(o / "checkpoint", 6), _checkpoint(o / "checkpoint.old", 3)), 6, "best 1"),
    ],
)
def test_recover_every_intermediate_state(tmp_path: Path, make, expected_step: int, expected_best: str) -> None:
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / "best" / "model.safetensors").write_text("best 1")
    make(out)
    recover(out)
    assert json.loads((out / "checkpoint" / COMPLETE).read_text())["step"] == expected_step
    assert (out / "best" / "model.safetensors").read_text() == expected_best
    assert not any((out / n).exists() for n in ("checkpoint.tmp", "checkpoint.old", "best.old", "checkpoint/best"))
    state = _state(out)
    recover(out)  # idempotent
    assert _state(out) == state


def test_an_interrupted_write_keeps_the_previous_file(tmp_path: Path) -> None:
    """Outputs (predictions, submissions, metrics) are written to a temporary name and renamed into place."""
    from hire.runs import replacing

    path = tmp_path / "dev.jsonl"
    path.write_text("the earlier predictions\n")
    with pytest.raises(RuntimeError), replacing(path) as tmp, tmp.open("w") as f:
        f.write("half of the new")
        raise RuntimeError("killed while writing")
    assert path.read_text() == "the earlier predictions\n" and sorted(tmp_path.iterdir()) == [path]
    with replacing(path) as tmp:
        tmp.write_text("new\n")
    assert path.read_text() == "new\n" and sorted(tmp_path.iterdir()) == [path]
