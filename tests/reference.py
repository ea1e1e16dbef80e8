"""A slow, obviously correct HIRE (SPEC §1), to check the batched, padded implementation against.

Every example runs alone and unpadded (sliced to its real length), every hidden state on its own, through
plain ``torch.nn.GRU`` modules that copy the trained head's weights. Nothing here is batched, masked or
hand-differentiated, so nothing here can leak padding. Which variant to compute is said explicitly by the
caller (not read from the head), so that a head that silently runs the wrong variant is caught.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from hire.model.recurrent import BiGRU


def plain_gru(bigru: BiGRU) -> nn.GRU:
    """A ``torch.nn.GRU`` (bidirectional, batch_first, eval mode) holding ``bigru``'s weights."""
    src = bigru.gru
    gru = nn.GRU(src.input_size, src.hidden_size, src.num_layers, batch_first=True, bidirectional=True)
    gru.load_state_dict(src.state_dict())
    return gru.eval()


def window_means(x: Tensor, stride: int) -> Tensor:
    """(len, d) -> (ceil(len / stride), d): the mean of each window of ``stride`` consecutive tokens."""
    return torch.stack([chunk.mean(0) for chunk in torch.split(x, stride)])


def summarise(gru: nn.GRU, x: Tensor) -> Tensor:
    """eq. 2 for one unpadded sequence x (len, d): u = the final states in h_n order, concatenated."""
    _, h_n = gru(x.unsqueeze(0))  # (2 * layers, 1, h)
    return h_n[:, 0].reshape(-1)  # [layer 1 fwd; layer 1 bwd; layer 2 fwd; layer 2 bwd; ...]


@torch.no_grad()
def reference_hire(head: nn.Module, hidden_states: Sequence[Tensor], mask: Tensor, *, extractor: bool = True,
                   dynamic: bool = True, fusion: bool = True, stride: int = 1, per_token: bool = False,
                   ) -> tuple[Tensor | list[Tensor], Tensor | None]:
    """HIRE's ``c`` (B, output_dim) and scores ``s`` (B, l+1) (None without the extractor), per example.
    ``per_token``: instead of ``c``, what the head gives at every real token (per example, (len, output_dim)).

    extractor=False: "w/o HIRE", M = [R; R; 2R; R*R]. dynamic=False: the head's fixed scores.
    fusion=False: c = A[0]. A head without a fusion GRU (``head.fusion is None``) with fusion=True: c = M[0].
    stride > 1: the extractor reads means of windows of ``stride`` real tokens.
    """
    extractor_gru = plain_gru(head.extractor) if extractor and dynamic else None
    fusion_gru = plain_gru(head.fusion) if fusion and head.fusion is not None else None
    cs, ss = [], []
    for b in range(mask.shape[0]):
        length = int(mask[b].sum())
        Hs = [h[b, :length].float() for h in hidden_states]  # l+1 tensors (len, d), no padding at all
        R = Hs[-1]
        s = None
        if not extractor:
            A = R
        else:
            if dynamic:
                alphas = []
                for H in Hs:  # one hidden state at a time
                    x = H if stride == 1 else window_means(H, stride)
                    u = summarise(extractor_gru, x)  # (2 * layers * h_e,)
                    alphas.append(torch.relu(head.score(u)).squeeze(-1))  # eq. 3
                s = torch.softmax(torch.stack(alphas), dim=0)  # eq. 4, over the l+1 states
            else:
                s = head.fixed_scores.float().clone()
            A = sum(s[i] * H for i, H in enumerate(Hs))  # eq. 5
            ss.append(s)
        read = (lambda x: x) if per_token else (lambda x: x[0])  # every token, or the first
        if not fusion:
            cs.append(read(A))
            continue
        M = torch.cat([R, A, R + A, R * A], dim=-1)  # eq. 6: (len, 4d)
        if fusion_gru is None:
            cs.append(read(M))  # fusion depth 0
            continue
        F, _ = fusion_gru(M.unsqueeze(0))  # eq. 7: (1, len, 2 h_f)
        cs.append(read(F[0]))  # c = F[0]
    return (cs if per_token else torch.stack(cs)), (torch.stack(ss) if ss else None)


@torch.no_grad()
def reference_output_layer(output: nn.Module, c: Tensor) -> Tensor:
    """eq. 8: q = W2 tanh(W1 c + b1) + b2, written out with the output layer's weights (no dropout)."""
    W1, b1 = output.dense.weight, output.dense.bias
    W2, b2 = output.out.weight, output.out.bias
    return torch.tanh(c @ W1.T + b1) @ W2.T + b2
