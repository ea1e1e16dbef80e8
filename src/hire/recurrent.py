"""Exact, padding-correct bidirectional GRUs without packed sequences.

A Bi-GRU over a right-padded batch is exact when
- the forward direction runs over the padded tensor as is (it is causal: padding comes after every real
  token, so it never reaches a real position) and its final state is read at the last *real* token;
- the backward direction runs forward over each sequence *reversed within its own length* (the padding
  stays at the end, where it again cannot reach a real position), and the result is reversed back.

PyTorch's ``pack_padded_sequence`` gives the same numbers but is several times slower on CPU. Here the
two directions of a layer run as one recurrence (a batched matrix product per time step), the input
projections of all time steps are one matrix product, and the hand-written backward pass (backprop
through time, written by hand because no library offers a padding-exact batched GRU) leaves the
weight gradients to one large matrix product after the loop. On CUDA, cuDNN runs each direction.

Parameters are kept in an ``nn.GRU`` (bidirectional), so checkpoints use PyTorch's familiar names.

Shapes: ``T`` time steps, ``N`` sequences, ``D`` directions, ``h`` hidden size, ``F`` input features.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence of a time-major ``(T, N, ...)`` tensor within its length; padding stays put.

    The permutation is its own inverse.
    """
    T, N = x.shape[0], x.shape[1]
    t = torch.arange(T, device=x.device).unsqueeze(1)  # (T, 1)
    lens = lengths.to(x.device).unsqueeze(0)  # (1, N)
    index = torch.where(t < lens, lens - 1 - t, t)  # (T, N)
    index = index.view(T, N, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(0, index)


def compute_dtype(device: torch.device, weight_dtype: torch.dtype) -> torch.dtype:
    """The dtype of the matrix products: autocast's where it is on, else the weights' own."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return weight_dtype


class _GRURecurrence(torch.autograd.Function):
    """``D`` independent GRU recurrences over precomputed input projections, from a zero state.

    forward(gi (D, T, N, 3h), w_hh (D, 3h, h), b_hh (D, 3h)) -> outputs (D, T, N, h), with PyTorch's
    gate order (r, z, n):  r = σ(gi_r + gh_r),  z = σ(gi_z + gh_z),  n = tanh(gi_n + r * gh_n),
    h_t = (1 - z) * n + z * h_{t-1},  gh = W_hh h_{t-1} + b_hh.
    The state and the gates stay in at least float32; only the matrix products use ``dtype`` (bf16 under
    autocast, or with bf16 weights).
    """

    @staticmethod
    def forward(ctx, gi: Tensor, w_hh: Tensor, b_hh: Tensor, dtype: torch.dtype) -> Tensor:
        D, T, N, G = gi.shape
        h = G // 3
        acc = torch.promote_types(torch.float32, w_hh.dtype)  # the state's dtype: float32 or float64
        gi = gi.to(acc)
        w_t = w_hh.transpose(1, 2).to(dtype)  # (D, h, 3h)
        bias = b_hh.to(acc).unsqueeze(1)  # (D, 1, 3h)
        # Everything direction-major, so that the backward's large products read contiguous memory.
        states = gi.new_empty(D, T + 1, N, h)  # states[:, 0] is the zero initial state
        states[:, 0] = 0
        rz_all = gi.new_empty(D, T, N, 2 * h)
        n_all = gi.new_empty(D, T, N, h)
        ghn_all = gi.new_empty(D, T, N, h)
        for t in range(T):
            state = states[:, t]  # (D, N, h)
            if dtype == acc:
                gh = torch.baddbmm(bias, state, w_t)  # (D, N, 3h)
            else:
                gh = torch.bmm(state.to(dtype), w_t).to(acc).add_(bias)
            gi_t = gi[:, t]  # (D, N, 3h)
            rz = torch.sigmoid(gi_t[..., : 2 * h] + gh[..., : 2 * h], out=rz_all[:, t])
            ghn = ghn_all[:, t]
            ghn.copy_(gh[..., 2 * h :])
            n = torch.tanh(torch.addcmul(gi_t[..., 2 * h :], rz[..., :h], ghn), out=n_all[:, t])
            torch.lerp(n, state, rz[..., h:], out=states[:, t + 1])  # n + z * (h_prev - n)
        ctx.save_for_backward(w_hh, states, rz_all, n_all, ghn_all)
        ctx.dtype = dtype
        return states[:, 1:]

    @staticmethod
    def backward(ctx, grad_out: Tensor):  # type: ignore[override]
        w_hh, states, rz_all, n_all, ghn_all = ctx.saved_tensors
        dtype = ctx.dtype
        D, T, N, h = n_all.shape
        w = w_hh.to(dtype)  # (D, 3h, h)
        grad_out = grad_out.to(states.dtype)  # (D, T, N, h)
        d_gi = grad_out.new_empty(D, T, N, 3 * h)  # gradients of the gate pre-activations
        d_gh = grad_out.new_empty(D, T, N, 3 * h)
        dh = grad_out.new_zeros(D, N, h)
        for t in range(T - 1, -1, -1):
            dh = dh + grad_out[:, t]
            h_prev, n = states[:, t], n_all[:, t]
            r, z = rz_all[:, t, :, :h], rz_all[:, t, :, h:]
            d_gi_t, d_gh_t = d_gi[:, t], d_gh[:, t]
            dn = torch.mul(dh * (1 - z), 1 - n * n, out=d_gi_t[..., 2 * h :])  # h = n + z (h_prev - n)
            torch.mul(dh * (h_prev - n), z * (1 - z), out=d_gi_t[..., h : 2 * h])  # dz
            torch.mul(dn * ghn_all[:, t], r * (1 - r), out=d_gi_t[..., :h])  # dr
            d_gh_t[..., : 2 * h] = d_gi_t[..., : 2 * h]
            torch.mul(dn, r, out=d_gh_t[..., 2 * h :])
            if dtype == states.dtype:
                dh = torch.baddbmm(dh * z, d_gh_t, w)  # dh_prev = z dh + W_hh^T dgh
            else:
                dh = torch.bmm(d_gh_t.to(dtype), w).to(dh.dtype).add_(dh * z)
        # Weight gradients: one product over all time steps, not one per step.
        flat_dgh = d_gh.view(D, T * N, 3 * h).to(dtype)
        flat_prev = states[:, :-1].reshape(D, T * N, h).to(dtype)
        d_w = torch.bmm(flat_dgh.transpose(1, 2), flat_prev).to(w_hh.dtype)  # (D, 3h, h)
        d_b = d_gh.sum(dim=(1, 2)).to(w_hh.dtype)  # (D, 3h)
        return d_gi, d_w, d_b, None


def gru_recurrence(gi: Tensor, w_hh: Tensor, b_hh: Tensor) -> Tensor:
    """Run ``D`` GRU recurrences over projected inputs ``gi`` (D, T, N, 3h); returns (D, T, N, h)."""
    dtype = compute_dtype(gi.device, w_hh.dtype)
    with torch.autocast(gi.device.type, enabled=False):
        return _GRURecurrence.apply(gi, w_hh, b_hh, dtype)


def gru_first_step(x0: Tensor, w_ih: Tensor, b_ih: Tensor, b_hh: Tensor) -> Tensor:
    """One GRU step from a zero state: (N, F) -> (N, h). With h_0 = 0, W_hh h_0 vanishes."""
    h = b_hh.shape[0] // 3
    gi = F.linear(x0, w_ih, b_ih)
    gi = gi.to(torch.promote_types(gi.dtype, torch.float32))  # (N, 3h)
    r = torch.sigmoid(gi[:, :h] + b_hh[:h])
    z = torch.sigmoid(gi[:, h : 2 * h] + b_hh[h : 2 * h])
    n = torch.tanh(gi[:, 2 * h :] + r * b_hh[2 * h :])
    return (1 - z) * n


class BiGRU(nn.Module):
    """A multi-layer bidirectional GRU that is exact on right-padded batches.

    ``forward(x (N, T, F), lengths (N,))`` returns ``(outputs (N, T, 2h), finals (N, 2L, h))``: the
    last layer's outputs (``[forward; backward]``; padded positions hold unspecified values) and the
    final states in ``nn.GRU``'s ``h_n`` order (layer 1 forward, layer 1 backward, layer 2 forward, ...),
    forward finals taken at each sequence's last real token and backward finals at its first token.

    With ``first_token_only=True`` only ``outputs[:, 0]`` is needed by the caller: the last layer's
    forward direction then runs a single step, and ``outputs`` is ``(N, 1, 2h)``; its forward finals
    are not computed (``finals`` then holds the layers below the last one, plus the last backward).
    Dropout (as in ``nn.GRU``) applies to the inputs of every layer but the first.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float = 0.0):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = dropout
        # The parameter container; its own forward is used only by cuDNN on CUDA (per direction).
        self.gru = nn.GRU(input_size, hidden_size, num_layers, bidirectional=True)

    def _params(self, layer: int, reverse: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        sfx = f"_l{layer}" + ("_reverse" if reverse else "")
        g = self.gru
        return (getattr(g, "weight_ih" + sfx), getattr(g, "weight_hh" + sfx),
                getattr(g, "bias_ih" + sfx), getattr(g, "bias_hh" + sfx))

    def _run(self, x2: Tensor, layer: int, directions: tuple[bool, ...]) -> Tensor:
        """One layer's recurrences, inputs (D, T, N, F) already in each direction's time order.

        The input projections of every time step and both directions are one batched product.
        Returns (D, T, N, h).
        """
        params = [self._params(layer, rev) for rev in directions]
        w_ih, w_hh, b_ih, b_hh = (torch.stack([p[i] for p in params]) for i in range(4))
        D, T, N, F_in = x2.shape
        if not torch.is_autocast_enabled(x2.device.type):
            x2 = x2.to(w_ih.dtype)  # the layer below hands over its float32 states
        gi = torch.baddbmm(b_ih.unsqueeze(1), x2.reshape(D, T * N, F_in), w_ih.transpose(1, 2))
        return gru_recurrence(gi.view(D, T, N, -1), w_hh, b_hh)  # (D, T, N, h)

    def _run_cudnn(self, x: Tensor, layer: int, reverse: bool) -> Tensor:
        """One direction with cuDNN: x (T, N, F) already in its time order -> (T, N, h)."""
        params = list(self._params(layer, reverse))
        h0 = x.new_zeros(1, x.shape[1], self.hidden_size)
        out, _ = torch._VF.gru(x, h0, params, True, 1, 0.0, self.training, False, False)
        return out

    def _directions(self, layer_in: Tensor, index: Tensor, directions: tuple[bool, ...]) -> Tensor:
        """(T, N, F) -> (D, T, N, F): the input as is (forward) and reversed within length (backward)."""
        idx = torch.stack([index if rev else torch.arange(len(index), device=index.device)
                           .unsqueeze(1).expand_as(index) for rev in directions])  # (D, T, N)
        idx = idx.unsqueeze(-1).expand(-1, -1, -1, layer_in.shape[-1])
        return layer_in.unsqueeze(0).expand(len(directions), *layer_in.shape).gather(1, idx)

    def _run_layer(self, layer_in: Tensor, layer: int, index: Tensor,
                   directions: tuple[bool, ...]) -> Tensor:
        """(T, N, F) -> (D, T, N, h) outputs of the chosen directions, backward still reversed."""
        if layer_in.is_cuda:
            return torch.stack([self._run_cudnn(layer_in.gather(0, index.unsqueeze(-1).expand_as(layer_in))
                                                if rev else layer_in, layer, rev) for rev in directions])
        return self._run(self._directions(layer_in, index, directions), layer, directions)

    def forward(self, x: Tensor, lengths: Tensor, first_token_only: bool = False) -> tuple[Tensor, Tensor]:
        N, T, _ = x.shape
        lengths = lengths.to(x.device)
        batch = torch.arange(N, device=x.device)
        last = (lengths - 1).clamp(min=0)
        t = torch.arange(T, device=x.device).unsqueeze(1)
        index = torch.where(t < lengths, lengths - 1 - t, t)  # (T, N): reversal within each length
        layer_in = x.transpose(0, 1)  # (T, N, F)
        finals: list[Tensor] = []
        for layer in range(self.num_layers):
            if layer > 0:
                layer_in = F.dropout(layer_in, self.dropout, self.training)
            if first_token_only and layer == self.num_layers - 1:
                # Only position 0 is used: the backward direction in full, the forward one for one step.
                w_ih_f, _, b_ih_f, b_hh_f = self._params(layer, False)
                first_f = gru_first_step(layer_in[0], w_ih_f, b_ih_f, b_hh_f)  # (N, h)
                first_b = self._run_layer(layer_in, layer, index, (True,))[0, last, batch]  # (N, h)
                finals.append(first_b)
                first = torch.cat([first_f.to(first_b.dtype), first_b], dim=-1)  # (N, 2h)
                return first.unsqueeze(1), torch.stack(finals, dim=1)
            out = self._run_layer(layer_in, layer, index, (False, True))  # (2, T, N, h)
            finals += [out[0, last, batch], out[1, last, batch]]  # forward and backward finals (N, h)
            out_b = out[1].gather(0, index.unsqueeze(-1).expand_as(out[1]))  # back to the input's order
            layer_in = torch.cat([out[0], out_b], dim=-1)  # (T, N, 2h)
        return layer_in.transpose(0, 1), torch.stack(finals, dim=1)  # (N, T, 2h), (N, 2L, h)
