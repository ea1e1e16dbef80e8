"""Bad input to the commands on saved models and run folders (``hire evaluate``, ``predict``, ``export``,
``report``), table-driven through the real command (issue 43): one line naming the option, file or line at
fault, exit status 2, no traceback, and nothing on disk created, changed or removed; above all, never a run's
own files (``metrics.json``, ``best/``, ``predictions/``) nor a command's own input written over.

The world of these cases (built once per module, beside the shared tiny encoder and saved models): a run that
``hire train`` finished (a custom task with labels 0 and 1, so that it also scores SST-2), an unmarked copy of
it (a run from before the marker), copies whose ``metrics.json`` or predictions are not what training writes,
and model folders that are damaged: no tokenizer, weights cut short or not the model's, a ``config.json`` whose
fields have the wrong types. A full disk during ``hire export`` is injected in-process, and made real with a
file size limit.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest
import torch
from badinput import LABELS, TEXTS, call_hire, check_fails_cleanly, hire_process, snapshot, table
from safetensors.torch import load_file, save_file

from hire.data import default_glue_dir

RUN_FILES = shutil.ignore_patterns(".lock")


def _copy_run(run: Path, to: Path, marker: bool = True) -> Path:
    shutil.copytree(run, to, ignore=RUN_FILES if marker else shutil.ignore_patterns(".lock", ".hire-run"))
    return to


def _copy_model(best: Path, to: Path, files: tuple[str, ...] | None = None) -> Path:
    to.mkdir()
    for file in best.iterdir():
        if files is None or file.name in files:
            shutil.copy(file, to / file.name)
    return to


def _edit_config(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


@pytest.fixture(scope="module")
def world(shared: dict[str, Path]) -> dict[str, Path]:
    """The shared encoder and models, and what these cases name (all under the shared root, which every case
    checks is left as it was)."""
    root = shared["root"]
    data = root / "data01"
    data.mkdir()
    rows = [f"{text},{int(label == 'pos')}" for text, label in zip(TEXTS, LABELS, strict=True)]
    (data / "train.csv").write_text(table("sentence,label", rows))
    (data / "dev.csv").write_text(table("sentence,label", rows[:4]))
    run = root / "run"
    trained = call_hire(["train", "--output_dir", str(run), "--data.task", "custom", "--data.train_file",
                         str(data / "train.csv"), "--data.dev_file", str(data / "dev.csv"), "--model.encoder",
                         str(shared["enc"]), "--model.head", "hire", "--train.mixed_precision", "no",
                         "--train.max_steps", "2", "--train.batch_size", "4"], root)
    assert trained.returncode == 0, trained.stderr[-3000:]
    places = {**shared, "run": run, "legacy": _copy_run(run, root / "legacy", marker=False)}
    final = json.loads((run / "metrics.json").read_text())
    bad_metrics = {
        "metrics_list": "[1, 2]\n",
        "metrics_cut": json.dumps(final, indent=2)[:60],
        "metrics_missing": json.dumps({"task": "train", "dev": final["dev"]}),
        "metrics_of_evaluate": json.dumps({"model": "run/best", "task": "SST-2", "dev": {"accuracy": 0.5}}),
        "metrics_wrong_type": json.dumps({**final, "dev": {"dev": {"accuracy": "high"}}}),
    }
    for name, text in bad_metrics.items():
        (_copy_run(run, root / name) / "metrics.json").write_text(text)
    cut = _copy_run(run, root / "predictions_cut") / "predictions" / "dev.jsonl"
    lines = cut.read_text().splitlines(keepends=True)
    cut.write_text(lines[0] + lines[1][: len(lines[1]) // 2])
    best = run / "best"
    places["no_tokenizer"] = _copy_model(best, root / "no_tokenizer", ("config.json", "model.safetensors"))
    weights = best / "model.safetensors"
    for name, size in (("weights_cut", weights.stat().st_size // 2), ("weights_empty", 0)):
        places[name] = _copy_model(best, root / name)
        (places[name] / "model.safetensors").write_bytes(weights.read_bytes()[:size])
    places["weights_text"] = _copy_model(best, root / "weights_text")
    (places["weights_text"] / "model.safetensors").write_text("not weights at all\n")
    places["weights_foreign"] = _copy_model(best, root / "weights_foreign")  # the encoder's weights alone
    shutil.copy(shared["enc"] / "model.safetensors", places["weights_foreign"] / "model.safetensors")
    places["weights_misshapen"] = _copy_model(best, root / "weights_misshapen")
    tensors = load_file(weights)
    tensors["output.out.weight"] = torch.zeros(3, tensors["output.out.weight"].shape[1])
    tensors["output.out.bias"] = torch.zeros(3)
    save_file(tensors, places["weights_misshapen"] / "model.safetensors", metadata={"format": "pt"})
    bad_configs = {
        "config_head": {"head": 5},
        "config_encoder": {"encoder_config": "bert"},
        "config_label_names": {"label_names": "01"},
        "config_text_columns": {"text_columns": [1]},
        "config_labels_disagree": {"label_names": ["0", "1", "2"]},
    }
    for name, changes in bad_configs.items():
        places[name] = _copy_model(best, root / name)
        _edit_config(places[name], **changes)
    return {**places, **{name: root / name for name in bad_metrics}, "predictions_cut": root / "predictions_cut"}


EVALUATE = ["evaluate", "--task", "SST-2", "--max_examples", "4", "--model"]
PREDICT = ["predict", "--input", "{tmp}/input.csv", "--model"]


def export(model: str) -> list[str]:
    return ["export", "--model", model, "--output_dir", "{tmp}/out/copy"]


# (id, command line, what the error line must contain)
CASES: list[tuple[str, list[str], str]] = [
    # -- 1. every output path of every command: never a run folder, nor in one of a run's own files or folders
    ("evaluate-output-dir-is-the-run", [*EVALUATE, "{run}/best", "--output_dir", "{run}"],
     "--output_dir {run}: is the run folder, whose files only `hire train` writes"),
    ("evaluate-output-dir-holds-the-users-files", [*EVALUATE, "{run}/best", "--output_dir", "{tmp}"],
     "--output_dir {tmp}: holds files that `hire evaluate` did not write"),
    ("evaluate-output-dir-is-best", [*EVALUATE, "{run}/best", "--output_dir", "{run}/best"],
     "--output_dir {run}/best: belongs to the run in {run}"),
    ("evaluate-output-dir-in-predictions", [*EVALUATE, "{run}/best", "--output_dir", "{run}/predictions/again"],
     "--output_dir {run}/predictions/again: belongs to the run in {run}"),
    ("predict-output-is-run-metrics", [*PREDICT, "{run}/best", "--output", "{run}/metrics.json"],
     "--output {run}/metrics.json: belongs to the run in {run}"),
    ("predict-default-output-in-run", ["predict", "--model", "{run}/best", "--input", "{run}/predictions/dev.jsonl"],
     "--output (the default) {run}/predictions/dev.predictions.jsonl: belongs to the run in {run}"),
    ("export-into-best", ["export", "--model", "{single}", "--output_dir", "{run}/best/copy"],
     "--output_dir {run}/best/copy: belongs to the run in {run}"),
    ("export-into-tensorboard", ["export", "--model", "{single}", "--output_dir", "{run}/tensorboard/copy"],
     "--output_dir {run}/tensorboard/copy: belongs to the run in {run}"),
    # -- 2. nor over a command's own input: report's are the runs' metrics.json, predict's the model's files
    ("report-markdown-is-run-metrics", ["report", "{run}", "--markdown", "{run}/metrics.json"],
     "--markdown {run}/metrics.json: the same file as the metrics.json of {run}, which it would replace"),
    ("report-markdown-is-unmarked-run-metrics", ["report", "{legacy}", "--markdown", "{legacy}/metrics.json"],
     "--markdown {legacy}/metrics.json: the same file as the metrics.json of {legacy}"),
    ("report-markdown-in-best", ["report", "{run}", "--markdown", "{run}/best/README.md"],
     "--markdown {run}/best/README.md: belongs to the run in {run}"),
    ("predict-output-is-model-config", [*PREDICT, "{single}", "--output", "{single}/config.json"],
     "--output {single}/config.json: a file of --model {single}, which it would replace"),
    ("predict-output-is-model-weights", [*PREDICT, "{single}", "--output", "{single}/model.safetensors"],
     "--output {single}/model.safetensors: a file of --model {single}"),
    # -- 3. a run's metrics.json that is not what training writes: one line naming it and what is wrong
    ("report-metrics-list", ["report", "{metrics_list}"],
     "{metrics_list}/metrics.json: a list, not the JSON object of final scores that hire train writes"),
    ("report-metrics-cut-short", ["report", "{metrics_cut}"],
     "{metrics_cut}/metrics.json: not valid JSON (cut short?)"),
    ("report-metrics-missing-keys", ["report", "{metrics_missing}"],
     "{metrics_missing}/metrics.json: not the metrics.json that hire train writes (no head, score, steps"),
    ("report-metrics-of-evaluate", ["report", "{run}", "{metrics_of_evaluate}"],
     "{metrics_of_evaluate}/metrics.json: not the metrics.json that hire train writes (no head"),
    ("report-metrics-wrong-type", ["report", "{metrics_wrong_type}"],
     "{metrics_wrong_type}/metrics.json: dev must be a JSON object of dev splits, each of metric -> number"),
    ("export-card-metrics-cut-short", export("{metrics_cut}/best"), "{metrics_cut}/metrics.json: not valid JSON"),
    ("export-card-predictions-cut-short", export("{predictions_cut}/best"),
     "{predictions_cut}/predictions/dev.jsonl, line 2: not valid JSON"),
    # -- 4. a model folder without a tokenizer: refused by every command, export included
    ("export-model-without-tokenizer", export("{no_tokenizer}"),
     "--model {no_tokenizer}: no tokenizer files in this folder (no tokenizer_config.json)"),
    ("evaluate-model-without-tokenizer", [*EVALUATE, "{no_tokenizer}"], "--model {no_tokenizer}: no tokenizer files"),
    # -- 6. weights cut short or not a safetensors file, found from the header before anything loads
    ("predict-weights-cut-short", [*PREDICT, "{weights_cut}"],
     "--model {weights_cut}: {weights_cut}/model.safetensors is truncated or not a safetensors file"),
    ("evaluate-weights-cut-short", [*EVALUATE, "{weights_cut}"],
     "{weights_cut}/model.safetensors is truncated or not a safetensors file"),
    ("export-weights-cut-short", export("{weights_cut}"),
     "{weights_cut}/model.safetensors is truncated or not a safetensors file"),
    ("predict-weights-empty", [*PREDICT, "{weights_empty}"],
     "{weights_empty}/model.safetensors is truncated or not a safetensors file (0 bytes"),
    ("export-weights-text", export("{weights_text}"),
     "{weights_text}/model.safetensors is truncated or not a safetensors file"),
    # -- 7. missing GLUE data names the option of the command at hand
    ("evaluate-glue-data-missing", [*EVALUATE, "{run}/best", "--data_dir", "{tmp}/folder"],
     "set the data dir with --data_dir or HIRE_GLUE_DIR"),
    # -- 8. weights that are not the model's, and config.json fields of the wrong type
    ("predict-weights-foreign", ["predict", "--input", "{root}/data01/dev.csv", "--model", "{weights_foreign}"],
     "--model {weights_foreign}: the weights lack encoder.model.embeddings.word_embeddings.weight and"),
    ("export-weights-misshapen", export("{weights_misshapen}"),
     "--model {weights_misshapen}: the weights hold output.out.weight in the shape [3, 32], the model of its "
     "config.json needs [2, 32]"),
    ("predict-config-head-number", [*PREDICT, "{config_head}"],
     "{config_head}/config.json: head must be a string (the head's name), not 5"),
    ("evaluate-config-encoder-string", [*EVALUATE, "{config_encoder}"],
     "{config_encoder}/config.json: encoder_config must be a JSON object"),
    ("evaluate-config-label-names-string", [*EVALUATE, "{config_label_names}"],
     "{config_label_names}/config.json: label_names must be null or a list of at least 2 class names"),
    ("predict-config-text-columns-numbers", [*PREDICT, "{config_text_columns}"],
     "{config_text_columns}/config.json: text_columns must be null or a list of 1 or 2 column names"),
    ("predict-config-labels-disagree", [*PREDICT, "{config_labels_disagree}"],
     "{config_labels_disagree}/config.json: the labels disagree: 3 in label_names, 2 in id2label"),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_commands_fail_with_one_clear_line(args: list[str], message: str, world: dict[str, Path],
                                           tmp_path: Path, via: str) -> None:
    check_fails_cleanly(args, message, world, tmp_path, via)


@pytest.mark.skipif(not (default_glue_dir() / "SST-2").is_dir(), reason="no GLUE SST-2 data")
def test_evaluate_writes_beside_a_runs_best_by_default(world: dict[str, Path], tmp_path: Path) -> None:
    """MODEL/eval-TASK would lie in the run's best/: for a run's best/ the default is RUN/eval-TASK, and the run's
    own files stay as they were (``hire report`` still reads it)."""
    run = _copy_run(world["run"], tmp_path / "run")
    before = snapshot(run)
    result = hire_process(*EVALUATE, "run/best", "--mixed_precision", "no", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((run / "eval-SST-2" / "metrics.json").read_text())["task"] == "SST-2"
    after = {path: state for path, state in snapshot(run).items() if not path.startswith(str(run / "eval-SST-2"))}
    assert after == before
    assert hire_process("report", "run", cwd=tmp_path).returncode == 0


def _fail_with_full_disk(named: bool) -> object:
    """``export_code`` as on a disk that fills up: one module written, then ENOSPC (at the write: no file name;
    at the open: the file's)."""
    def export_code(directory: str | Path) -> list[Path]:
        (Path(directory) / "modeling_hire.py").write_text("# half a module")
        name = str(Path(directory) / "heads.py") if named else None
        raise OSError(errno.ENOSPC, "No space left on device", name)

    return export_code


@pytest.mark.parametrize("named", [False, True], ids=["at-the-write", "at-the-open"])
def test_export_on_a_full_disk_leaves_nothing(named: bool, world: dict[str, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The copy is written beside --output_dir under a temporary name, renamed into place once whole: a full
    disk is one line naming where the copy goes, and leaves no partial folder (nor the folders made for it), so
    that the same command run again succeeds."""
    from hire import cli
    from hire.model import sequence as model  # where HireModel.save_pretrained finds export_code

    out = tmp_path / "new" / "copy"
    monkeypatch.delenv("HIRE_DEBUG", raising=False)
    monkeypatch.setattr(model, "export_code", _fail_with_full_disk(named))
    assert cli.main(["export", "--model", str(world["single"]), "--output_dir", str(out)]) == 2
    where = f"{out}/heads.py" if named else str(out)
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"hire export: error: {where}: no space left on the device; free some space and run the same command again")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert cli.main(["export", "--model", str(world["single"]), "--output_dir", str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "modeling_hire.py"} <= {
        p.name for p in out.iterdir()}
    assert sorted(p.name for p in out.parent.iterdir()) == ["copy"]


def test_export_whose_weights_cannot_be_written_leaves_nothing(world: dict[str, Path], tmp_path: Path) -> None:
    """A real failed write: a file size limit that config.json fits in and the weights do not (safetensors reports
    it as its own error, without a file name)."""
    result = hire_process("export", "--model", str(world["single"]), "--output_dir", "copy", cwd=tmp_path,
                          kill="fsize:6000")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "hire export: error: copy/model.safetensors: File too large"
    assert list(tmp_path.iterdir()) == []


def test_missing_glue_data_names_the_callers_option(tmp_path: Path) -> None:
    """The GLUE reader names the data-dir option of the command that reads: given, or set for a block (as ``hire
    evaluate`` does around the task loader); the run configuration's ``--data.data_dir`` otherwise."""
    from hire.data.examples import DataError
    from hire.data.glue import data_dir_option, read_glue_split

    with pytest.raises(DataError, match=r"set the data dir with --data\.data_dir or HIRE_GLUE_DIR"):
        read_glue_split("RTE", "dev", tmp_path)
    with pytest.raises(DataError, match="set the data dir with --data_dir or HIRE_GLUE_DIR"):
        read_glue_split("RTE", "dev", tmp_path, option="--data_dir")
    with data_dir_option("--glue"), pytest.raises(DataError, match="set the data dir with --glue or"):
        read_glue_split("RTE", "dev", tmp_path)
    with pytest.raises(DataError, match=r"with --data\.data_dir or"):  # the block's option ends with the block
        read_glue_split("RTE", "dev", tmp_path)
