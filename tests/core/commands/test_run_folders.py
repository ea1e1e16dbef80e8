"""Run folders lose nothing and say nothing wrong (issue 43): what is a run, what reuses one, and what a run
that cannot go on keeps.

Each test runs the ``hire`` command (through :func:`hire.cli.main` in the test's process, its own process where it
is killed or its disk fills up) on the tiny random encoder of ``badinput.shared`` and eight rows of text: 2 steps
an epoch in batches of 4, a few steps, the last-layer head (fast), fp32.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from badinput import LABELS, TEXTS, call_hire, check_fails_cleanly, given_once, hire_process, table

from hire import build_model, load_tokenizer
from hire.config import ConfigError, DataConfig, ModelArgs, RunConfig, TrainConfig
from hire.data import default_glue_dir
from hire.data.examples import DataError
from hire.runs import CHECKPOINT, COMPLETE, MARKER, run_precision

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="fp16 is refused only where there is no CUDA GPU")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    rows = [f"{t},{y}" for t, y in zip(TEXTS, LABELS, strict=True)]
    (root / "train.csv").write_text(table("sentence,label", rows))
    (root / "dev.csv").write_text(table("sentence,label", rows[:4]))
    return root


def train_args(shared: dict[str, Path], data: Path, out: Path | str, *extra: str) -> list[str]:
    return given_once(["train", "--output_dir", str(out), "--data.task", "custom", "--data.train_file",
                       str(data / "train.csv"), "--data.dev_file", str(data / "dev.csv"), "--model.encoder",
                       str(shared["enc"]), "--model.head", "last-layer", "--train.mixed_precision", "no",
                       "--train.batch_size", "4", "--train.max_steps", "4", "--train.eval_every", "2",
                       "--train.checkpoint_every", "1", "--predict_test", "false", *extra])


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def finished(shared: dict[str, Path], data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run (4 steps), never changed by the tests: they copy it."""
    out = tmp_path_factory.mktemp("runs") / "finished"
    ok(call_hire(train_args(shared, data, out), out.parent))
    return out


def killed(shared: dict[str, Path], data: Path, out: Path, *extra: str) -> None:
    """A run killed (``kill -9``) after its third step, before that step's checkpoint: a checkpoint and a best
    model of step 2."""
    result = hire_process(*train_args(shared, data, out, *extra), cwd=out.parent, kill="step:3", timeout=300)
    assert result.returncode == 137, result.stderr[-3000:]
    assert json.loads((out / CHECKPOINT / COMPLETE).read_text())["step"] == 2 and (out / "best").is_dir()


# -- 1. a folder is a run only if it carries the marker ----------------------------------------------
@pytest.mark.skipif(not (default_glue_dir() / "CoLA").is_dir(), reason="no GLUE CoLA data")
def test_a_users_folder_with_a_config_yaml_is_not_a_run(shared: dict[str, Path], tmp_path: Path) -> None:
    """The issue's reproduction: a folder holding config.yaml, metrics.jsonl and predictions/test.jsonl of the
    user's was taken for a run, and all three were deleted or replaced."""
    user = tmp_path / "U"
    (user / "predictions").mkdir(parents=True)
    (user / "config.yaml").write_text("a:1\n")
    (user / "metrics.jsonl").write_text("x\n")
    (user / "predictions" / "test.jsonl").write_text("y\n")
    before = files(user)
    line = error_line(call_hire(["train", "--data.task", "CoLA", "--model.encoder", str(shared["enc"]),
                                "--train.mixed_precision", "no", "--data.max_train_examples", "48",
                                "--data.max_eval_examples", "24", "--train.batch_size", "16", "--train.max_steps",
                                "2", "--output_dir", str(user)], tmp_path))
    assert f"--output_dir {user}: the folder is not empty and holds no run of hire's (no {MARKER} marker)" in line
    assert files(user) == before and sorted(p.name for p in user.iterdir()) == ["config.yaml", "metrics.jsonl",
                                                                                "predictions"]


