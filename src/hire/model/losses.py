"""The losses of a ranker: pointwise and pairwise for a cross-encoder, in-batch negatives for a bi-encoder, and the
scaled cosine that scores a bi-encoder's pairs."""

from __future__ import annotations

import numbers
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

RANK_LOSSES = ("pointwise", "pairwise")  # a cross-encoder's loss (HireConfig.task_options["rank_loss"])


BI_SCALE = 20.0  # a bi-encoder's score: cosine similarity times this (sentence-transformers' MNRL scale)


def check_rank_loss(rank_loss: Any, margin: Any) -> None:
    """A ranker's loss: ``rank_loss`` one of :data:`RANK_LOSSES`, ``margin`` a finite number > 0."""
    if rank_loss not in RANK_LOSSES:
        raise ValueError(f"rank_loss must be one of {', '.join(RANK_LOSSES)}, not {rank_loss!r}")
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 < float(margin) < float("inf"):
        raise ValueError(f"rank_margin must be a finite number > 0, not {margin!r}")


def pointwise_loss(scores: Tensor, labels: Tensor) -> Tensor:
    """Binary cross-entropy of each pair's score (a logit) against relevant (label > 0) or not, mean over pairs."""
    return F.binary_cross_entropy_with_logits(scores, (labels > 0).to(scores.dtype))


def pairwise_hinge_loss(scores: Tensor, labels: Tensor, groups: Tensor, margin: float = 1.0) -> Tensor:
    """The rank hinge loss ``max(0, margin - s_i + s_j)`` over every pair (i, j) of one question (the same
    ``groups`` value) where ``labels[i] > labels[j]`` (a positive and a negative, or a higher grade and a lower),
    mean over those pairs. A batch without such a pair gives 0, still connected to ``scores`` (its gradient is 0).

    ``scores``, ``labels`` and ``groups`` have one value per candidate, shape (B,)."""
    same = groups.unsqueeze(1) == groups.unsqueeze(0)  # (B, B)
    ordered = same & (labels.unsqueeze(1) > labels.unsqueeze(0))  # (i, j): i should rank above j
    hinge = torch.clamp(margin - scores.unsqueeze(1) + scores.unsqueeze(0), min=0)
    pairs = ordered.sum()
    if int(pairs) == 0:
        return scores.sum() * 0.0
    return (hinge * ordered).sum() / pairs


def scaled_cosine(queries: Tensor, passages: Tensor, scale: float = BI_SCALE, matrix: bool = False) -> Tensor:
    """``scale * cos(q, p)`` in float32: row by row for ``queries`` and ``passages`` (N, d) -> (N,), or every
    query against every passage (``matrix``: (Q, d), (P, d) -> (Q, P)). Never autocast to a lower precision."""
    with torch.autocast(device_type=queries.device.type, enabled=False):
        q = F.normalize(queries.float(), dim=-1)
        p = F.normalize(passages.float(), dim=-1)
        return scale * (q @ p.T if matrix else (q * p).sum(-1))


def in_batch_negatives_loss(similarity: Tensor, query_index: Tensor, passage_index: Tensor, labels: Tensor,
                            groups: Tensor) -> Tensor:
    """In-batch negatives: each relevant candidate (``labels > 0``) of a question is the target of a softmax over
    every passage of the batch, cross-entropy, mean over the relevant candidates.

    ``similarity`` (Q, P) holds every (distinct) question of the batch against every (distinct) passage; each of
    the B candidates names its question row (``query_index``), its passage column (``passage_index``), its grade
    (``labels``) and its question (``groups``: the same integer for one question's candidates). The other
    relevant passages of the candidate's own question (and of any question worded the same) are left out of its
    softmax (they are not negatives); every
    other passage of the batch, the question's own irrelevant candidates included, is one. A question without a
    relevant candidate has no row (it is skipped), though its passages serve the others as negatives. A batch
    without a relevant candidate gives 0, still connected to ``similarity`` (its gradient is 0)."""
    positive = labels > 0
    if not bool(positive.any()):
        return similarity.sum() * 0.0
    rows = torch.nonzero(positive).flatten()  # (R,): the candidates that are targets
    target = passage_index[rows]
    # (R, B): candidate b is another relevant candidate of row r's question; scattered to its passage column.
    # Two questions worded alike share one question row: each one's relevant passages are not the other's negatives.
    same = (groups[rows].unsqueeze(1) == groups.unsqueeze(0)) | \
        (query_index[rows].unsqueeze(1) == query_index.unsqueeze(0))
    others = same & positive.unsqueeze(0)
    blocked = torch.zeros(len(rows), similarity.shape[1], device=similarity.device).scatter_reduce(
        1, passage_index.unsqueeze(0).expand(len(rows), -1), others.float(), "amax").bool()
    blocked[torch.arange(len(rows), device=similarity.device), target] = False
    logits = similarity[query_index[rows]].float().masked_fill(blocked, float("-inf"))
    return F.cross_entropy(logits, target)
