"""The feature sets of BERT's Table 7 (the rows), over cached word features ``(B, W, l + 1, d)``.

    embeddings       H_0
    second-to-last   H_{l-1}
    last             H_l
    sum-last-4       gamma * sum_{j=l-3..l} softmax(w)_j H_j     learned scalars w (4) and gamma
    concat-last-4    [H_{l-3}; H_{l-2}; H_{l-1}; H_l]           (4d)
    sum-all          gamma * sum_{j=0..l} softmax(w)_j H_j       learned scalars w (l+1) and gamma
    hire-mix         sum_j s_j H_j, s from HIRE's extractor (eq. 2-4) per sentence (beyond the paper)

"Weighted sum" is read as ELMo's scalar mix (:class:`hire.model.heads.baselines.ScalarMix`): one weight per layer for
the whole task, softmax-normalised, times a learned scale, starting from equal weights; the paper does not say
more. ``hire-mix`` is :class:`hire.model.heads.hire.HIRE` with its fusion network off, whose per-token form returns A
(eq. 5): its Bi-GRU (eq. 2) runs over each layer's word features of the sentence (the words are its tokens
here), so each sentence gets its own layer weights.

A row reads only the hidden states it needs (``layers``), so that only those are gathered from the cache.
"""

from __future__ import annotations

from torch import Tensor, nn

from hire.featurebased import ROWS
from hire.model.heads.baselines import ScalarMix
from hire.model.heads.hire import HIRE

PAPER_DEV_F1 = {"embeddings": 91.0, "second-to-last": 95.6, "last": 94.9, "sum-last-4": 95.9, "concat-last-4": 96.1,
                "sum-all": 95.5}  # BERT-base, CoNLL-2003 dev (Table 7); fine-tuned: 96.4


def row_layers(row: str, num_hidden_states: int) -> tuple[int, ...]:
    """The hidden states (0 .. l) that ``row`` reads, in order."""
    L1 = num_hidden_states
    if row not in ROWS:
        raise ValueError(f"unknown feature row {row!r}; choose from {', '.join(ROWS)}")
    if row.endswith("last-4") and L1 < 4:
        raise ValueError(f"row {row!r} needs 4 hidden states, and the encoder has {L1}")
    return {"embeddings": (0,), "second-to-last": (L1 - 2,), "last": (L1 - 1,)}.get(
        row, tuple(range(L1 - 4, L1)) if row.endswith("last-4") else tuple(range(L1)))


class FeatureRow(nn.Module):
    """One row: ``(B, W, k, d)`` features of its ``layers`` (k of them) and the word mask ``(B, W)`` in,
    ``(B, W, output_dim)`` out."""

    def __init__(self, row: str, hidden_size: int, num_hidden_states: int, dropout: float = 0.1):
        super().__init__()
        self.row, self.layers = row, row_layers(row, num_hidden_states)
        k, d = len(self.layers), hidden_size
        self.mix: nn.Module | None = None
        if row in ("sum-last-4", "sum-all"):
            self.mix = ScalarMix(d, k)
        elif row == "hire-mix":
            self.mix = HIRE(d, k, fusion=False, dropout=dropout)
        self.output_dim = 4 * d if row == "concat-last-4" else d

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        B, W, k, d = x.shape
        if self.mix is not None:
            return self.mix.tokens(x.unbind(2), mask).representation  # (B, W, d)
        return x.reshape(B, W, k * d)  # one state, or the last four side by side: (B, W, k d)


__all__ = ["PAPER_DEV_F1", "ROWS", "FeatureRow", "row_layers"]
