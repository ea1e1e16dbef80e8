"""The rank probe's feature sets grouped by width (:class:`FeatureGroup`), each group's question and passage vectors
per split (:func:`gather`, :class:`SplitData`) and their standardisation (:func:`standardise_splits`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hire.lab.pooling import POOLINGS
from hire.lab.scaling import NEAR_CONSTANT, feature_scale
from hire.probing.classifiers import FeatureSet, feature_sets
from hire.ranking.data import Candidates


@dataclass(frozen=True)
class FeatureGroup:
    """Feature sets that concatenate the same number of hidden states, trained as one batch of ``F`` scorers."""

    sets: tuple[FeatureSet, ...]

    @property
    def layers(self) -> Tensor:
        return torch.tensor([fs.layers for fs in self.sets], dtype=torch.long)  # (F, k)

    @property
    def poolings(self) -> Tensor:
        return torch.tensor([POOLINGS.index(fs.pooling) for fs in self.sets], dtype=torch.long)  # (F,)

    def subset(self, indices: Sequence[int]) -> FeatureGroup:
        return FeatureGroup(tuple(self.sets[i] for i in indices))


def feature_groups(num_hidden_states: int) -> list[FeatureGroup]:
    """Every feature set of :func:`feature_sets`, grouped by how many hidden states it concatenates (in order)."""
    groups: dict[int, list[FeatureSet]] = {}
    for fs in feature_sets(num_hidden_states):
        groups.setdefault(len(fs.layers), []).append(fs)
    return [FeatureGroup(tuple(sets)) for sets in groups.values()]


def gather(features: np.ndarray, group: FeatureGroup, device: str = "cpu", chunk: int = 4096) -> Tensor:
    """Pooled features ``(N, l + 1, 4, d)`` -> ``(F, N, k d)`` float32: each feature set's vectors (its hidden states
    concatenated in order), converted in chunks so that a float16 cache is never copied whole as float32."""
    layers, poolings = group.layers, group.poolings
    f, k = layers.shape
    out = torch.empty((f, len(features), k * features.shape[-1]), dtype=torch.float32, device=device)
    for start in range(0, len(features), chunk):
        x = torch.from_numpy(np.ascontiguousarray(features[start:start + chunk])).to(device)  # (n, l + 1, 4, d)
        picked = x[:, layers.to(device), poolings.to(device)[:, None]]  # (n, F, k, d)
        out[:, start:start + len(x)] = picked.permute(1, 0, 2, 3).reshape(f, len(x), -1).float()
    return out


@dataclass
class SplitData:
    """One split's candidates and its question and passage vectors for one feature group."""

    candidates: Candidates
    q: Tensor  # (F, questions, D)
    p: Tensor  # (F, passages, D)


def standardise_splits(train: SplitData, *others: SplitData) -> None:
    """Centre and scale every dimension (per feature set) by the training questions' and passages' statistics."""
    both = torch.cat([train.q, train.p], dim=1)  # (F, n, D)
    mean = both.mean(dim=1, keepdim=True)
    std = both.std(dim=1, keepdim=True, unbiased=False)
    std = feature_scale(std, NEAR_CONSTANT)  # a constant dimension stays zero, never divides by 0
    for split in (train, *others):
        split.q.sub_(mean).div_(std)
        split.p.sub_(mean).div_(std)
