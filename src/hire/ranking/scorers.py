"""The rank probe's scorers: ``F`` learned scorers of one kind as one module (:class:`BatchedScorer`), cosine
similarity, and every candidate of a split scored (:func:`score_split`)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from hire.probing.classifiers import FeatureSet
from hire.ranking.features import SplitData
from hire.ranking.settings import LEARNED

_EVAL_ROWS = 1024  # candidates scored at once when evaluating (bounds memory, not results)


def set_seed(seed: int, fs: FeatureSet) -> int:
    """The seed of a feature set's initial weights: its own, whatever else is trained beside it."""
    return zlib.crc32(f"{seed}|{fs.row}|{fs.pooling}".encode())


def _uniform(shape: tuple[int, ...], bound: float, generator: torch.Generator) -> Tensor:
    return (torch.rand(shape, generator=generator) * 2 - 1) * bound


class BatchedScorer(nn.Module):
    """``F`` scorers of one kind (``bilinear``, ``logistic`` or ``mlp``), one per feature set of a group, as tensors
    with a leading feature-set axis. Initial weights: bilinear ``W = I / D`` (a scaled dot product), ``b = 0``;
    logistic and MLP layers uniform in ``+-1/sqrt(fan_in)`` (torch's ``nn.Linear`` rule), biases 0."""

    def __init__(self, kind: str, sets: Sequence[FeatureSet], dim: int, hidden: int = 128, seed: int = 0) -> None:
        super().__init__()
        if kind not in LEARNED:
            raise ValueError(f"unknown learned scorer {kind!r}; choose from {', '.join(LEARNED)}")
        self.kind, f = kind, len(sets)
        self.bias = nn.Parameter(torch.zeros(f, 1))  # (F, 1)
        if kind == "bilinear":
            self.weight = nn.Parameter(torch.eye(dim).repeat(f, 1, 1) / dim)  # (F, D, D)
            return
        gens = [torch.Generator().manual_seed(set_seed(seed, fs)) for fs in sets]
        if kind == "logistic":
            self.weight = nn.Parameter(torch.stack([_uniform((4 * dim, 1), (4 * dim) ** -0.5, g) for g in gens]))
        else:  # mlp: (F, 4D, H), (F, 1, H), (F, H, 1)
            self.weight = nn.Parameter(torch.stack([_uniform((4 * dim, hidden), (4 * dim) ** -0.5, g) for g in gens]))
            self.hidden_bias = nn.Parameter(torch.zeros(f, 1, hidden))
            self.out = nn.Parameter(torch.stack([_uniform((hidden, 1), hidden ** -0.5, g) for g in gens]))

    def forward(self, u: Tensor, v: Tensor, question_of: Tensor) -> Tensor:
        """Questions ``u`` (F, Q, D), candidates ``v`` (F, B, D), each candidate's question ``(B,)`` -> (F, B)."""
        if self.kind == "bilinear":
            uw = torch.bmm(u, self.weight)  # (F, Q, D): once per question, not per candidate
            return (uw[:, question_of] * v).sum(-1) + self.bias  # (F, B)
        uq = u[:, question_of]  # (F, B, D)
        x = torch.cat([uq, v, uq * v, (uq - v).abs()], dim=-1)  # (F, B, 4D)
        if self.kind == "mlp":
            x = torch.relu(torch.bmm(x, self.weight) + self.hidden_bias)  # (F, B, H)
            return torch.bmm(x, self.out).squeeze(-1) + self.bias  # (F, B)
        return torch.bmm(x, self.weight).squeeze(-1) + self.bias  # (F, B)


def cosine(u: Tensor, v: Tensor, question_of: Tensor) -> Tensor:
    """Cosine similarity of each candidate with its question: (F, Q, D), (F, B, D), (B,) -> (F, B)."""
    return torch.nn.functional.cosine_similarity(u[:, question_of], v, dim=-1)


def score_split(scorer: Callable[[Tensor, Tensor, Tensor], Tensor], data: SplitData) -> Tensor:
    """Every candidate's score under each feature set's scorer: (F, N), in the split's row order."""
    c = data.candidates
    device = data.q.device
    out = torch.empty((data.q.shape[0], len(c.examples)), dtype=torch.float32, device=device)
    with torch.no_grad():
        for start in range(0, len(c.examples), _EVAL_ROWS):
            rows = slice(start, start + _EVAL_ROWS)
            questions, local = np.unique(c.question[rows], return_inverse=True)
            out[:, rows] = scorer(data.q[:, torch.from_numpy(questions).to(device)],
                                  data.p[:, torch.from_numpy(c.passage[rows]).to(device)],
                                  torch.from_numpy(local.reshape(-1)).to(device))
    return out


def cosine_group(evals: dict[str, SplitData]) -> dict[str, np.ndarray]:
    """Cosine scores (F, N) per evaluation split, on the raw (not standardised) pooled vectors."""
    return {split: score_split(cosine, data).cpu().numpy() for split, data in evals.items()}
