"""The baselines of the paper and its companions (SPEC §2): heads that read the hidden states directly.

- ``LastLayer``: the standard head's input, the last layer's first token ``R[:, 0]`` (BERT/RoBERTa).
- ``ScalarMix``: ELMo-style ``gamma * sum_j softmax(w)_j H_j`` (Peters et al. 2018), one learned weight
  per hidden state for the whole task; read at the first token.
- ``ConcatLast``: the first-token vectors of the last ``k`` hidden states, concatenated (BERT §5.3).
- ``Pooling``: CLS (first token), SEP (last real token), mean or max over real tokens, of one chosen
  hidden state (the layer-wise studies).

Per token (``tokens``, for token tasks; BERT §5.3's feature-based rows): the same reads at every token instead of
the first: ``R``, ``gamma * sum_j softmax(w)_j H_j``, ``[H_{l-k+1}; ...; H_l]``, and one chosen ``H_layer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn

from hire.model.heads.base import Head, HeadOutput
from hire.model.optiontypes import AtLeast1

POOLINGS: tuple[str, ...] = ("cls", "sep", "mean", "max")  # the modes of Pooling and pool()


def _check_layer(layer: int, num_hidden_states: int) -> int:
    """A hidden-state index (negative counts from the last, as in Python) -> 0..l."""
    if not -num_hidden_states <= layer < num_hidden_states:
        raise ValueError(f"layer {layer} is out of range for an encoder with {num_hidden_states} hidden "
                         f"states (0 = embeddings, {num_hidden_states - 1} = last; negatives count back)")
    return layer % num_hidden_states


class LastLayer(Head):
    """c = R[:, 0]: the last hidden state's first token."""

    def __init__(self, hidden_size: int, num_hidden_states: int):
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        return HeadOutput(hidden_states[-1][:, 0])  # (B, d)

    def tokens(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        return HeadOutput(hidden_states[-1])  # (B, n, d)


class ScalarMix(Head):
    """c = gamma * sum_j softmax(w)_j H_j[:, 0]: task-level (not per-example) layer weights."""

    def __init__(self, hidden_size: int, num_hidden_states: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(num_hidden_states))  # w, uniform at the start
        self.gamma = nn.Parameter(torch.ones(()))
        self.output_dim = hidden_size

    def reset_parameters(self) -> None:
        """w = 0 (uniform weights) and gamma = 1, as built."""
        nn.init.zeros_(self.weights)
        nn.init.ones_(self.gamma)

    def forward(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        s = torch.softmax(self.weights, dim=0)  # (l+1,)
        firsts = torch.stack([h[:, 0] for h in hidden_states], dim=1)  # (B, l+1, d)
        c = self.gamma * torch.einsum("l,bld->bd", s.to(firsts.dtype), firsts)  # (B, d)
        return HeadOutput(c, s.unsqueeze(0).expand(firsts.shape[0], -1))

    def tokens(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        s = torch.softmax(self.weights, dim=0)  # (l+1,)
        H = torch.stack(list(hidden_states))  # (l+1, B, n, d)
        mixed = self.gamma * torch.einsum("l,lbnd->bnd", s.to(H.dtype), H)  # (B, n, d)
        return HeadOutput(mixed, s.unsqueeze(0).expand(H.shape[1], -1))


class ConcatLast(Head):
    """c = [H_{l-k+1}[:, 0]; ...; H_l[:, 0]]: the last k hidden states' first tokens side by side."""

    def __init__(self, hidden_size: int, num_hidden_states: int, k: AtLeast1 = 4):
        super().__init__()
        if not 1 <= k <= num_hidden_states:
            raise ValueError(f"k must be between 1 and the number of hidden states ({num_hidden_states}), "
                             f"not {k}")
        self.k = k
        self.output_dim = k * hidden_size

    def forward(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        return HeadOutput(torch.cat([h[:, 0] for h in hidden_states[-self.k :]], dim=-1))  # (B, k d)

    def tokens(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        return HeadOutput(torch.cat(list(hidden_states[-self.k :]), dim=-1))  # (B, n, k d)


class Pooling(Head):
    """One hidden state, pooled over tokens: ``cls``, ``sep`` (last real token), ``mean`` or ``max``."""

    def __init__(self, hidden_size: int, num_hidden_states: int,
                 mode: Literal["cls", "sep", "mean", "max"] = "cls", layer: int = -1):
        super().__init__()
        _check_mode(mode)
        self.mode, self.layer = mode, _check_layer(layer, num_hidden_states)
        self.reads_last_layer = self.layer == num_hidden_states - 1
        self.output_dim = hidden_size

    def forward(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        return HeadOutput(pool(hidden_states[self.layer], mask, self.mode))

    def tokens(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        """The chosen hidden state at every token; pooling over a sentence's tokens has no per-token form."""
        self.check_tokens()
        return HeadOutput(hidden_states[self.layer])  # (B, n, d)

    def check_tokens(self) -> None:
        if self.mode != "cls":
            raise ValueError(f"pool-{self.mode} pools a sentence's tokens into one vector, which a token task does "
                             "not do; pool-cls with a layer option gives that hidden state at every token")


def pool(h: Tensor, mask: Tensor, mode: str) -> Tensor:
    """Pool (B, ..., n, d) over the real tokens of ``mask`` (B, n) -> (B, ..., d), in ``h``'s dtype. The tokens
    are the axis before last, so one call pools a stack of hidden states (B, l + 1, n, d) as the probe does."""
    _check_mode(mode)
    if mode == "cls":
        return h[..., 0, :]
    lengths = mask.sum(-1).reshape(-1, *[1] * (h.dim() - 2))  # (B, 1, ..., 1): real tokens per example
    if mode == "sep":  # the final separator is the last real token
        last = (lengths - 1).clamp(min=0).unsqueeze(-1).expand(*h.shape[:-2], 1, h.shape[-1])
        return h.gather(-2, last).squeeze(-2)
    real = mask.bool().reshape(mask.shape[0], *[1] * (h.dim() - 3), mask.shape[1], 1)  # (B, 1, ..., n, 1)
    if mode == "mean":
        return (h * real).sum(-2) / lengths.clamp(min=1)
    return h.masked_fill(~real, torch.finfo(h.dtype).min).amax(-2)


def _check_mode(mode: str) -> None:
    if mode not in POOLINGS:
        raise ValueError(f"pooling mode must be 'cls', 'sep', 'mean' or 'max', not {mode!r}")
