"""``hire experiment`` with a token task: a tagger grid on custom CoNLL files (a tiny random encoder) runs through
the plain loop, its records carry strict entity F1 over every dev word, and the tables name that metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny import save_tiny_encoder
from worlds import WORDS, sentences, write_conll

from hire.experiments.experiment import load_experiment
from hire.experiments.loop import run_experiment
from hire.experiments.publish import write_experiment_report
from hire.experiments.records import load_records
from hire.tasktype import named_task

GRID = """\
name: tagger-grid
base:
  options:
    data.task: custom
    data.format: conll
    data.train_file: {train}
    data.dev_file: {dev}
    data.max_length: 24
    model.encoder: {encoder}
    train.batch_size: 8
    train.max_steps: 4
    train.lr: 3.0e-3
    train.mixed_precision: "no"
seeds: [1]
grid:
  model.head: [last-layer, hire]
baseline: {{model.head: last-layer}}
tables:
  main: {{title: Tagger table}}
figure2: null
"""


@pytest.mark.slow  # a grid of tagger runs; a tagger's run and entity F1 alone: test_token_tasks
def test_a_tagger_grid_runs_and_reports_entity_f1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    train = write_conll(tmp_path / "train.conll", sentences(24, 0))
    dev = write_conll(tmp_path / "dev.conll", sentences(8, 1, long_every=4))
    encoder = save_tiny_encoder(tmp_path / "encoder", [w for ws in WORDS.values() for w in ws])
    path = tmp_path / "grid.yaml"
    path.write_text(GRID.format(train=train, dev=dev, encoder=encoder))
    exp = load_experiment(path)
    assert [c.id for c in exp.cells] == ["custom__last-layer__seed1", "custom__hire__seed1"]
    results = tmp_path / "experiments" / "tagger-grid"
    assert run_experiment(exp, tmp_path / "runs", results, say=lambda _: None) == 0
    records = load_records(exp, results).by_cell
    assert set(records) == {"custom__last-layer__seed1", "custom__hire__seed1"}
    dev_words = sum(len(s) for s in sentences(8, 1, long_every=4))
    for record in records.values():
        scores = next(iter(record["dev"].values()))
        assert scores["score"] == scores["f1"] and 0.0 <= scores["f1"] <= 1.0
        assert scores["words"] == dev_words  # every dev word scored, the 60-word sentences' windows included
    write_experiment_report(exp, results)
    table = (results / "tables" / "main.md").read_text()
    assert "Tagger table" in table and "custom" in table
    summary = json.loads((results / "summary.json").read_text())
    assert summary


def test_named_tasks_cover_every_type() -> None:
    assert named_task("sts_b") == ("STS-B", ("pearson", "spearman"))
    assert named_task("CoNLL-2003") == ("conll2003", ("f1",))  # the metrics whose mean is the score
    assert named_task("wikiqa") == ("wikiqa", ("map",))
    assert named_task("CoNLL-2003-pos")[1] == ("accuracy",)
    with pytest.raises(ValueError, match=r"unknown task 'conll2004'; the tasks read by name: CoLA, .*conll2003"):
        named_task("conll2004")
