"""The one rule by which the lab standardises a feature, and what it does with a constant one.

A feature is standardised as ``(x - mean) / scale``, ``scale`` its population standard deviation over the rows it
is fitted on; where that deviation is at most ``floor`` the feature is constant there and its scale is 1, so that it
standardises to 0, never to nan (a deviation of 0) or to rounding noise blown up (a tiny one). ``floor`` is 0 where
the statistics are exact for a constant feature: the probes' (:mod:`hire.probing.fit`) accumulate the mean in
float64, so a constant's deviation is exactly 0 (scikit-learn's ``StandardScaler`` gives it scale 1 too). The rank
probe's scorers (:mod:`hire.ranking.features`) take the mean in float32, which leaves a constant's deviation at
rounding level: :data:`NEAR_CONSTANT` there. Each keeps the numbers it always gave.
"""

from __future__ import annotations

import torch
from torch import Tensor

NEAR_CONSTANT = 1e-6  # the floor where a float32 mean leaves a constant feature's deviation at rounding level


def feature_scale(std: Tensor, floor: float = 0.0) -> Tensor:
    """Each feature's scale: its standard deviation ``std``, or 1 where ``std <= floor`` (a constant feature)."""
    return torch.where(std > floor, std, torch.ones_like(std))


__all__ = ["NEAR_CONSTANT", "feature_scale"]
