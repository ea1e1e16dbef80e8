"""End to end: the real ``hire`` command on a tiny random encoder and real GLUE rows, in a temp folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from badinput import given_once, hire_process, hire_script, process_env
from safetensors.torch import load_file
from sklearn.metrics import accuracy_score, f1_score
from tiny import HIDE_HIRE, save_tiny_encoder

from hire.data import default_glue_dir, read_glue_split
from hire.data.glue import task_text_columns

GLUE = default_glue_dir()
pytestmark = pytest.mark.skipif(not (GLUE / "MRPC").is_dir(), reason=f"no GLUE data at {GLUE}")
N_TRAIN, N_EVAL = 48, 24


def hire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``hire ARGS`` as a real process (forked from a driver that has imported torch: :func:`badinput.hire_process`)."""
    return hire_process(*args, env=env)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [t for split in ("train", "dev", "test") for e in read_glue_split("MRPC", split)[:N_TRAIN]
             for t in (e.text_a, e.text_b or "")]
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder", texts)


def train_args(encoder: Path, out: Path, *extra: str) -> list[str]:
    return given_once(["train", "--output_dir", str(out), "--data.task", "MRPC", "--model.encoder", str(encoder),
                       "--data.max_train_examples", str(N_TRAIN), "--data.max_eval_examples", str(N_EVAL),
                       "--train.batch_size", "8", "--train.max_steps", "6", "--train.eval_every", "3",
                       "--train.checkpoint_every", "2", "--train.lr", "1e-3", "--train.mixed_precision", "no", *extra])