def test_a_config_yaml_without_the_marker_is_no_run_to_resume(tmp_path: Path, recwarn: pytest.WarningsRecorder,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing takes a config.yaml for a run: the precision a run began in is read only from a run folder."""
    from hire import hardware

    monkeypatch.setattr(hardware, "cpu_has_fast_bf16", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = RunConfig(str(tmp_path), train=TrainConfig(mixed_precision="auto"))
    cfg.save(tmp_path / "config.yaml")
    (tmp_path / CHECKPOINT).mkdir()
    (tmp_path / CHECKPOINT / COMPLETE).write_text(json.dumps({"step": 1, "mixed_precision": "bf16"}))
    assert run_precision(tmp_path, cfg) == "no" and not recwarn.list
    (tmp_path / MARKER).write_text("{}\n")  # a run now: it goes on in the precision it began in
    with pytest.warns(RuntimeWarning, match="began in mixed precision 'bf16'"):
        assert run_precision(tmp_path, cfg) == "bf16"


# -- 2. every data check before anything on disk changes ---------------------------------------------
def test_tokenisation_comes_before_the_folder_changes(shared: dict[str, Path], data: Path, finished: Path,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Trainer reads and encodes every split before it decides what to do with the folder: an error there
    leaves a finished run as it was, --overwrite or not (the encoding used to come after the folder was
    cleared)."""
    from hire import training
    from hire.tasks.sequence.tasktype import SequenceTasks

    run = shutil.copytree(finished, tmp_path / "run")
    before = files(run)

    def failing(*args: object, **kwargs: object) -> None:
        raise DataError("a row that cannot be encoded")

    monkeypatch.setattr(SequenceTasks, "encode", failing)
    cfg = RunConfig(str(run), overwrite=True, data=DataConfig(task="custom", train_file=str(data / "train.csv"),
                                                              dev_file=str(data / "dev.csv")),
                    model=ModelArgs(encoder=str(shared["enc"]), head="last-layer"),
                    train=TrainConfig(mixed_precision="no", max_steps=2, batch_size=4))
    with pytest.raises(DataError, match="cannot be encoded"):
        training.Trainer(cfg)
    assert files(run) == before


# -- 3. one-shot actions are never saved, and never taken from a file --------------------------------
def test_a_saved_config_never_overwrites_its_run(shared: dict[str, Path], data: Path, finished: Path,
                                                 tmp_path: Path) -> None:
    """A run trained with --overwrite saves no ``overwrite``; its config.yaml given back with --config refuses a
    finished run instead of replacing it."""
    run = shutil.copytree(finished, tmp_path / "run")
    ok(call_hire([*train_args(shared, data, run), "--overwrite"], tmp_path))
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert "overwrite" not in saved and "overwrite" not in (run / "best" / "README.md").read_text()
    before = files(run)
    line = error_line(call_hire(["train", "--config", str(run / "config.yaml"), "--output_dir", str(run)], tmp_path))
    assert line.endswith(f"--output_dir {run} holds a finished run (see its metrics.json); add --overwrite to "
                         "delete it and run again")
    assert files(run) == before
    (tmp_path / "old.yaml").write_text((run / "config.yaml").read_text() + "overwrite: true\n")  # an older one
    line = error_line(call_hire(["train", "--config", str(tmp_path / "old.yaml"), "--output_dir", str(run)], tmp_path))
    assert "overwrite: true is not taken from a file" in line and "give --overwrite on the command line" in line
    assert files(run) == before


# -- 4. fp16 needs a GPU --------------------------------------------------------------------------------
@NO_GPU
@pytest.mark.parametrize(("args", "message"), [
    (["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.train_file", "{tmp}/train.csv",
      "--data.dev_file", "{tmp}/dev.csv", "--model.encoder", "{enc}", "--model.head", "last-layer",
      "--train.mixed_precision", "fp16"], "--train.mixed_precision fp16: needs a CUDA GPU, and there is none here; "
     "on a CPU use bf16, no or auto"),
    (["evaluate", "--model", "{sst2}", "--task", "SST-2", "--mixed_precision", "fp16", "--output_dir", "{tmp}/ev"],
     "--mixed_precision fp16: needs a CUDA GPU"),
    (["predict", "--model", "{single}", "--input", "{tmp}/input.csv", "--mixed_precision", "fp16"],
     "--mixed_precision fp16: needs a CUDA GPU"),
], ids=["train", "evaluate", "predict"])
def test_fp16_on_a_cpu_is_refused_before_anything_is_written(args: list[str], message: str,
                                                             shared: dict[str, Path], tmp_path: Path,
                                                             via: str) -> None:
    """Accelerate ran fp16 on a CPU in fp32 while the run recorded fp16."""
    check_fails_cleanly(args, message, shared, tmp_path, via)


# -- 5. --model.init_from: what the loaded model fixes ----------------------------------------------
@pytest.fixture(scope="module")
def hire_model(shared: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved HIRE model with one fusion layer."""
    folder = tmp_path_factory.mktemp("hire") / "best"
    model = build_model(str(shared["enc"]), "hire", 2, {"fusion_layers": 1}, ["neg", "pos"])
    model.save_pretrained(folder, load_tokenizer(str(shared["enc"])))
    return folder


@pytest.mark.parametrize(("options", "message"), [
    ({"head": "last-layer"}, "--model.head last-layer: --model.init_from {m} has head 'hire', which it keeps"),
    ({"head": "hire", "head_options": {"fusion_layers": 0}},
     "--model.head_options: fusion_layers=0, but --model.init_from {m} has fusion_layers=1 (its hire head is fixed)"),
    ({"head_options": {"dropout": 0.3}}, "--model.head_options: dropout=0.3, but --model.init_from {m} has "
                                         "dropout=0.1"),
    ({"encoder": "all-MiniLM-L6-v2"}, "--model.encoder all-MiniLM-L6-v2: --model.init_from {m} was fine-tuned from "
                                      "encoder {enc}, which it keeps"),
    ({"classifier_dropout": 0.2}, "--model.classifier_dropout 0.2: --model.init_from {m} has classifier dropout 0.1"),
])
def test_an_option_that_contradicts_the_loaded_model_is_an_error(options: dict[str, object], message: str,
                                                                 hire_model: Path, shared: dict[str, Path]) -> None:
    """Each used to be ignored while config.yaml said otherwise. Given on the command line (``given`` known),
    even a default value counts (``--model.head hire`` against a last-layer model; the encoder's default name)."""
    from hire.options import parse_options

    words = [w for k, v in options.items() for w in (f"--model.{k}", json.dumps(v) if isinstance(v, dict) else str(v))]
    cfg = parse_options(["--model.init_from", str(hire_model), *words])
    with pytest.raises(ConfigError) as err:
        cfg.model.validate([k for k in options])
    assert str(err.value).startswith(message.format(m=hire_model, enc=shared["enc"]))


def test_the_loaded_models_values_are_what_a_run_records(hire_model: Path, shared: dict[str, Path]) -> None:
    """Options left out take the model's values; given ones equal to them are accepted; a default value given
    explicitly contradicts a model that differs, left out it does not."""
    from hire.options import parse_options

    cfg = parse_options(["--model.init_from", str(hire_model), "--model.head_options", "fusion_layers=1"])
    cfg.validate()
    assert (cfg.model.encoder, cfg.model.head, cfg.model.head_options) == (str(shared["enc"]), "hire",
                                                                          {"fusion_layers": 1})
    single = str(shared["single"])
    cfg = parse_options(["--model.init_from", single])
    cfg.validate()
    assert (cfg.model.head, cfg.model.encoder) == ("last-layer", str(shared["enc"]))
    with pytest.raises(ConfigError, match=r"--model.head hire: .* has head 'last-layer'"):
        parse_options(["--model.init_from", single, "--model.head", "hire"]).validate()
    python = RunConfig(model=ModelArgs(init_from=single))  # built in Python: a default value means "as the model"
    python.validate()
    assert python.model.head == "last-layer"


def test_a_run_from_a_saved_model_records_and_resumes_what_ran(shared: dict[str, Path], data: Path,
                                                              tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [a for a in train_args(shared, data, run) if a not in ("--model.head", "last-layer", "--model.encoder",
                                                                  str(shared["enc"]))]
    killed(shared, data, run, "--model.init_from", str(shared["single"]), "--model.head", "last-layer")
    saved = yaml.safe_load((run / "config.yaml").read_text())["model"]
    assert (saved["head"], saved["encoder"], saved["init_from"]) == ("last-layer", str(shared["enc"]),
                                                                     str(shared["single"]))
    result = ok(call_hire([*args, "--model.init_from", str(shared["single"])], tmp_path))  # head left out
    assert "Resuming" in result.stdout + result.stderr
    assert json.loads((run / "metrics.json").read_text())["head"] == "last-layer"


# -- 7. a bare --overwrite, as the messages say --------------------------------------------------------
def test_the_advice_to_add_overwrite_works_as_printed(shared: dict[str, Path], data: Path, finished: Path,
                                                      tmp_path: Path) -> None:
    run = shutil.copytree(finished, tmp_path / "run")
    line = error_line(call_hire(train_args(shared, data, run, "--train.lr", "1e-3"), tmp_path))
    assert "add --overwrite to delete that run" in line and "train.lr (the run's 2e-05, now 0.001)" in line
    ok(call_hire([*train_args(shared, data, run, "--train.lr", "1e-3"), "--overwrite"], tmp_path))
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["lr"] == 1e-3


# -- 8. the same run folder, however it is named --------------------------------------------------------
@pytest.mark.parametrize("naming", ["trailing-slash", "relative", "moved", "encoder-path"])
def test_the_same_run_resumes_however_its_folder_is_named(naming: str, shared: dict[str, Path], data: Path,
                                                         tmp_path: Path) -> None:
    """Refused as "another configuration (differs in: output_dir)", whose advice (--overwrite) threw the
    checkpoint away. The folder's own location never counts; other paths count resolved."""
    run = tmp_path / "run"
    killed(shared, data, run)
    encoder = str(shared["enc"])
    given, cwd, extra = str(run), tmp_path, []
    if naming == "trailing-slash":
        given = f"{run}/"
    elif naming == "relative":
        given = "./run"
    elif naming == "moved":
        given = str(run.rename(tmp_path / "moved"))
    else:
        extra = ["--model.encoder", f"{encoder}/../{Path(encoder).name}/"]
    result = ok(call_hire(train_args(shared, data, given, *extra), cwd))
    assert "Resuming" in result.stdout + result.stderr and "from step 2" in result.stdout + result.stderr
    out = tmp_path / ("moved" if naming == "moved" else "run")
    assert json.loads((out / "metrics.json").read_text())["steps"] == 4


# -- 9. a full disk while a checkpoint is saved ------------------------------------------------------
@pytest.mark.parametrize("kind", ["torch", "python"])
def test_a_full_disk_during_a_checkpoint_keeps_the_last_one(kind: str, shared: dict[str, Path], data: Path,
                                                            finished: Path, tmp_path: Path) -> None:
    """One line naming the file and what is kept, the half-written checkpoint removed, the previous checkpoint and
    best/ intact, and the same command resumes to the run that never failed."""
    run = tmp_path / "run"
    args = train_args(shared, data, run)
    result = hire_process(*args, cwd=tmp_path, kill=f"full:{kind}:3", timeout=300)  # the third checkpoint
    line = error_line(result)
    failed = "optimizer.bin" if kind == "torch" else "trainer_state.json"
    assert line.startswith(f"hire train: error: {run / 'checkpoint.tmp' / failed}: could not write the checkpoint "
                           "of step 3 (")
    assert line.endswith(f"the last checkpoint (step 2) and best/ are kept in {run}: the run resumes from it; fix the "
                         "cause (free some space) and run the same command again")
    assert json.loads((run / CHECKPOINT / COMPLETE).read_text())["step"] == 2
    assert (run / "best" / "model.safetensors").is_file() and not (run / "checkpoint.tmp").exists()
    result = ok(call_hire(args, tmp_path))
    assert "Resuming" in result.stdout + result.stderr
    assert (run / "metrics.jsonl").read_text() == (finished / "metrics.jsonl").read_text()
    assert (run / "best" / "model.safetensors").read_bytes() == (finished / "best" / "model.safetensors").read_bytes()


# -- 12, 13. --print_config: a valid configuration, as a run would save it; a dev file equal to the train file
def test_print_config_prints_what_would_run_and_changes_nothing(shared: dict[str, Path], data: Path,
                                                                tmp_path: Path) -> None:
    args = [*train_args(shared, data, tmp_path / "run"), "--overwrite"]
    result = ok(call_hire([*args, "--print_config"], tmp_path))
    printed = yaml.safe_load(result.stdout)
    assert "overwrite" not in printed and printed["train"]["max_steps"] == 4 and not (tmp_path / "run").exists()
    (tmp_path / "printed.yaml").write_text(result.stdout)
    from hire.options import parse_options

    assert parse_options(["--config", str(tmp_path / "printed.yaml")]) == parse_options(args[1:-1])
    skipped = yaml.safe_load(ok(call_hire([*args, "--print_config=skip_default"], tmp_path)).stdout)
    assert "data_dir" not in skipped["data"] and skipped["train"] == {
        "batch_size": 4, "eval_every": 2, "checkpoint_every": 1, "mixed_precision": "no", "max_steps": 4}
    given = yaml.safe_load(ok(call_hire([*args[:-1], "--train.lr", "2e-5", "--print_config", "skip_unset"],
                                       tmp_path)).stdout)
    assert given["train"] == {"lr": 2e-5, **skipped["train"]} and "epochs" not in given["train"]


def test_a_dev_file_identical_to_the_train_file_warns_in_one_line(shared: dict[str, Path], data: Path,
                                                                  tmp_path: Path) -> None:
    copy = shutil.copy(data / "train.csv", tmp_path / "copy.csv")
    for dev in (data / "train.csv", copy):
        args = [*train_args(shared, data, tmp_path / "run", "--data.dev_file", str(dev)), "--print_config"]
        result = ok(call_hire(args, tmp_path))
        assert result.stderr.strip().splitlines() == [
            f"hire train: warning: --data.dev_file {dev} holds the same rows as --data.train_file {data / 'train.csv'}"
            ": the best model is picked, and scored, on its own training data"]
    assert not ok(call_hire([*train_args(shared, data, tmp_path / "run"), "--print_config"], tmp_path)).stderr.strip()


def test_a_file_system_without_locks_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flock refused (ENOLCK: a shared file system mounted without locks) comes without a file name; the lock's
    path and the cause make one line."""
    import errno
    import fcntl

    from hire.cli import describe_os_error
    from hire.runs import take_lock

    def refuse(*args: object) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)
    with pytest.raises(OSError) as caught:
        take_lock(tmp_path / ".lock")
    assert describe_os_error(caught.value) == (f"{tmp_path / '.lock'}: the file system refuses file locks (flock); "
                                               "use a folder on one that allows them")
