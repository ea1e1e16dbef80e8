"""Tests for entity_scores and token_accuracy (hire.metrics): strict IOB2 entity scores, counted by hand."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import pytest
from seqeval.metrics import f1_score

from hire.metrics import entity_scores, token_accuracy

GOLD = [["B-PER", "I-PER", "O", "B-LOC", "O"],
        ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"],
        ["O", "O"]]
PRED = [["B-PER", "I-PER", "O", "B-ORG", "O"],   # PER right; ORG where LOC is
        ["B-ORG", "I-ORG", "O", "O", "B-PER"],   # ORG one word short (wrong end), PER right
        ["B-MISC", "O"]]                          # a MISC that is not there


def test_hand_counted_against_conllevals_definition() -> None:
    # conlleval: a chunk is right only with the gold's type and both boundaries. Gold chunks: PER, LOC, ORG, PER
    # (4); predicted: PER, ORG, ORG, PER, MISC (5); right: the two PER. Precision 2/5, recall 2/4.
    scores = entity_scores(GOLD, PRED)
    precision, recall = 2 / 5, 2 / 4
    assert scores == pytest.approx({
        "precision": precision, "recall": recall, "f1": 2 * precision * recall / (precision + recall),
        "precision_PER": 1.0, "recall_PER": 1.0, "f1_PER": 1.0,
        "precision_LOC": 0.0, "recall_LOC": 0.0, "f1_LOC": 0.0,    # never predicted: 0.0, not nan
        "precision_ORG": 0.0, "recall_ORG": 0.0, "f1_ORG": 0.0,
        "precision_MISC": 0.0, "recall_MISC": 0.0, "f1_MISC": 0.0,  # not in the gold
        "token_accuracy": 9 / 12,
    })
    assert all(type(value) is float for value in scores.values())


def test_strict_differs_from_lenient_on_an_i_that_begins_a_chunk() -> None:
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    pred = [["I-PER", "I-PER", "O", "B-LOC"]]
    # Lenient scoring (seqeval's default, conlleval) reads I-PER I-PER as a PER: both entities right.
    assert f1_score(gold, pred) == 1.0
    scores = entity_scores(gold, pred)
    # Strict IOB2: an I- cannot begin an entity, so only LOC is predicted (and right).
    assert (scores["precision"], scores["recall"]) == (1.0, 0.5)
    assert (scores["f1_PER"], scores["recall_PER"], scores["f1_LOC"]) == (0.0, 0.0, 1.0)
    # An I- of another type after B- also ends the entity in strict mode: B-PER I-LOC is a one-word PER.
    assert entity_scores([["B-PER", "I-PER"]], [["B-PER", "I-LOC"]])["f1"] == 0.0


def test_undefined_scores_are_zero_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        none_predicted = entity_scores([["B-PER", "O"]], [["O", "O"]])
        assert none_predicted == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "precision_PER": 0.0,
                                  "recall_PER": 0.0, "f1_PER": 0.0, "token_accuracy": 0.5}
        no_entities = entity_scores([["O", "O"]], [["O", "O"]])
        assert no_entities == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "token_accuracy": 1.0}
    assert not any(math.isnan(value) for value in none_predicted.values())


def test_token_accuracy_and_bad_input() -> None:
    assert token_accuracy([["NN", "VB"], ["DT"]], [["NN", "NN"], ["DT"]]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="sentence 1 has 1 gold tags but 2 predicted"):
        token_accuracy([["O"], ["O"]], [["O"], ["O", "O"]])
    with pytest.raises(ValueError, match="2 sentences but the predictions have 1"):
        entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="'S-PER' is not an IOB2 tag"):
        entity_scores([["O"]], [["S-PER"]])
    with pytest.raises(ValueError, match="zero sentences"):
        entity_scores([], [])


def test_seqeval_is_imported_only_when_scoring() -> None:
    code = ("import sys, hire.metrics as m; assert 'seqeval' not in sys.modules; "
            "m.entity_scores([['B-X']], [['B-X']]); assert 'seqeval' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
