"""Bad input, table-driven: the real ``hire`` command, run once per case, must fail with exit status 2 and
exactly one line ``hire <command>: error: ...`` naming the option, file or line at fault (the last line of
stderr), no traceback, and no file created, changed or removed: not the user's files, not a finished run,
not the saved models.

Each case runs in a fresh folder holding small data files, a user's file and a finished-looking run; the
tiny encoder and three saved models (single sentences, pairs, and a GLUE SST-2 model) are shared. Most
cases fail before torch is imported, so the file runs in well under a minute.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from badinput import check_fails_cleanly, given_once

from hire.config import ConfigError, RunConfig, TrainConfig, check_max_length, encoder_max_length

TRAIN = ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.train_file", "{tmp}/train.csv",
         "--data.dev_file", "{tmp}/dev.csv", "--model.encoder", "{enc}", "--model.head", "last-layer",
         "--train.mixed_precision", "no"]
GLUE = ["train", "--output_dir", "{tmp}/run", "--data.task", "RTE", "--model.encoder", "{enc}"]
PREDICT = ["predict", "--model", "{single}", "--input", "{tmp}/input.csv"]
EVALUATE = ["evaluate", "--model", "{sst2}", "--task", "SST-2"]

# (id, command line, what the error line must contain)
CASES: list[tuple[str, list[str], str]] = [
    # -- training options: type and range, checked before anything is read or loaded
    ("batch-size-0", [*TRAIN, "--train.batch_size", "0"], "--train.batch_size: must be >= 1, not 0"),
    ("batch-size-negative", [*TRAIN, "--train.batch_size", "-4"], "--train.batch_size: must be >= 1"),
    ("checkpoint-every-0", [*TRAIN, "--train.checkpoint_every", "0"], "--train.checkpoint_every: must be >= 1"),
    ("max-train-examples-0", [*TRAIN, "--data.max_train_examples", "0"], "--data.max_train_examples: must be"),
    ("max-train-examples-negative", [*TRAIN, "--data.max_train_examples", "-1"], "--data.max_train_examples"),
    ("max-eval-examples-negative", [*TRAIN, "--data.max_eval_examples", "-2"], "--data.max_eval_examples"),
    ("max-length-0", [*TRAIN, "--data.max_length", "0"], "--data.max_length: must be >= 8"),
    ("max-steps-0", [*TRAIN, "--train.max_steps", "0"], "--train.max_steps: must be >= 1"),
    ("max-steps-negative", [*TRAIN, "--train.max_steps", "-3"], "--train.max_steps: must be >= 1, not -3"),
    ("eval-every-0", [*TRAIN, "--train.eval_every", "0"], "--train.eval_every: must be >= 1"),
    ("epochs-0", [*TRAIN, "--train.epochs", "0"], "--train.epochs: must be >= 1"),
    ("epochs-negative", [*TRAIN, "--train.epochs", "-1"], "--train.epochs: must be >= 1, not -1"),
    ("lr-negative", [*TRAIN, "--train.lr", "-1"], "--train.lr: must be >= 0, not -1.0"),
    ("lr-not-a-number", [*TRAIN, "--train.lr", "fast"], "--train.lr: expected a number"),
    ("lr-nan", [*TRAIN, "--train.lr", "nan"], "--train.lr: must be a finite number, not nan"),
    ("head-lr-0", [*TRAIN, "--train.head_lr", "0"], "--train.head_lr: must be > 0"),
    ("adam-beta1-2", [*TRAIN, "--train.adam_beta1", "2"], "--train.adam_beta1: must be in [0, 1)"),
    ("adam-beta2-1", [*TRAIN, "--train.adam_beta2", "1"], "--train.adam_beta2: must be in [0, 1)"),
    ("adam-eps-0", [*TRAIN, "--train.adam_eps", "0"], "--train.adam_eps: must be > 0"),
    ("weight-decay-negative", [*TRAIN, "--train.weight_decay", "-0.1"], "--train.weight_decay: must be >= 0"),
    ("warmup-ratio-1.5", [*TRAIN, "--train.warmup_ratio", "1.5"], "--train.warmup_ratio: must be in [0, 1]"),
    ("max-grad-norm-0", [*TRAIN, "--train.max_grad_norm", "0"], "--train.max_grad_norm: must be > 0"),
    ("patience-0", [*TRAIN, "--train.patience", "0"], "--train.patience: must be >= 1"),
    ("seed-negative", [*TRAIN, "--train.seed", "-1"], "--train.seed"),
    ("classifier-dropout-1", [*TRAIN, "--model.classifier_dropout", "1"], "--model.classifier_dropout: must be in"),
    ("bool-not-a-bool", [*TRAIN, "--train.group_by_length", "maybe"], "--train.group_by_length: expected true"),
    ("mixed-precision-fp8", [*TRAIN, "--train.mixed_precision", "fp8"],
     "--train.mixed_precision: expected one of auto, no, bf16, fp16, not 'fp8'"),
    ("unknown-option", [*TRAIN, "--train.lrr", "3"], "did you mean '--train.lr'"),
    ("option-without-section", [*TRAIN, "--epochs", "3"], "did you mean '--train.epochs'"),
    # -- the head and its options
    ("unknown-head", [*TRAIN, "--model.head", "hyre"], "unknown head 'hyre'"),
    ("head-option-type", [*TRAIN, "--model.head", "hire", "--model.head_options", "fusion_layers=abc"],
     "--model.head_options: fusion_layers: expected an integer, not 'abc'"),
    ("head-option-range", [*TRAIN, "--model.head", "hire", "--model.head_options", "fusion_layers=9"],
     "--model.head_options: fusion_layers: must be in [0, 3], not 9"),
    ("head-option-dropout", [*TRAIN, "--model.head", "hire", "--model.head_options", "dropout=1.5"],
     "--model.head_options: dropout: must be in [0, 1), not 1.5"),
    ("head-option-unknown", [*TRAIN, "--model.head_options", "fusion_layers=1"], "has no option 'fusion_layers'"),
    ("head-options-bad-json", [*TRAIN, "--model.head_options", '{"k": '], "--model.head_options: not valid JSON"),
    # -- what the options name: encoder, model to start from, output folder, --config
    ("encoder-missing-path", [*TRAIN, "--model.encoder", "{tmp}/no/such/encoder"],
     "--model.encoder {tmp}/no/such/encoder: no such folder"),
    ("encoder-unknown-name", [*TRAIN, "--model.encoder", "no-such-encoder"], "no-such-encoder: no such folder"),
    ("encoder-not-a-model", [*TRAIN, "--model.encoder", "{tmp}/folder"], "(no config.json)"),
    ("init-from-missing", [*TRAIN, "--model.init_from", "{tmp}/nope"], "--model.init_from {tmp}/nope: no such"),
    ("init-from-not-a-model", [*TRAIN, "--model.init_from", "{tmp}/folder"], "not a saved hire model"),
    ("init-from-inside-output", [*TRAIN, "--output_dir", "{tmp}/done", "--overwrite", "true",
                                 "--model.init_from", "{tmp}/done/best"], "inside --output_dir"),
    ("output-dir-is-a-file", [*TRAIN, "--output_dir", "{tmp}/notes.txt"], "--output_dir {tmp}/notes.txt: a file"),
    ("output-dir-under-a-file", [*TRAIN, "--output_dir", "{tmp}/notes.txt/run"], "is a file, not a folder"),
    ("output-dir-finished-run", [*TRAIN, "--output_dir", "{tmp}/done"], "--output_dir {tmp}/done"),
    ("config-bad-yaml", ["train", "--config", "{tmp}/bad.yaml"], "bad.yaml: not valid YAML (line 3"),
    ("config-is-a-folder", ["train", "--config", "{tmp}/folder"], "a folder, not a YAML file"),
    ("config-missing", ["train", "--config", "{tmp}/nope.yaml"], "--config {tmp}/nope.yaml: no such file"),
    ("config-unknown-key", ["train", "--config", "{tmp}/unknown.yaml"], "unknown option 'train.lrr'"),
    ("config-section-not-a-mapping", ["train", "--config", "{tmp}/flat.yaml"], "train must be a mapping"),
    ("config-nan", ["train", "--config", "{tmp}/nan.yaml"], "--train.lr: must be a finite number, not nan"),
    ("config-bare-no", ["train", "--config", "{tmp}/bare_no.yaml"], "--train.mixed_precision: expected one of auto, "
     "no, bf16, fp16, not False (YAML reads a bare no as false: write it in quotes"),
    # -- the task and its data
    ("bad-task-name", [*GLUE, "--data.task", "GLUEY"], "--data.task: unknown GLUE task 'GLUEY'"),
    ("glue-task-with-custom-file", [*GLUE, "--data.train_file", "{tmp}/train.csv"],
     "--data.train_file: only for --data.task custom"),
    ("glue-missing-data-dir", [*GLUE, "--data.data_dir", "{tmp}/nope"], "--data.data_dir {tmp}/nope: no such"),
    ("custom-without-train-file", ["train", "--data.task", "custom", "--model.encoder", "{enc}"],
     "--data.train_file"),
    ("custom-without-dev-file", ["train", "--data.task", "custom", "--data.train_file", "{tmp}/train.csv"],
     "--data.dev_file"),
    ("custom-missing-file", [*TRAIN, "--data.train_file", "{tmp}/nope.csv"], "--data.train_file {tmp}/nope.csv"),
    ("text-column-is-label", [*TRAIN, "--data.text_columns", "label"], "--data.text_columns: 'label' is also"),
    ("three-text-columns", [*TRAIN, "--data.text_columns", "a,b,c"], "--data.text_columns: give one or two"),
    ("text-column-twice", [*TRAIN, "--data.text_columns", "sentence,sentence"], "the same column twice"),
    ("dev-label-typo", [*TRAIN, "--data.dev_file", "{tmp}/dev_typo.csv"], "dev_typo.csv, line 4: label 'positive'"),
    ("test-label-typo", [*TRAIN, "--data.test_file", "{tmp}/dev_typo.csv"], "dev_typo.csv, line 4: label 'posit"),
    ("label-column-missing", [*TRAIN, "--data.label_column", "gold"], "train.csv, line 1: no column 'gold'"),
    ("empty-train-file", [*TRAIN, "--data.train_file", "{tmp}/empty.csv"], "empty.csv, line 1: the file is empty"),
    ("header-only-dev-file", [*TRAIN, "--data.dev_file", "{tmp}/header_only.csv"], "header_only.csv, line 2"),
    # -- hire evaluate
    ("evaluate-missing-model", ["evaluate", "--model", "{tmp}/nope", "--task", "RTE"],
     "--model {tmp}/nope: no such folder"),
    ("evaluate-not-a-model", ["evaluate", "--model", "{tmp}/folder", "--task", "RTE"], "not a saved hire model"),
    ("evaluate-batch-size-0", [*EVALUATE, "--batch_size", "0"], "--batch_size: must be >= 1, not 0"),
    ("evaluate-max-length-0", [*EVALUATE, "--max_length", "0"], "--max_length: must be >= 8, not 0"),
    ("evaluate-max-length-too-long", [*EVALUATE, "--max_length", "500"], "--max_length: must be <= 160"),
    ("evaluate-max-examples-negative", [*EVALUATE, "--max_examples", "-1"], "--max_examples: must be >= 1"),
    ("evaluate-bad-task", ["evaluate", "--model", "{sst2}", "--task", "GLUEY"], "--task: unknown GLUE task"),
    ("evaluate-single-model-on-pairs", ["evaluate", "--model", "{sst2}", "--task", "MRPC"],
     "--task MRPC: the task has sentence pairs"),
    ("evaluate-other-labels", ["evaluate", "--model", "{single}", "--task", "SST-2"], "predicts labels"),
    ("evaluate-output-dir-is-a-file", [*EVALUATE, "--output_dir", "{tmp}/notes.txt"], "--output_dir"),
    # -- hire predict
    ("predict-output-is-input", [*PREDICT, "--output", "{tmp}/input.csv"], "the same file as --input"),
    ("predict-output-is-input-resolved", [*PREDICT, "--output", "{tmp}/folder/../input.csv"],
     "the same file as --input"),
    ("predict-output-is-a-folder", [*PREDICT, "--output", "{tmp}/folder"], "--output {tmp}/folder: a folder"),
    ("predict-output-under-a-file", [*PREDICT, "--output", "{tmp}/notes.txt/p.jsonl"], "is a file, not a folder"),
    ("predict-missing-input", ["predict", "--model", "{single}", "--input", "{tmp}/nope.csv"], "--input"),
    ("predict-missing-model", ["predict", "--model", "{tmp}/nope", "--input", "{tmp}/input.csv"], "--model"),
    ("predict-pair-model-one-column", ["predict", "--model", "{pair}", "--input", "{tmp}/input.csv",
                                       "--text_columns", "sentence"], "--text_columns sentence: --model"),
    ("predict-single-model-two-columns", ["predict", "--model", "{single}", "--input", "{tmp}/pairs.csv",
                                          "--text_columns", "first,second"], "trained on single sentences"),
    ("predict-text-column-is-label", [*PREDICT, "--text_columns", "label"], "--text_columns: 'label' is also"),
    ("predict-label-typo", ["predict", "--model", "{single}", "--input", "{tmp}/dev_typo.csv"],
     "dev_typo.csv, line 4: label 'positive'"),
    ("predict-batch-size-0", [*PREDICT, "--batch_size", "0"], "--batch_size: must be >= 1"),
    ("predict-max-length-too-long", [*PREDICT, "--max_length", "500"], "--max_length: must be <= 160"),
    ("predict-unknown-option", [*PREDICT, "--ouput", "x.jsonl"], "did you mean '--output'"),
    # -- hire export
    ("export-missing-model", ["export", "--model", "{tmp}/nope", "--output_dir", "{tmp}/copy"],
     "--model {tmp}/nope: no such folder"),
    ("export-output-not-empty", ["export", "--model", "{single}", "--output_dir", "{tmp}/done"],
     "--output_dir {tmp}/done: not empty"),
    ("export-output-is-a-file", ["export", "--model", "{single}", "--output_dir", "{tmp}/notes.txt"],
     "--output_dir {tmp}/notes.txt: a file"),
    # -- hire report
    ("report-markdown-is-a-folder", ["report", "{tmp}/done", "--markdown", "{tmp}/folder"], "--markdown"),
    ("report-missing-run", ["report", "{tmp}/nope"], "{tmp}/nope: no such run folder"),
    ("report-disk-full", ["report", "{tmp}/done", "--markdown", "/dev/full"], "/dev/full: no space left"),
    # -- issue 43: a --config file that repeats a key, or sets overwrite (a one-shot action of the command line)
    ("config-key-twice", ["train", "--config", "{tmp}/twice.yaml"],
     "--config {tmp}/twice.yaml: line 3: the key 'lr' is given twice (first on line 2); keep one"),
    ("config-section-twice", ["train", "--config", "{tmp}/twice_section.yaml"],
     "line 3: the key 'train' is given twice (first on line 1)"),
    ("config-sets-overwrite", [*TRAIN, "--config", "{tmp}/overwrite.yaml", "--output_dir", "{tmp}/done"],
     "--config {tmp}/overwrite.yaml: overwrite: true is not taken from a file (it would act on every command that "
     "reads the file); give --overwrite on the command line"),
    # -- issue 43: every data check before the folder changes, --overwrite or not
    ("overwrite-with-one-class-file", [*TRAIN, "--output_dir", "{tmp}/done", "--overwrite",
                                       "--data.train_file", "{tmp}/one_class.csv"],
     "--data.train_file {tmp}/one_class.csv: only one label ('pos') in its 3 rows; a classifier needs"),
    ("one-row-file", [*TRAIN, "--data.train_file", "{tmp}/one_row.csv", "--data.dev_file", "{tmp}/one_row.csv"],
     "--data.train_file {tmp}/one_row.csv: only one label ('pos') in its 1 row"),
    # -- issue 43: --print_config prints only a valid configuration
    ("print-config-invalid", [*TRAIN, "--train.lr", "-5", "--print_config"], "--train.lr: must be >= 0, not -5.0"),
    ("print-config-bad-flag", [*TRAIN, "--print_config=colours"], "--print_config: unknown flag 'colours'"),
    # -- issue 43: with --model.init_from, an option the loaded model fixes is never silently ignored
    ("init-from-other-head", [*TRAIN, "--model.init_from", "{single}", "--model.head", "hire"],
     "--model.head hire: --model.init_from {single} has head 'last-layer', which it keeps"),
    ("init-from-other-encoder", [*TRAIN, "--model.init_from", "{single}", "--model.encoder", "{tmp}/folder"],
     "--model.encoder {tmp}/folder: --model.init_from {single} was fine-tuned from encoder {enc}, which it keeps"),
    ("init-from-other-dropout", [*TRAIN, "--model.init_from", "{single}", "--model.classifier_dropout", "0.3"],
     "--model.classifier_dropout 0.3: --model.init_from {single} has classifier dropout 0.1, which it keeps"),
    # -- issue 43: what a path really is: a symbolic link loop, a device, a FIFO
    ("output-dir-symlink-loop", [*TRAIN, "--output_dir", "{tmp}/loop"],
     "--output_dir {tmp}/loop: a symbolic link loop, not a folder"),
    ("output-dir-under-symlink-loop", [*TRAIN, "--output_dir", "{tmp}/loop/run"],
     "--output_dir {tmp}/loop/run: a path through a symbolic link loop, not a folder"),
    ("output-dir-dangling-symlink", [*TRAIN, "--output_dir", "{tmp}/dangling"],
     "--output_dir {tmp}/dangling: a symbolic link to nowhere, which does not exist, not a folder"),
    ("train-file-symlink-loop", [*TRAIN, "--data.train_file", "{tmp}/loop"],
     "--data.train_file {tmp}/loop: a symbolic link loop, not a file"),
    ("train-file-dev-null", [*TRAIN, "--data.train_file", "/dev/null"], "--data.train_file /dev/null: a device, not"),
    ("dev-file-fifo", [*TRAIN, "--data.dev_file", "{tmp}/fifo"], "--data.dev_file {tmp}/fifo: a FIFO (named pipe)"),
    ("data-dir-symlink-loop", [*GLUE, "--data.data_dir", "{tmp}/loop"],
     "--data.data_dir {tmp}/loop: a symbolic link loop, not a folder"),
    ("config-symlink-loop", ["train", "--config", "{tmp}/loop"], "--config {tmp}/loop: a symbolic link loop, not a"),
    ("config-fifo", ["train", "--config", "{tmp}/fifo"], "--config {tmp}/fifo: a FIFO (named pipe), not a YAML"),
    ("encoder-symlink-loop", [*TRAIN, "--model.encoder", "{tmp}/loop"], "--model.encoder {tmp}/loop: a symbolic link"),
    ("init-from-symlink-loop", [*TRAIN, "--model.init_from", "{tmp}/loop"], "--model.init_from {tmp}/loop: a symbolic"),
    ("evaluate-model-symlink-loop", ["evaluate", "--model", "{tmp}/loop", "--task", "RTE"],
     "--model {tmp}/loop: a symbolic link loop"),
    ("evaluate-output-dir-symlink-loop", [*EVALUATE, "--output_dir", "{tmp}/loop"],
     "--output_dir {tmp}/loop: a symbolic link loop"),
    ("predict-input-symlink-loop", ["predict", "--model", "{single}", "--input", "{tmp}/loop"],
     "--input {tmp}/loop: a symbolic link loop, not a file"),
    ("predict-input-fifo", ["predict", "--model", "{single}", "--input", "{tmp}/fifo"], "--input {tmp}/fifo: a FIFO"),
    ("predict-output-symlink-loop", [*PREDICT, "--output", "{tmp}/loop"], "--output {tmp}/loop: a symbolic link loop"),
    ("export-output-symlink-loop", ["export", "--model", "{single}", "--output_dir", "{tmp}/loop"],
     "--output_dir {tmp}/loop: a symbolic link loop"),
    ("report-markdown-symlink-loop", ["report", "{tmp}/done", "--markdown", "{tmp}/loop"],
     "--markdown {tmp}/loop: a symbolic link loop"),
]


def write_more(root: Path) -> None:
    """The files of the issue-43 cases, beside ``badinput.write_world``'s: YAML that repeats a key or sets
    overwrite, data of one class, a symbolic link loop, a link to nothing, a FIFO."""
    (root / "twice.yaml").write_text("train:\n  lr: 1.0e-4\n  lr: 2.0e-4\n")
    (root / "twice_section.yaml").write_text("train:\n  lr: 1.0e-4\ntrain:\n  seed: 3\n")
    (root / "overwrite.yaml").write_text("overwrite: true\n")
    (root / "one_class.csv").write_text("sentence,label\na fine film,pos\ngood fun,pos\ngreat,pos\n")
    (root / "one_row.csv").write_text("sentence,label\na fine film,pos\n")
    (root / "loop").symlink_to("loop")
    (root / "dangling").symlink_to("nowhere")
    os.mkfifo(root / "fifo")


@pytest.mark.parametrize(("args", "message"), [(given_once(c[1]), c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_fails_with_one_clear_line(args: list[str], message: str, shared: dict[str, Path],
                                            tmp_path: Path, via: str) -> None:
    write_more(tmp_path)
    check_fails_cleanly(args, message, shared, tmp_path, via)


# -- in-process: what cannot be made to happen from outside, and the helpers on their own


def test_interrupt_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from hire import cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_train", interrupted)
    monkeypatch.delenv("HIRE_DEBUG", raising=False)
    assert cli.main(["train"]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["hire train: interrupted; run the same command again to resume from the "
                                        "last checkpoint"]


@pytest.mark.parametrize("outcome", ["finished", "failed"])
def test_a_command_under_torchrun_leaves_its_process_group(outcome: str, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """A group left alive to the interpreter's teardown can abort a finished torchrun run (SIGABRT in the
    gloo threads); the CLI destroys it on the way out, whether the command succeeded or failed."""
    import torch.distributed as dist

    from hire import cli

    def command(args: object) -> int:
        assert dist.is_initialized()
        if outcome == "failed":
            raise ValueError("bad option")
        return 0

    monkeypatch.setattr(cli, "_cmd_train", command)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert cli.main(["train"]) == (0 if outcome == "finished" else 2)
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.parametrize(("error", "line"), [
    (OSError(errno.ENOSPC, "No space left on device", "/runs/x/metrics.json"),
     "/runs/x/metrics.json: no space left on the device; free some space and run the same command again"),
    (OSError(errno.EROFS, "Read-only file system", "/ro/run"), "/ro/run: read-only file system"),
    (PermissionError(errno.EACCES, "Permission denied", "/root/x"), "/root/x: permission denied"),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "/tmp/out"), "/tmp/out: a folder, not a file"),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/a.txt/b"),
     "/a.txt/b: a part of the path is a file, not a folder"),
])
def test_os_errors_are_one_line_naming_the_path(error: OSError, line: str, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    from hire import cli, commands

    def failing(args: object) -> int:
        raise error

    monkeypatch.setattr(commands, "_cmd_predict", failing)
    monkeypatch.delenv("HIRE_DEBUG", raising=False)
    assert cli.main(["predict", "--model", "m", "--input", "i.csv"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"hire predict: error: {line}"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_output_folder(tmp_path: Path) -> None:
    from hire.checks import check_output_file, check_output_folder

    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="permission denied"):
            check_output_folder(tmp_path / "ro" / "run", "--output_dir")
        with pytest.raises(ConfigError, match="permission denied"):
            check_output_file(tmp_path / "ro" / "p.jsonl", "--output")
    finally:
        (tmp_path / "ro").chmod(0o700)


def test_max_length_against_the_encoder_positions() -> None:
    bert = {"model_type": "bert", "max_position_embeddings": 512, "pad_token_id": 0}
    roberta = {"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}
    deberta_v3 = {"model_type": "deberta-v2", "max_position_embeddings": 512, "position_biased_input": False}
    assert [encoder_max_length(c) for c in (bert, roberta, deberta_v3)] == [512, 512, None]
    check_max_length(512, roberta)
    with pytest.raises(ConfigError, match=r"^--data.max_length: must be <= 512, .* not 513$"):
        check_max_length(513, roberta)
    check_max_length(100_000, deberta_v3)


def test_python_api_validates_types_too() -> None:
    with pytest.raises(ConfigError, match=r"^--train.lr: expected a number, not '3e-5'$"):
        RunConfig(train=TrainConfig(lr="3e-5")).validate()  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^--train.batch_size: expected an integer, not True$"):
        RunConfig(train=TrainConfig(batch_size=True)).validate()


def test_cheap_checks_need_no_torch(tmp_path: Path) -> None:
    """An option error answers without importing torch (about 0.1 s instead of several seconds)."""
    code = ("import sys\nfrom hire.cli import main\nrc = main(['train', '--train.lr', '-1'])\n"
            "assert 'torch' not in sys.modules, 'torch imported'\nsys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "hire train: error: --train.lr: must be >= 0, not -1.0"
    assert not any(tmp_path.iterdir())


def test_trained_text_columns_come_from_the_run_folder(shared: dict[str, Path], tmp_path: Path) -> None:
    """Read from the run's config.yaml beside best/; a model copied out of its run folder cannot tell (until
    training records its columns in config.json), and predict then takes --text_columns as given."""
    from hire.saved_model import saved_model_config, trained_text_columns

    copy = shutil.copytree(shared["pair"], tmp_path / "copy")
    assert trained_text_columns(str(copy), saved_model_config(str(copy))) is None
    assert trained_text_columns(str(shared["pair"]), saved_model_config(str(shared["pair"]))) == ["first", "second"]
    assert trained_text_columns(str(shared["sst2"]), saved_model_config(str(shared["sst2"]))) == ["sentence"]