@pytest.fixture(scope="module")
def finished_run(encoder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "mrpc"
    # A fresh process through the installed console script, the entry point users run (the others are forked).
    result = subprocess.run([*hire_script(), *train_args(encoder, out)], capture_output=True, text=True,
                            env=process_env(), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_train_writes_every_output(finished_run: Path, encoder: Path) -> None:
    out = finished_run
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["data"]["task"] == "MRPC" and config["model"]["head"] == "hire" and config["train"]["max_steps"] == 6
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [3, 6]
    assert set(evals[0]["dev"]["dev"]) == {"accuracy", "f1", "score"}
    final = json.loads((out / "metrics.json").read_text())
    assert final["best_step"] in (3, 6) and final["steps"] == 6
    assert final["score"] == max(e["selection_score"] for e in evals)
    # Dev predictions: one row per example, layer weights a distribution over l + 1 = 3 states.
    rows = [json.loads(line) for line in (out / "predictions" / "dev.jsonl").read_text().splitlines()]
    assert len(rows) == N_EVAL
    assert all(len(r["layer_weights"]) == 3 and abs(sum(r["layer_weights"]) - 1) < 1e-4 for r in rows)
    gold = [int(r["label"]) for r in rows]
    pred = [int(r["prediction"]) for r in rows]
    dev = final["dev"]["dev"]
    assert dev["accuracy"] == pytest.approx(accuracy_score(gold, pred))
    assert dev["f1"] == pytest.approx(f1_score(gold, pred))
    # Test predictions in the GLUE submission format, zipped.
    lines = (out / "submission" / "MRPC.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == N_EVAL + 1
    test_ids = [e.guid for e in read_glue_split("MRPC", "test")[:N_EVAL]]
    assert [ln.split("\t")[0] for ln in lines[1:]] == test_ids
    assert {ln.split("\t")[1] for ln in lines[1:]} <= {"0", "1"}
    assert zipfile.ZipFile(out / "submission" / "glue_submission.zip").namelist() == ["MRPC.tsv"]
    assert list((out / "tensorboard").rglob("events.out.tfevents*"))
    assert (out / "best" / "model.safetensors").is_file() and not (out / "checkpoint").exists()
    # The best model's card: its dev scores (those of metrics.json), mean layer weights and the recipe.
    card = (out / "best" / "README.md").read_text()
    assert "fine-tuned on MRPC" in card and f"| dev | accuracy | {dev['accuracy']:.4f} |" in card
    assert "Mean layer weights" in card and '"max_steps": 6' in card


@pytest.mark.slow  # CI's slow run; fast: test_transformers.py's exported-code test
def test_transformers_and_an_exported_copy_predict_as_hire_predict(finished_run: Path, tmp_path: Path) -> None:
    """``pipeline("text-classification")`` on the run's best/ (hire installed) and on a copy made by ``hire
    export`` (in a Python that cannot import hire) give the probabilities ``hire predict`` writes."""
    first, second = task_text_columns("MRPC")  # the columns the model was trained on, as the TSV names them
    pairs = [{first: e.text_a, second: e.text_b} for e in read_glue_split("MRPC", "dev")[:6]]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    best = finished_run / "best"
    predicted = hire("predict", "--model", str(best), "--input", str(tmp_path / "pairs.jsonl"),
                     "--output", str(tmp_path / "p.jsonl"), "--mixed_precision", "no")
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    expected = [json.loads(line)["probabilities"] for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    exported = hire("export", "--model", str(best), "--output_dir", str(tmp_path / "shared"))
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "fine-tuned on MRPC" in (tmp_path / "shared" / "README.md").read_text()  # the run's card, kept
    inputs = [{"text": p[first], "text_pair": p[second]} for p in pairs]
    code = """
import json, sys
from transformers import pipeline
classify = pipeline("text-classification", model=sys.argv[1], trust_remote_code=True)
print(json.dumps([{r["label"]: r["score"] for r in row} for row in classify(json.loads(sys.argv[2]), top_k=None)]))
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    for folder, prelude in ((best, "import hire\n"), (tmp_path / "shared", HIDE_HIRE)):
        result = subprocess.run([sys.executable, "-c", prelude + code, str(folder), json.dumps(inputs)],
                                capture_output=True, text=True, env=env, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        scores = json.loads(result.stdout.strip().splitlines()[-1])
        for got, want in zip(scores, expected, strict=True):
            assert got == pytest.approx(want, abs=1e-5), folder


def test_saved_model_reevaluates_to_the_same_score(finished_run: Path, tmp_path: Path) -> None:
    result = hire("evaluate", "--model", str(finished_run / "best"), "--task", "MRPC",
                  "--max_examples", str(N_EVAL), "--output_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    again = json.loads((tmp_path / "metrics.json").read_text())["dev"]
    final = json.loads((finished_run / "metrics.json").read_text())["dev"]["dev"]
    assert again == pytest.approx(final)


def test_finished_or_foreign_runs_are_never_overwritten(finished_run: Path, encoder: Path, tmp_path: Path) -> None:
    before = (finished_run / "metrics.json").read_text()
    again = hire(*train_args(encoder, finished_run))
    assert again.returncode == 2 and "finished run" in again.stderr
    changed = hire(*train_args(encoder, finished_run, "--train.lr", "2e-3"))
    assert changed.returncode == 2 and "train.lr" in changed.stderr
    assert (finished_run / "metrics.json").read_text() == before
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    refused = hire(*train_args(encoder, foreign))
    assert refused.returncode == 2 and "not empty" in refused.stderr
    assert (foreign / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--train.lr", "fast"], "--train.lr: expected a number"),
        (["--model.head", "hyre"], "unknown head 'hyre'"),
        (["--model.head_options", "fusion_layers=9"], "fusion_layers: must be in [0, 3]"),
        (["--data.task", "GLUEY"], "GLUEY"),
        (["--train.mixed_precision", "fp8"], "--train.mixed_precision: expected one of auto, no, bf16, fp16"),
    ],
)
def test_bad_options_fail_with_one_clear_line(encoder: Path, tmp_path: Path, extra: list[str], message: str) -> None:
    result = hire(*train_args(encoder, tmp_path / "run", *extra))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()  # nothing written for a run that never started


@pytest.mark.slow  # two processes; custom files read: test_data, trained and resumed: test_run_folders
def test_custom_files_train_and_predict(encoder: Path, tmp_path: Path) -> None:
    rows = read_glue_split("MRPC", "train")[:40]
    header = "id,first,second,similarity\n"
    lines = [f'{i},"{e.text_a.replace(chr(34), "")}","{(e.text_b or "").replace(chr(34), "")}",{i % 5}.5\n'
             for i, e in enumerate(rows)]
    body = "".join(lines)
    (tmp_path / "train.csv").write_text(header + body)
    (tmp_path / "dev.csv").write_text(header + "".join(lines[:20]))
    out = tmp_path / "run"
    result = hire("train", "--output_dir", str(out), "--data.task", "custom", "--data.train_file",
                  str(tmp_path / "train.csv"), "--data.dev_file", str(tmp_path / "dev.csv"),
                  "--data.text_columns", "first,second", "--data.label_column", "similarity",
                  "--data.regression", "true", "--model.encoder", str(encoder), "--model.head", "scalar-mix",
                  "--train.max_steps", "3", "--train.batch_size", "8", "--train.mixed_precision", "no")
    assert result.returncode == 0, result.stderr[-3000:]
    dev = json.loads((out / "metrics.json").read_text())["dev"]["dev"]
    assert set(dev) == {"pearson", "spearman", "score"}
    predicted = hire("predict", "--model", str(out / "best"), "--input", str(tmp_path / "dev.csv"),
                     "--text_columns", "first,second", "--output", str(tmp_path / "p.jsonl"))
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    assert "examples/s" in predicted.stdout
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 20
    # A malformed file: one clear error naming the file and line, before any training.
    (tmp_path / "bad.csv").write_text(header + "".join(lines[:5]) + "7,only three,fields\n")
    bad = hire("train", "--output_dir", str(tmp_path / "bad"), "--data.task", "custom", "--data.train_file",
               str(tmp_path / "bad.csv"), "--data.dev_file", str(tmp_path / "dev.csv"),
               "--data.text_columns", "first,second", "--data.label_column", "similarity",
               "--data.regression", "true", "--model.encoder", str(encoder))
    assert bad.returncode == 2 and "bad.csv" in bad.stderr and "line" in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_fine_tune_from_an_earlier_model_with_another_label_set(finished_run: Path, tmp_path: Path) -> None:
    """RTE from the MRPC model (labels 0/1 -> entailment/not_entailment): a new output projection."""
    out = tmp_path / "rte"
    result = hire("train", "--output_dir", str(out), "--data.task", "RTE", "--model.init_from",
                  str(finished_run / "best"), "--data.max_train_examples", "16", "--data.max_eval_examples", "8",
                  "--train.batch_size", "8", "--train.max_steps", "1", "--train.lr", "0",
                  "--train.mixed_precision", "no")
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((out / "best" / "config.json").read_text())
    assert config["label_names"] == ["entailment", "not_entailment"] and config["head"] == "hire"
    before = load_file(finished_run / "best" / "model.safetensors")
    after = load_file(out / "best" / "model.safetensors")
    # With a learning rate of 0, everything but the new output projection is the MRPC model's.
    assert all(np.array_equal(before[k].numpy(), after[k].numpy()) for k in before if not k.startswith("output.out"))
    assert not np.array_equal(before["output.out.weight"].numpy(), after["output.out.weight"].numpy())


def test_feature_based_training_leaves_the_encoder_as_it_was(encoder: Path, tmp_path: Path) -> None:
    """``--model.freeze_encoder true``: the run's best model holds the source encoder's weights unchanged and
    says it was frozen (config.yaml and the saved config); test_model checks that the head does learn."""
    out = tmp_path / "frozen"
    result = hire(*train_args(encoder, out, "--model.head", "scalar-mix", "--model.freeze_encoder", "true"))
    assert result.returncode == 0, result.stderr[-3000:]
    source, best = load_file(encoder / "model.safetensors"), load_file(out / "best" / "model.safetensors")
    encoder_weights = {k.removeprefix("encoder.model."): v for k, v in best.items() if k.startswith("encoder.model.")}
    assert encoder_weights and all(np.array_equal(v.numpy(), source[k].numpy()) for k, v in encoder_weights.items()
                                   if k in source)
    assert len([k for k in encoder_weights if k in source]) >= len(encoder_weights) - 2  # pooler aside
    assert yaml.safe_load((out / "config.yaml").read_text())["model"]["freeze_encoder"] is True
    assert json.loads((out / "best" / "config.json").read_text())["freeze_encoder"] is True


def test_reevaluation_runs_in_the_runs_precision(encoder: Path, tmp_path: Path) -> None:
    """A run trained in bf16 at --data.max_length 40 is re-evaluated in bf16 at 40 tokens by default (its dev
    scores repeat at the run's batch size, and metrics.json says the precision it ran in); on a CPU without bf16
    units, in fp32 with a warning."""
    from hire.hardware import cpu_has_fast_bf16

    run = tmp_path / "bf16"
    trained = hire(*train_args(encoder, run, "--train.mixed_precision", "bf16", "--train.max_steps", "3",
                               "--data.max_length", "40"))
    assert trained.returncode == 0, trained.stderr[-3000:]
    recorded = json.loads((run / "metrics.json").read_text())
    assert recorded["mixed_precision"] == "bf16"
    evaluate = ["evaluate", "--model", str(run / "best"), "--task", "MRPC", "--max_examples", str(N_EVAL),
                "--batch_size", "8"]
    result = hire(*evaluate, "--output_dir", str(tmp_path / "again"))
    assert result.returncode == 0, result.stderr[-3000:]
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    if cpu_has_fast_bf16():
        assert again["mixed_precision"] == "bf16" and again["dev"] == recorded["dev"]["dev"]
        probabilities = [json.loads(line)["probabilities"] for line in (run / "predictions" / "dev.jsonl").open()]
        assert [json.loads(line)["probabilities"] for line in (tmp_path / "again" / "dev.jsonl").open()] == \
            probabilities  # every prediction repeats, not only the scores
        longer = hire(*evaluate, "--output_dir", str(tmp_path / "longer"), "--max_length", "128")
        assert longer.returncode == 0, longer.stderr[-3000:]  # most MRPC pairs are longer than 40 tokens
        assert [json.loads(line)["probabilities"] for line in (tmp_path / "longer" / "dev.jsonl").open()] != \
            probabilities
    else:
        assert again["mixed_precision"] == "no" and "predicting in fp32" in result.stderr
    fp32 = hire(*evaluate, "--output_dir", str(tmp_path / "fp32"), "--mixed_precision", "no")
    assert fp32.returncode == 0, fp32.stderr[-3000:]
    assert json.loads((tmp_path / "fp32" / "metrics.json").read_text())["mixed_precision"] == "no"
