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

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence of a time-major ``(T, N, ...)`` tensor within its length; padding stays put.

    The permutation is its own inverse.
    """
    T, N = x.shape[0], x.shape[1]
    index = reversal_index(lengths.to(x.device), T)  # (T, N)
    index = index.view(T, N, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(0, index)


def reversal_index(lengths: Tensor, T: int) -> Tensor:
    """(T, N): the time step each position takes its value from when reversed within its length."""
    t = torch.arange(T, device=lengths.device).unsqueeze(1)  # (T, 1)
    return torch.where(t < lengths, lengths - 1 - t, t)


class _GRURecurrence(torch.autograd.Function):
    """``D`` independent GRU recurrences over precomputed input projections, from a zero state.

    forward(gi (D, T, N, 3h), w_hh (D, 3h, h), b_hn (D, h), last (N,)) -> (outputs (D, T, N, h),
    finals (D, N, h) = outputs[:, last[i], i]), with PyTorch's gate order (r, z, n):
        r = σ(gi_r + W_hr h_{t-1}),  z = σ(gi_z + W_hz h_{t-1}),  n = tanh(gi_n + r * (W_hn h_{t-1} + b_hn)),
        h_t = (1 - z) * n + z * h_{t-1}
    where ``gi`` already holds the input projections plus b_ih and b_hr, b_hz (they only add up).
    The state and the gates stay in at least float32; only the matrix products use ``dtype`` (bf16 under
    autocast, or with bf16 weights). Gradients that are not needed are never materialised: a layer whose
    outputs nobody reads costs no full-size zero gradient.
    """

    @staticmethod
    def forward(ctx, gi: Tensor, w_hh: Tensor, b_hn: Tensor, last: Tensor, dtype: torch.dtype):
        ctx.set_materialize_grads(False)
        D, T, N, G = gi.shape
        h = G // 3
        acc = torch.promote_types(torch.float32, w_hh.dtype)  # the state's dtype: float32 or float64
        bias_n = b_hn.to(acc).unsqueeze(1)  # (D, 1, h)
        w_t = w_hh.transpose(1, 2).to(dtype)  # (D, h, 3h)
        # Everything direction-major, so that the backward's large products read contiguous memory.
        states = torch.empty(D, T + 1, N, h, dtype=acc, device=gi.device)  # states[:, 0]: the zero state
        states[:, 0] = 0
        rz_all = torch.empty(D, T, N, 2 * h, dtype=acc, device=gi.device)
        n_all = torch.empty_like(states[:, 1:])
        ghn_all = torch.empty_like(n_all)  # W_hn h + b_hn
        for t in range(T):
            state = states[:, t]  # (D, N, h)
            gh = torch.bmm(state.to(dtype), w_t)  # (D, N, 3h), in the products' dtype
            gi_t = gi[:, t]  # (D, N, 3h)
            rz = torch.add(gi_t[..., : 2 * h], gh[..., : 2 * h], out=rz_all[:, t]).sigmoid_()
            ghn = torch.add(gh[..., 2 * h :], bias_n, out=ghn_all[:, t])
            n = torch.addcmul(gi_t[..., 2 * h :], rz[..., :h], ghn, out=n_all[:, t]).tanh_()
            torch.lerp(n, state, rz[..., h:], out=states[:, t + 1])  # n + z * (h_prev - n)
        ctx.save_for_backward(w_hh, states, rz_all, n_all, ghn_all, last)
        ctx.dtype, ctx.gi_dtype = dtype, gi.dtype
        finals = states[:, last + 1, torch.arange(N, device=gi.device)]  # (D, N, h)
        return states[:, 1:], finals

    @staticmethod
    def backward(ctx, grad_out: Tensor | None, grad_finals: Tensor | None):  # type: ignore[override]
        w_hh, states, rz_all, n_all, ghn_all, last = ctx.saved_tensors
        dtype = ctx.dtype
        D, T, N, h = n_all.shape
        w = w_hh.to(dtype)  # (D, 3h, h)
        ends: dict[int, list[int]] = {}  # time step -> the sequences whose final state it is
        if grad_finals is not None:
            for i, t in enumerate(last.tolist()):
                ends.setdefault(t, []).append(i)
            ends_idx = {t: torch.tensor(ix, device=w.device) for t, ix in ends.items()}
        # d_gh: gradients of the gate pre-activations' W_hh h (+ b_hn) parts, in the products' dtype; those
        # of the input projections are the same for r and z, and dn (without the factor r) for n.
        d_gh = torch.empty(D, T, N, 3 * h, dtype=dtype, device=w.device)
        d_n = torch.empty(D, T, N, h, dtype=dtype, device=w.device)
        dh = states.new_zeros(D, N, h)
        for t in range(T - 1, -1, -1):
            if grad_out is not None:
                dh.add_(grad_out[:, t])
            if t in ends:
                dh.index_add_(1, ends_idx[t], grad_finals[:, ends_idx[t]].to(dh.dtype))
            n, rz, d_gh_t = n_all[:, t], rz_all[:, t], d_gh[:, t]
            dh_1mz = torch.addcmul(dh, dh, rz[..., h:], value=-1)  # dh (1 - z), through h = n + z (h_prev - n)
            dn = torch.addcmul(dh_1mz, dh_1mz, n * n, value=-1)  # and n = tanh(.)
            d_n[:, t] = dn
            sig = torch.addcmul(rz, rz, rz, value=-1)  # σ' = s (1 - s), for r and z together
            torch.mul(dn * ghn_all[:, t], sig[..., :h], out=d_gh_t[..., :h])  # d r
            torch.mul(dh * (states[:, t] - n), sig[..., h:], out=d_gh_t[..., h : 2 * h])  # d z
            torch.mul(dn, rz[..., :h], out=d_gh_t[..., 2 * h :])  # d (W_hn h + b_hn) = dn * r
            dh = (dh - dh_1mz).add_(torch.bmm(d_gh_t, w))  # dh_prev = z dh + W_hh^T d_gh
        d_gi = torch.cat([d_gh[..., : 2 * h], d_n], dim=-1).to(ctx.gi_dtype)  # (D, T, N, 3h)
        # Weight gradients: one product over all time steps, not one per step.
        flat_prev = states[:, :-1].to(dtype).view(D, T * N, h)  # one copy: slice and cast together
        d_w = torch.bmm(d_gh.view(D, T * N, 3 * h).transpose(1, 2), flat_prev).to(w_hh.dtype)  # (D, 3h, h)
        d_bn = d_gh[..., 2 * h :].sum(dim=(1, 2), dtype=states.dtype).to(w_hh.dtype)  # (D, h)
        return d_gi, d_w, d_bn, None, None


def gru_recurrence(gi: Tensor, w_hh: Tensor, b_hn: Tensor, last: Tensor) -> tuple[Tensor, Tensor]:
    """Run ``D`` GRU recurrences over projected inputs ``gi`` (D, T, N, 3h) that include b_ih, b_hr, b_hz.

    Returns the outputs (D, T, N, h) and the final states (D, N, h) at time ``last`` (N,).
    """
    device = gi.device.type  # the products in autocast's dtype where it is on, else in the weights' own
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else w_hh.dtype
    with torch.autocast(device, enabled=False):
        return _GRURecurrence.apply(gi, w_hh, b_hn, last, dtype)


def gru_first_step(x0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> Tensor:
    """One GRU step from a zero state: (N, F) -> (N, h).

    With h_0 = 0 the product W_hh h_0 vanishes, but it is still formed (N x h x 3h, negligible) so that
    W_hh takes part in the graph: its gradient is then an exact zero rather than missing, which
    distributed data-parallel training requires of every parameter.
    """
    h = b_hh.shape[0] // 3
    gi = F.linear(x0, w_ih, b_ih)
    gi = gi.to(torch.promote_types(gi.dtype, torch.float32))  # (N, 3h)
    gh = F.linear(x0.new_zeros(x0.shape[0], h), w_hh).to(gi.dtype) + b_hh  # W_hh h_0 + b_hh, h_0 = 0
    r = torch.sigmoid(gi[:, :h] + gh[:, :h])
    z = torch.sigmoid(gi[:, h : 2 * h] + gh[:, h : 2 * h])
    n = torch.tanh(gi[:, 2 * h :] + r * gh[:, 2 * h :])
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

    #: On CUDA, run each direction with cuDNN (the default) or, when False, with the batched step loop that
    #: CPUs run (the same arithmetic, rounded differently: cuDNN may use TF32; ``benchmarks/gpu_check.py``
    #: compares the two, ``benchmarks/bench_heads.py --gru loop`` times them).
    cudnn_on_cuda: bool = True

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float = 0.0):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = dropout
        # The parameter container; its own forward is used only by cuDNN on CUDA (per direction).
        self.gru = nn.GRU(input_size, hidden_size, num_layers, bidirectional=True)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> BiGRU:
        """Move or cast as ``nn.Module`` does, then give each GRU weight its own storage again.

        Moved to CUDA, ``nn.GRU`` packs its weights into one cuDNN buffer, each weight a view of part of it.
        This module never uses that buffer (cuDNN runs each direction on the weights as they are), and a tensor
        that covers only part of its storage is refused by safetensors' ``load_model``, which Accelerate's
        ``load_state`` calls when a run resumes: without this, an interrupted HIRE run on a GPU could not resume.
        """
        super()._apply(fn, recurse)
        for p in self.gru.parameters():
            if p.untyped_storage().nbytes() != p.numel() * p.element_size():
                p.data = p.data.clone()
        return self

    def _params(self, layer: int, reverse: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        sfx = f"_l{layer}" + ("_reverse" if reverse else "")
        g = self.gru
        return (getattr(g, "weight_ih" + sfx), getattr(g, "weight_hh" + sfx),
                getattr(g, "bias_ih" + sfx), getattr(g, "bias_hh" + sfx))

    def _run(self, x2: Tensor, layer: int, directions: tuple[bool, ...], last: Tensor) -> tuple[Tensor, Tensor]:
        """One layer's recurrences, inputs (D, T, N, F) already in each direction's time order.

        The input projections of every time step and both directions are one batched product, whose bias
        also carries b_hr and b_hz. Returns the outputs (D, T, N, h) and the final states (D, N, h).
        """
        params = [self._params(layer, rev) for rev in directions]
        w_ih, w_hh, b_ih, b_hh = (torch.stack([p[i] for p in params]) for i in range(4))
        h = self.hidden_size
        D, T, N, F_in = x2.shape
        if not torch.is_autocast_enabled(x2.device.type):
            x2 = x2.to(w_ih.dtype)  # the layer below hands over its float32 states
        bias = b_ih + torch.cat([b_hh[:, : 2 * h], torch.zeros_like(b_hh[:, 2 * h :])], dim=-1)
        gi = torch.baddbmm(bias.unsqueeze(1), x2.reshape(D, T * N, F_in), w_ih.transpose(1, 2))
        return gru_recurrence(gi.view(D, T, N, 3 * h), w_hh, b_hh[:, 2 * h :], last)

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

    def _run_layer(self, layer_in: Tensor, layer: int, index: Tensor, last: Tensor,
                   directions: tuple[bool, ...]) -> tuple[Tensor, Tensor]:
        """(T, N, F) -> outputs (D, T, N, h) of the chosen directions (backward still reversed) and their
        final states (D, N, h). On CUDA, cuDNN runs each direction (the same numbers; faster there than a
        step loop); elsewhere the batched step loop runs both directions together."""
        run = self._run_layer_cudnn if layer_in.is_cuda and self.cudnn_on_cuda else self._run_layer_loop
        return run(layer_in, layer, index, last, directions)

    def _run_layer_loop(self, layer_in: Tensor, layer: int, index: Tensor, last: Tensor,
                        directions: tuple[bool, ...]) -> tuple[Tensor, Tensor]:
        return self._run(self._directions(layer_in, index, directions), layer, directions, last)

    def _run_layer_cudnn(self, layer_in: Tensor, layer: int, index: Tensor, last: Tensor,
                         directions: tuple[bool, ...]) -> tuple[Tensor, Tensor]:
        out = torch.stack([self._run_cudnn(layer_in.gather(0, index.unsqueeze(-1).expand_as(layer_in))
                                           if rev else layer_in, layer, rev) for rev in directions])
        return out, out[:, last, torch.arange(len(last), device=last.device)]

    def forward(self, x: Tensor, lengths: Tensor, first_token_only: bool = False, need_outputs: bool = True,
                ) -> tuple[Tensor | None, Tensor]:
        """x (N, T, F), lengths (N,) -> (last layer's outputs (N, T, 2h), or (N, 1, 2h) with
        ``first_token_only``, or None without ``need_outputs``; final states (N, 2L, h))."""
        T = x.shape[1]
        lengths = lengths.to(x.device)
        last = (lengths - 1).clamp(min=0)
        index = reversal_index(lengths, T)  # (T, N): reversal within each length
        layer_in = x.transpose(0, 1)  # (T, N, F)
        finals: list[Tensor] = []
        for layer in range(self.num_layers):
            if layer > 0:
                layer_in = F.dropout(layer_in, self.dropout, self.training)
            if first_token_only and layer == self.num_layers - 1:
                # Only position 0 is used: the backward direction in full, the forward one for one step.
                first_f = gru_first_step(layer_in[0], *self._params(layer, False))  # (N, h)
                first_b = self._run_layer(layer_in, layer, index, last, (True,))[1][0]  # state at position 0
                finals.append(first_b)
                first = torch.cat([first_f.to(first_b.dtype), first_b], dim=-1)  # (N, 2h)
                return first.unsqueeze(1), torch.stack(finals, dim=1)
            out, fin = self._run_layer(layer_in, layer, index, last, (False, True))  # (2, T, N, h), (2, N, h)
            finals += [fin[0], fin[1]]  # forward final at the last real token, backward at the first
            if layer == self.num_layers - 1 and not need_outputs:
                return None, torch.stack(finals, dim=1)
            out_b = out[1].gather(0, index.unsqueeze(-1).expand_as(out[1]))  # back to the input's order
            layer_in = torch.cat([out[0], out_b], dim=-1)  # (T, N, 2h)
        return layer_in.transpose(0, 1), torch.stack(finals, dim=1)  # (N, T, 2h), (N, 2L, h)
