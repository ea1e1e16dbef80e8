"""BERT's two other task families on the shared data, end to end through the real command on a tiny random encoder:
SQuAD v1.1 and v2.0, CODAH and DREAM are trained (a few steps), scored, saved, reloaded by ``hire evaluate`` and
``hire predict``, and every question of each dev file is in the predictions file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paths import SHARED_DATA
from tiny import save_tiny_encoder

from hire.cli import main

pytestmark = pytest.mark.slow

DATA = SHARED_DATA
DEV = {"squad": DATA / "squad" / "dev-v1.1.json", "squad_v2": DATA / "squad" / "dev-v2.0.json",
       "codah": DATA / "codah" / "cv_split" / "fold_0" / "dev.tsv", "dream": DATA / "dream" / "dev.json"}


def dev_ids(task: str) -> list[str]:
    """The question ids of a dev file, as its reader names them."""
    if task.startswith("squad"):
        data = json.loads(DEV[task].read_text())["data"]
        return [q["id"] for a in data for p in a["paragraphs"] for q in p["qas"]]
    if task == "codah":
        return [str(n) for n, line in enumerate(DEV[task].read_text().splitlines(), 1) if line.strip()]
    return [f"{d[2]}-{q}" for d in json.loads(DEV[task].read_text()) for q in range(len(d[1]))]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    words = ["the", "of", "and", "to", "in", "a", "is", "was", "what", "who", "when", "where", "which", "how"]
    return save_tiny_encoder(tmp_path_factory.mktemp("named") / "encoder", words)


@pytest.mark.parametrize("task", list(DEV))
def test_a_named_task_trains_and_every_dev_question_is_predicted(task, encoder, tmp_path, capsys):
    if not DEV[task].is_file():
        pytest.skip(f"the shared {task} data is missing ({DEV[task]})")
    run = tmp_path / "run"
    assert main(["train", "--output_dir", str(run), "--data.task", task, "--data.max_train_examples", "32",
                 "--data.max_length", "128", "--model.encoder", str(encoder), "--model.head", "hire",
                 "--train.batch_size", "8", "--train.max_steps", "2", "--train.mixed_precision", "no"]) == 0
    rows = [json.loads(line) for line in (run / "predictions" / "dev.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == dev_ids(task)  # questions in = questions scored, in the file's order
    capsys.readouterr()
    out = tmp_path / "eval"
    assert main(["evaluate", "--model", str(run / "best"), "--task", task, "--output_dir", str(out),
                 "--max_examples", "40"]) == 0
    scored = json.loads((out / "metrics.json").read_text())["dev"]
    assert scored["questions"] == 40 and 0 <= scored["score"] <= 1
