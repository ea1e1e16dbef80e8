"""Ranking scores are full precision under every mixed-precision setting (issue 73): no two candidates of a question
tie unless their inputs are identical, and identical inputs score the same wherever they are batched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import bert_config

from hire import build_model
from hire.tasks.ranking.tasktype import same_input_same_score
from hire.tasktype import Predictions


@pytest.mark.parametrize("head", ["last-layer", "hire"])
def test_a_ranker_under_bf16_autocast_gives_every_distinct_candidate_its_own_score(head: str) -> None:
    torch.manual_seed(0)
    model = build_model(bert_config(), head, num_labels=1, task_type="ranking").eval()
    ids = torch.randint(5, 99, (300, 12))  # 300 distinct candidates of one question
    ids[:, 0] = 2
    assert len({tuple(r) for r in ids.tolist()}) == 300
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        scores = model(ids, torch.ones_like(ids)).logits
    assert scores.dtype == torch.float32
    # Rounded to bf16 (8 bits of mantissa), 300 scores in a narrow band share a few dozen values; in float32 none tie.
    assert len(set(scores.tolist())) == 300
    assert len(set(scores.to(torch.bfloat16).tolist())) < 300  # the test can fail: bf16 would tie them


def test_identical_inputs_get_identical_scores_and_weights() -> None:
    features = [{"input_ids": [2, 5, 3]}, {"input_ids": [2, 6, 3]}, {"input_ids": [2, 5, 3]},
                {"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 1]}]
    preds = Predictions(np.array([0.5, 0.2, 0.50000006, 0.7], dtype=np.float32),
                        np.array([[1.0, 0.0], [0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]), 1.0)
    out = same_input_same_score(preds, features)
    assert out.logits.tolist() == preds.logits[[0, 1, 0, 3]].tolist()
    assert out.logits[0] == out.logits[2] and out.logits[3] != out.logits[0]
    assert out.layer_weights[2].tolist() == [1.0, 0.0]
    assert preds.logits[2] != preds.logits[0]  # the input is left as it was
