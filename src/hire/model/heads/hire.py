"""HIRE: the Hidden Representation Extractor and its fusion network (Zhao & Yang, §2.2-2.3).

Notation (the paper's): batch ``B``, tokens ``n`` (right-padded, ``mask`` marks real tokens), hidden size
``d``, encoder layers ``l``; hidden states ``H_0 .. H_l``, each ``(B, n, d)``; ``R = H_l``.

    eq. 2   u_i = BiGRU(H_i)                 one 2-layer Bi-GRU shared by all l+1 states; u_i (4d) holds
                                             the final states of layer 1 fwd, layer 1 bwd, layer 2 fwd,
                                             layer 2 bwd (fwd at the last real token, bwd at the first)
    eq. 3   alpha_i = ReLU(w . u_i + b)
    eq. 4   s = softmax(alpha)               over the l+1 states, per example
    eq. 5   A = sum_{i=0..l} s_i H_i          the complementary representation (B, n, d)
    eq. 6   M = [R; A; R + A; R * A]          (B, n, 4d)
    eq. 7   F = BiGRU(M)                      2 layers, hidden d per direction: (B, n, 2d)
            c = F[:, 0]                       what the output layer (eq. 8-9, in hire.model) reads

Per token (``tokens``, for token tasks, beyond the paper): eq. 2-7 unchanged (the extractor's s is still one
weighting per sentence), and the output layer reads F at every token instead of F[:, 0]; without fusion it reads
A, with fusion depth 0 it reads M.

Variants (paper §4), all settings of this one module:
- ``extractor=False``: "w/o HIRE" (Table 4): M = [R; R; R + R; R * R] (eq. 12).
- ``fusion=False``: "w/o fusion network" (Table 4): c = A[:, 0].
- ``weighting="mean"|"random"`` with ``layers="all"|"last"|"first"`` and ``k``: fixed scores (Table 5).
- ``fusion_layers`` 0-3 (Table 6); 0 means c = M[:, 0].
- ``extractor_hidden``, ``extractor_layers``, ``extractor_stride``, ``fusion_hidden``: a cheaper HIRE
  (``hire-lite``, beyond the paper): a smaller extractor that reads window means of ``stride`` tokens.
- ``score_activation="none"`` (beyond the paper): alpha_i = w . u_i + b without the ReLU of eq. 3. With the
  ReLU, a state whose score turns negative gets alpha_i = 0 and no gradient through it again; on small
  encoders the scores of most or all states die that way and s becomes uniform (experiments/head-lr-minilm).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hire.model.heads.base import Head, HeadOutput, check_arguments
from hire.model.optiontypes import AtLeast1, Probability, bounded
from hire.model.recurrent import BiGRU

FusionLayers = bounded(int, (">=", 0), ("<=", 3))  # 0-3: paper Table 6


def default_k(num_hidden_states: int) -> int:
    """Table 5 uses k = 6 of 25 hidden states (RoBERTa-large); scale that to the encoder's depth."""
    return max(1, round(6 / 25 * num_hidden_states))


def window_means(x: Tensor, mask: Tensor, stride: int) -> tuple[Tensor, Tensor]:
    """Mean of each window of ``stride`` real tokens: (N, n, d) -> (N, ceil(n / stride), d), lengths.

    Windows start at token 0, so padding never changes a window of real tokens.
    """
    N, n, d = x.shape
    pad = -n % stride
    m = F.pad(mask.to(x.dtype), (0, pad)).view(N, -1, stride)  # (N, n', stride)
    sums = (F.pad(x, (0, 0, 0, pad)).view(N, -1, stride, d) * m.unsqueeze(-1)).sum(2)  # (N, n', d)
    counts = m.sum(2).clamp(min=1).unsqueeze(-1)  # (N, n', 1)
    lengths = (mask.sum(-1) + stride - 1) // stride  # (N,)
    return sums / counts, lengths


