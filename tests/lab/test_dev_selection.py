"""Every "best" of the layer probes is chosen on dev and scored on test (issue 73): the tables, the sentence under
them, the "Which layer?" table and probe-tokens' summary, on hand-made results where dev and test disagree."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from hire.probing import tables
from hire.probing.tokens import summarise

POOLINGS = ("cls", "sep", "mean", "max")


def _row(row: str, pooling: str, dev: float, test: float) -> dict[str, Any]:
    splits = {"dev": {"accuracy": dev, "score": dev}, "test": {"accuracy": test, "score": test}}
    return {"row": row, "layers": [int(row)] if row.isdigit() else [0, 1, 2], "pooling": pooling, "dim": 4,
            "splits": splits, "chosen": [{"C": 1.0}], "not_converged": 0}


def results(headline: str = "test") -> dict[str, Any]:
    """One task, one encoder of 3 hidden states: dev prefers (1, cls) at 0.80, test prefers (2, mean) at 0.95
    (where dev gave 0.70); the last layer's dev pooling is max, its test-best pooling mean."""
    scores = {("0", p): (0.50, 0.50) for p in POOLINGS}
    scores.update({("1", p): (0.60, 0.60) for p in POOLINGS})
    scores.update({("2", p): (0.60, 0.60) for p in POOLINGS})
    scores.update({("all (0-2)", p): (0.55, 0.55) for p in POOLINGS})
    scores[("1", "cls")] = (0.80, 0.62)
    scores[("2", "mean")] = (0.70, 0.95)
    scores[("2", "max")] = (0.75, 0.61)
    scores[("all (0-2)", "sep")] = (0.66, 0.57)
    scores[("all (0-2)", "cls")] = (0.65, 0.90)
    rows = [_row(r, p, dev, test) for (r, p), (dev, test) in scores.items()]
    if headline != "test":  # only the headline split is labelled: dev (GLUE) or cross-validation
        for r in rows:
            r["splits"] = {headline: r["splits"]["dev"]}
    task = {"protocol": "cv" if headline == "cv" else "split", "headline": headline,
            "eval_splits": [headline] if headline != "test" else ["dev", "test"], "metrics": ["accuracy"],
            "regression": False, "pair": False, "labels": ["a", "b"], "examples": {"train": 10, "test": 5},
            "results": {"enc": {"rows": rows, "num_hidden_states": 3}}}
    return {"tasks": {"t": task}, "encoders": [{"label": "enc", "encoder": "x", "kind": "pretrained",
                                                "fingerprint": "0" * 64}]}


def test_the_chosen_cell_is_the_dev_best_and_its_test_score_is_reported(tmp_path: Path) -> None:
    res = results()
    text = tables.task_report("t", res["tasks"]["t"], ["enc"], 10, tmp_path)
    assert "Chosen on dev: hidden state 1, cls pooling (dev 80.00): test 62.00." in text
    assert "Oracle (the test maximum, chosen on test; not a result): hidden state 2, mean pooling: 95.00." in text
    assert "**62.00**" in text and "**95.00**" not in text  # the bold cell is the dev choice
    rows = list(csv.DictReader((tmp_path / "t" / "table-enc.csv").open()))
    assert [r["best"] for r in rows if r["best"]] == ["cls"] and rows[1]["hidden state"] == "1"


def test_which_layer_chooses_every_column_on_dev_and_labels_the_oracle(tmp_path: Path) -> None:
    res = results()
    tables.which_layer_section(res, ["enc"], tmp_path)
    (row,) = csv.DictReader((tmp_path / "which_layer.csv").open())
    assert row["chosen on"] == "dev" and row["scored on"] == "test"
    assert row["last layer"] == "61.00 (max)"  # dev picks max for layer 2, not test's mean (95.00)
    assert row["best single state"] == "62.00 (1, cls)"
    assert row["best concatenation"] == "57.00 (all 0-2, sep)"  # not test's cls at 90.00
    assert row["test-best single state (oracle)"] == "95.00 (2, mean)"
    assert [round(100 * s, 2) for s, _ in tables.state_curve(res["tasks"]["t"], res["tasks"]["t"]["results"]["enc"])] \
        == [50.0, 62.0, 61.0]


@pytest.mark.parametrize("headline", ["dev", "cv"])
def test_without_a_held_out_split_the_report_says_the_figure_is_optimistic(headline: str, tmp_path: Path) -> None:
    res = results(headline)
    text = tables.task_report("t", res["tasks"]["t"], ["enc"], 10, tmp_path)
    assert "optimistic figure" in text and "Oracle" not in text
    tables.which_layer_section(res, ["enc"], tmp_path)
    (row,) = csv.DictReader((tmp_path / "which_layer.csv").open())
    assert row["chosen on"] == row["scored on"] == headline and row["test-best single state (oracle)"] == "-"
    assert row["best single state"] == "80.00 (1, cls)"


def _layer(dev: float, test: float, sel_dev: float, sel_test: float) -> dict[str, Any]:
    return {"task": {"dev": {"accuracy": dev}, "test": {"accuracy": test}},
            "selectivity": {"dev": sel_dev, "test": sel_test}}


def test_probe_tokens_chooses_its_best_and_most_selective_layer_on_dev() -> None:
    layers = [_layer(0.5, 0.5, 0.1, 0.1), _layer(0.9, 0.7, 0.3, 0.05), _layer(0.8, 0.95, 0.2, 0.4)]
    s = summarise(layers)
    assert (s["best_layer"], s["best"], s["best_dev"]) == (1, 0.7, 0.9)
    assert (s["oracle_layer"], s["oracle"]) == (2, 0.95)
    assert (s["best_selectivity_layer"], s["best_selectivity"]) == (1, 0.05)
    assert 0 <= s["expected_layer"] <= 2
