"""Training the rank probe's learned scorers: one per feature set of a group at once (:func:`fit_group`), with the
pairwise hinge or pointwise loss and early stopping on each set's own dev MAP."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from hire.data.examples import DataError
from hire.data.ranking import RankingExample
from hire.ranking import LOSSES
from hire.ranking.features import FeatureGroup, SplitData
from hire.ranking.scorers import BatchedScorer, score_split
from hire.ranking.settings import FitSettings

Metric = Callable[[list[RankingExample], Sequence[float]], float]  # the early-stopping metric (dev MAP)


@dataclass
class GroupFit:
    """Each feature set's scores (F, N) per evaluation split with its best weights, and when those were reached."""

    scores: dict[str, np.ndarray]
    best_epoch: list[int]
    dev_map: list[float]
    epochs: int  # epochs run (the group stops once every feature set has run out of patience)


def _batch_loss(scores: Tensor, labels: Tensor, pairs: Tensor | None, loss: str, margin: float) -> Tensor:
    """Each feature set's mean loss over the batch, summed: (F, B) scores -> scalar."""
    if loss == "hinge":
        assert pairs is not None
        gap = scores[:, pairs[:, 0]] - scores[:, pairs[:, 1]]  # (F, P): better minus worse
        return torch.relu(margin - gap).mean(dim=1).sum()
    target = labels.expand_as(scores)
    return nn.functional.binary_cross_entropy_with_logits(scores, target, reduction="none").mean(dim=1).sum()


def fit_group(kind: str, loss: str, group: FeatureGroup, train: SplitData, evals: dict[str, SplitData],
              metric: Metric, settings: FitSettings) -> GroupFit:
    """Train one scorer per feature set of ``group`` at once (:class:`BatchedScorer`), with early stopping on each
    set's own ``metric`` (dev MAP) on ``evals["dev"]``; return every evaluation split's scores with each set's best
    weights. Batches are ``settings.batch_questions`` questions in an order drawn from ``settings.seed`` alone."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose from {', '.join(LOSSES)}")
    device = torch.device(settings.device)
    c = train.candidates
    labelled = np.nan_to_num(c.labels, nan=0.0)
    top = float(labelled.max()) if labelled.size and labelled.max() > 0 else 1.0
    targets = torch.from_numpy(labelled / top).to(device)  # pointwise: graded labels as soft targets in [0, 1]
    pairs = [torch.from_numpy(c.pairs(q)) for q in range(len(c.rows))]
    questions = [q for q in range(len(c.rows)) if loss != "hinge" or len(pairs[q])]
    if not questions:
        raise DataError("training data: no question has both a better and a worse candidate, so the hinge loss has "
                        "no pair to learn from")
    model = BatchedScorer(kind, group.sets, train.q.shape[-1], settings.mlp_hidden, settings.seed).to(device)
    # torch's fused Adam: the same element-wise update, for speed on the bilinear scorers' D x D weights (the timing:
    # docs/benchmarks/cpu-2core-ranking-custom.md).
    optimiser = torch.optim.Adam(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay,
                                 fused=device.type in ("cpu", "cuda"))
    f = len(group.sets)
    best_map, best_epoch, waited = [-1.0] * f, [0] * f, [0] * f
    best_state = copy.deepcopy(model.state_dict())
    order = torch.Generator().manual_seed(settings.seed)
    rows = [torch.from_numpy(r) for r in c.rows]
    passage = torch.from_numpy(c.passage)
    epoch = 0
    for epoch in range(1, settings.epochs + 1):
        model.train()
        permutation = torch.randperm(len(questions), generator=order).tolist()
        for start in range(0, len(permutation), settings.batch_questions):
            batch = [questions[i] for i in permutation[start:start + settings.batch_questions]]
            batch_rows = torch.cat([rows[q] for q in batch])  # (B,)
            counts = torch.tensor([len(rows[q]) for q in batch])
            offsets = torch.cumsum(counts, 0) - counts
            batch_pairs = torch.cat([pairs[q] + o for q, o in zip(batch, offsets.tolist(), strict=True)]).to(device)
            question_of = torch.repeat_interleave(torch.arange(len(batch)), counts).to(device)
            scores = model(train.q[:, torch.tensor(batch, device=device)], train.p[:, passage[batch_rows].to(device)],
                           question_of)  # (F, B)
            optimiser.zero_grad(set_to_none=True)
            _batch_loss(scores, targets[batch_rows.to(device)], batch_pairs, loss, settings.margin).backward()
            optimiser.step()
        model.eval()
        dev = score_split(model, evals["dev"]).cpu().numpy()
        state = model.state_dict()
        for i in range(f):
            if waited[i] >= settings.patience:
                continue  # stopped: its best weights are kept, later epochs are not its own
            value = metric(evals["dev"].candidates.examples, dev[i].tolist())
            if value > best_map[i]:
                best_map[i], best_epoch[i], waited[i] = value, epoch, 0
                for name, tensor in state.items():
                    best_state[name][i] = tensor[i]
            else:
                waited[i] += 1
        if all(w >= settings.patience for w in waited):
            break
    model.load_state_dict(best_state)
    model.eval()
    scores = {split: score_split(model, data).cpu().numpy() for split, data in evals.items()}
    return GroupFit(scores, best_epoch, best_map, epoch)