class HIRE(Head):
    """HIRE with its fusion network; see the module docstring for the equations and the variants."""

    def __init__(
        self,
        hidden_size: int,
        num_hidden_states: int,
        weighting: Literal["dynamic", "mean", "random"] = "dynamic",
        layers: Literal["all", "last", "first"] = "all",
        k: AtLeast1 | None = None,
        seed: int = 0,
        extractor: bool = True,
        fusion: bool = True,
        fusion_layers: FusionLayers = 2,
        extractor_hidden: AtLeast1 | None = None,
        extractor_layers: AtLeast1 = 2,
        extractor_stride: AtLeast1 = 1,
        fusion_hidden: AtLeast1 | None = None,
        dropout: Probability = 0.1,
        score_activation: Literal["relu", "none"] = "relu",
    ):
        super().__init__()
        d, L1 = hidden_size, num_hidden_states
        check_arguments(HIRE.__init__, {name: value for name, value in locals().items() if name != "self"})
        if not extractor and not fusion:
            raise ValueError("extractor=False with fusion=False leaves nothing of HIRE: c would be R[:, 0], the "
                             "'last-layer' head")
        self.weighting, self.use_extractor, self.use_fusion = weighting, extractor, fusion
        self.fusion_layers, self.stride = fusion_layers, extractor_stride
        self.score_relu = score_activation == "relu"
        self.extractor: BiGRU | None = None
        if extractor and weighting == "dynamic":
            h_e = d if extractor_hidden is None else extractor_hidden
            self.extractor = BiGRU(d, h_e, extractor_layers, dropout)  # eq. 2, shared by all states
            self.score = nn.Linear(2 * extractor_layers * h_e, 1)  # eq. 3: w (4d) and b
        elif extractor:
            self.register_buffer("fixed_scores", self._fixed_scores(L1, weighting, layers, k, seed))
        self.fusion: BiGRU | None = None
        if not fusion:
            self.output_dim = d  # c = A[:, 0]
        elif fusion_layers == 0:
            self.output_dim = 4 * d  # c = M[:, 0]
        else:
            h_f = d if fusion_hidden is None else fusion_hidden
            self.fusion = BiGRU(4 * d, h_f, fusion_layers, dropout)  # eq. 7
            self.output_dim = 2 * h_f

    @staticmethod
    def _fixed_scores(L1: int, weighting: str, layers: str, k: int | None, seed: int) -> Tensor:
        """Table 5's fixed s: the mean, or a softmax of random values drawn once, over the chosen states.

        Drawn on the CPU, where the seed's generator lives, whatever the default device the head is built on.
        """
        k = L1 if layers == "all" else (default_k(L1) if k is None else k)
        if not 1 <= k <= L1:
            raise ValueError(f"k must be between 1 and the number of hidden states ({L1}), not {k}")
        chosen = torch.arange(L1 - k, L1, device="cpu") if layers == "last" else torch.arange(k, device="cpu")
        scores = torch.zeros(L1, device="cpu")
        if weighting == "mean":
            scores[chosen] = 1.0 / k
        else:
            generator = torch.Generator().manual_seed(seed)
            scores[chosen] = torch.softmax(torch.randn(k, generator=generator, device="cpu"), dim=0)
        return scores.to(torch.get_default_device())

    def importance_scores(self, H: Tensor, mask: Tensor) -> Tensor:
        """eq. 2-4: s, (B, l+1), for hidden states H (l+1, B, n, d)."""
        L1, B, n, d = H.shape
        if self.extractor is None:
            return self.fixed_scores.expand(B, L1)
        x = H.reshape(L1 * B, n, d)  # every hidden state is one more sequence of one batch
        masks = mask.repeat(L1, 1)  # (L1*B, n)
        if self.stride > 1:
            x, lengths = window_means(x, masks, self.stride)
        else:
            lengths = masks.sum(-1)
        _, finals = self.extractor(x, lengths, need_outputs=False)  # (L1*B, 2 * layers, h_e)
        u = finals.reshape(L1, B, -1)  # eq. 2: (l+1, B, 4d)
        alpha = self.score(u).squeeze(-1)
        alpha = F.relu(alpha) if self.score_relu else alpha  # eq. 3: (l+1, B)
        alpha = alpha.to(torch.promote_types(alpha.dtype, torch.float32))  # the softmax in float32 at least
        return torch.softmax(alpha, dim=0).transpose(0, 1)  # eq. 4: (B, l+1)

    def forward(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        R = hidden_states[-1]  # (B, n, d)
        if not self.use_extractor:
            s, A = None, R  # "w/o HIRE": fuse R with itself (eq. 12)
        else:
            H = torch.stack(list(hidden_states))  # (l+1, B, n, d)
            s = self.importance_scores(H, mask)  # (B, l+1)
            if not self.use_fusion:  # only A[:, 0] is read: c = sum_i s_i H_i[:, 0]
                c = torch.einsum("bl,lbd->bd", s.to(H.dtype), H[:, :, 0])  # (B, d)
                return HeadOutput(c, s)
            A = torch.einsum("bl,lbnd->bnd", s.to(H.dtype), H)  # eq. 5: (B, n, d)
        M = torch.cat([R, A, R + A, R * A], dim=-1)  # eq. 6: (B, n, 4d)
        if self.fusion is None:
            return HeadOutput(M[:, 0], s)  # fusion depth 0
        first, _ = self.fusion(M, mask.sum(-1), first_token_only=True)  # eq. 7: F[:, :1], (B, 1, 2d)
        return HeadOutput(first[:, 0], s)  # c = F[:, 0]

    def tokens(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        """eq. 2-7 as in :meth:`forward`, read at every token: F (B, n, 2h_f), or A without fusion, M at depth 0."""
        R = hidden_states[-1]  # (B, n, d)
        s = None
        if not self.use_extractor:
            A = R  # eq. 12
        else:
            H = torch.stack(list(hidden_states))  # (l+1, B, n, d)
            s = self.importance_scores(H, mask)  # eq. 2-4: (B, l+1)
            A = torch.einsum("bl,lbnd->bnd", s.to(H.dtype), H)  # eq. 5: (B, n, d)
            if not self.use_fusion:
                return HeadOutput(A, s)
        M = torch.cat([R, A, R + A, R * A], dim=-1)  # eq. 6: (B, n, 4d)
        if self.fusion is None:
            return HeadOutput(M, s)
        fused, _ = self.fusion(M, mask.sum(-1))  # eq. 7: F, (B, n, 2h_f)
        return HeadOutput(fused, s)


def hire_lite(
    hidden_size: int,
    num_hidden_states: int,
    extractor_hidden: AtLeast1 | None = None,
    extractor_stride: AtLeast1 = 4,
    fusion_hidden: AtLeast1 | None = None,
    dropout: Probability = 0.1,
) -> HIRE:
    """A cheaper HIRE (beyond the paper): the same per-example layer weighting and fusion, smaller.

    The extractor is a 1-layer Bi-GRU of hidden ``d/4`` over window means of ``extractor_stride`` tokens,
    and the fusion a 1-layer Bi-GRU of hidden ``d/2`` (whose forward direction, read only at the first
    token, costs a single step).
    """
    return HIRE(
        hidden_size, num_hidden_states,
        extractor_hidden=max(1, math.ceil(hidden_size / 4)) if extractor_hidden is None else extractor_hidden,
        extractor_layers=1, extractor_stride=extractor_stride,
        fusion_hidden=max(1, math.ceil(hidden_size / 2)) if fusion_hidden is None else fusion_hidden,
        fusion_layers=1, dropout=dropout,
    )
