"""Every pooling of every hidden state in one pass: CLS, SEP, mean and max over real tokens.

The layer-wise study (``layerwise-bert-activations-blog.txt`` §1.2) pools each hidden state four ways:
the first token (CLS), the last real token (SEP: the final separator, wherever padding starts), and the
mean and max over the real tokens only: :func:`hire.model.heads.baselines.pool`, the pooling the ``Pooling`` head
uses, here on all hidden states at once. Padding never changes a pooled vector: the mask decides what is
real, and the tests compare a padded batch with each example alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from hire.model.heads.baselines import POOLINGS, pool

__all__ = ["POOLINGS", "pool_hidden_states"]


def pool_hidden_states(hidden_states: Sequence[Tensor], mask: Tensor) -> Tensor:
    """``l + 1`` hidden states (B, n, d) and the mask (B, n) -> (B, l + 1, 4, d) in float32.

    The third axis follows :data:`POOLINGS`. Pooling runs in float32 whatever the encoder's precision,
    so a bf16 forward pass loses nothing more in the sum of a mean.
    """
    h = torch.stack(tuple(hidden_states), dim=1).float()  # (B, l + 1, n, d)
    return torch.stack([pool(h, mask, mode) for mode in POOLINGS], dim=2)
