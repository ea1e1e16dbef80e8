"""Every pooling of every hidden state in one pass: CLS, SEP, mean and max over real tokens.

The layer-wise study (``layerwise-bert-activations-blog.txt`` §1.2) pools each hidden state four ways:
the first token (CLS), the last real token (SEP: the final separator, wherever padding starts), and the
mean and max over the real tokens only. Padding never changes a pooled vector: the mask decides what is
real, and the tests compare a padded batch with each example alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

POOLINGS: tuple[str, ...] = ("cls", "sep", "mean", "max")


def pool_hidden_states(hidden_states: Sequence[Tensor], mask: Tensor) -> Tensor:
    """``l + 1`` hidden states (B, n, d) and the mask (B, n) -> (B, l + 1, 4, d) in float32.

    The third axis follows :data:`POOLINGS`. Pooling runs in float32 whatever the encoder's precision,
    so a bf16 forward pass loses nothing more in the sum of a mean.
    """
    h = torch.stack(tuple(hidden_states), dim=1).float()  # (B, L, n, d), L = l + 1
    b, layers, _, d = h.shape
    real = mask.bool()[:, None, :, None]  # (B, 1, n, 1)
    lengths = mask.sum(-1).clamp(min=1)  # (B,)
    cls = h[:, :, 0]  # (B, L, d)
    last = (lengths - 1)[:, None, None, None].expand(b, layers, 1, d)  # index of the last real token
    sep = h.gather(2, last).squeeze(2)  # (B, L, d)
    mean = (h * real).sum(2) / lengths[:, None, None].to(h.dtype)  # (B, L, d)
    peak = h.masked_fill(~real, torch.finfo(h.dtype).min).amax(2)  # (B, L, d)
    return torch.stack((cls, sep, mean, peak), dim=2)  # (B, L, 4, d)
