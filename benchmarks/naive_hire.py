"""A straightforward HIRE, for comparison only: packed sequences and a Python loop over hidden states.

It reuses a fast ``HIRE`` head's parameters, so both compute the same function (up to dropout
placement); only the way of computing differs. This is what the fast path in ``hire.model.recurrent`` replaces.
"""

from __future__ import annotations

import types
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from hire.model.heads import HIRE, HeadOutput


def naive_forward(self: HIRE, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
    lengths = mask.sum(-1).cpu()
    B = mask.shape[0]
    u = []
    for H in hidden_states:  # one hidden state at a time
        packed = pack_padded_sequence(H, lengths, batch_first=True, enforce_sorted=False)
        _, h_n = self.extractor.gru(packed)  # (2 * layers, B, h)
        u.append(h_n.transpose(0, 1).reshape(B, -1))
    alpha = F.relu(self.score(torch.stack(u))).squeeze(-1)  # (l+1, B)
    s = torch.softmax(alpha, dim=0).transpose(0, 1)  # (B, l+1)
    A = torch.einsum("bl,lbnd->bnd", s, torch.stack(list(hidden_states)))
    R = hidden_states[-1]
    M = torch.cat([R, A, R + A, R * A], dim=-1)
    packed = pack_padded_sequence(M, lengths, batch_first=True, enforce_sorted=False)
    out, _ = pad_packed_sequence(self.fusion.gru(packed)[0], batch_first=True)
    return HeadOutput(out[:, 0], s)


def make_naive(head: HIRE) -> HIRE:
    """Switch a full ``hire`` head to the naive computation (same parameters)."""
    for bigru in (head.extractor, head.fusion):
        bigru.gru.dropout = bigru.dropout  # nn.GRU's own dropout between layers, as BiGRU applies it
    head.forward = types.MethodType(naive_forward, head)  # type: ignore[method-assign]
    return head
