"""``StandardScaler``'s statistics for the probes: of stacked feature sets (:func:`scaler`), of one feature set
(:func:`standardise`) and of each fit's training rows (:func:`row_sets`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hire.lab.scaling import feature_scale

CONSTANT_VARIANCE = 1e-10  # a feature's variance on a row set below this (of unit overall variance): constant


def scaler(x: Tensor) -> tuple[Tensor, Tensor]:
    """StandardScaler's mean and scale of ``x`` (S, N, D), each (S, 1, D): the population standard deviation,
    1 where a feature is constant (:func:`hire.lab.scaling.feature_scale`, as scikit-learn does)."""
    mean = x.sum(1, keepdim=True, dtype=torch.float64).div_(x.shape[1]).to(x.dtype)  # (S, 1, D)
    std = (x - mean).pow_(2).mean(1, keepdim=True).sqrt_()
    return mean, feature_scale(std)


@dataclass
class RowSets:
    """The training rows of each fit of one feature set, as 0/1 columns ``masks`` (N, R) over the rows of ``x``,
    with each row set's size and ``StandardScaler`` statistics (mean, scale: (R, D)) of ``x`` on it."""

    masks: Tensor
    counts: Tensor
    mean: Tensor
    scale: Tensor


def row_sets(x: Tensor, rows: Sequence[np.ndarray]) -> RowSets:
    """Masks and standardisation of each row set (indices into ``x``'s rows). ``x`` should be roughly centred
    and scaled already (see :func:`standardise`), so that the statistics lose nothing to rounding in float32.
    A feature constant on a row set gets scale 1, as ``StandardScaler`` gives it (its weight is 0 at the optimum
    whatever the scale: it carries nothing on the training rows)."""
    masks = x.new_zeros(x.shape[0], len(rows))
    for r, idx in enumerate(rows):
        masks[torch.as_tensor(idx, device=x.device, dtype=torch.long), r] = 1
    counts = masks.sum(0)
    mean = (masks.T @ x) / counts[:, None]
    var = (masks.T @ x.square()) / counts[:, None] - mean.square()
    scale = torch.where(var > CONSTANT_VARIANCE, var.clamp(min=0).sqrt(), torch.ones_like(var))
    return RowSets(masks, counts, mean, scale)


def standardise(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x``'s mean and scale (D,) (accumulated in float64; scale 1 for a constant feature,
    :func:`hire.lab.scaling.feature_scale`): one affine map for
    the whole feature set, which every fit's own standardisation (:func:`row_sets`) then refines exactly."""
    mean = (x.sum(0, dtype=torch.float64) / x.shape[0]).to(x.dtype)
    var = (x - mean).square_().sum(0, dtype=torch.float64) / x.shape[0]
    return mean, feature_scale(var.sqrt()).to(x.dtype)
