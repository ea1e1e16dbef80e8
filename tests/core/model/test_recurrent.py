"""The padding-exact Bi-GRU (``hire.model.recurrent``) against ``torch.nn.GRU`` with packed sequences."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from hire.model.recurrent import BiGRU, reverse_within_length

pytestmark = pytest.mark.usefixtures("single_thread")

F_IN, HIDDEN = 6, 5
LENGTHS = [5, 1, 9, 3, 7]  # mixed, unsorted, one of length 1
T = 11  # two more steps than the longest sequence: every sequence has padding


def real_mask(lengths: list[int], total: int = T) -> torch.Tensor:
    return torch.arange(total).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (N, T)


def make_inputs(seed: int = 0, lengths: list[int] = LENGTHS) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), T, F_IN, generator=g)
    return x, torch.tensor(lengths)


def make_bigru(num_layers: int, dropout: float = 0.0, seed: int = 0) -> BiGRU:
    torch.manual_seed(seed)
    return BiGRU(F_IN, HIDDEN, num_layers, dropout)


def packed_reference(bigru: BiGRU, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.GRU`` with the same weights over a packed batch: outputs (N, T, 2h) (zeros at padding) and
    finals (N, 2L, h)."""
    src = bigru.gru
    gru = nn.GRU(src.input_size, src.hidden_size, src.num_layers, batch_first=True, bidirectional=True)
    gru.load_state_dict(src.state_dict())
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, h_n = gru(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, h_n.transpose(0, 1), gru


def weighted_loss(out: torch.Tensor, finals: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """A loss that reads every real output and every final state, each with its own random weight."""
    g = torch.Generator().manual_seed(42)
    w_out = torch.randn(out.shape, generator=g)
    w_fin = torch.randn(finals.shape, generator=g)
    real = real_mask(lengths.tolist(), out.shape[1]).unsqueeze(-1)
    return (out * w_out * real).sum() + (finals * w_fin).sum()


@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_matches_packed_nn_gru(num_layers):
    bigru = make_bigru(num_layers)
    x, lengths = make_inputs()
    out, finals = bigru(x, lengths)
    ref_out, ref_finals, _ = packed_reference(bigru, x, lengths)
    assert out.shape == (len(LENGTHS), T, 2 * HIDDEN)
    assert finals.shape == (len(LENGTHS), 2 * num_layers, HIDDEN)
    real = real_mask(LENGTHS)
    torch.testing.assert_close(out[real], ref_out[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(finals, ref_finals, atol=1e-5, rtol=0)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_gradients_match_packed_nn_gru(num_layers):
    bigru = make_bigru(num_layers).train()  # dropout 0: train mode is exact
    x, lengths = make_inputs()
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    out, finals = bigru(x1, lengths)
    weighted_loss(out, finals, lengths).backward()
    ref_out, ref_finals, gru = packed_reference(bigru, x2, lengths)
    weighted_loss(ref_out, ref_finals, lengths).backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-4, rtol=0)
    assert x1.grad.abs().sum() > 0
    ref_params = dict(gru.named_parameters())
    for name, p in bigru.gru.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name
        torch.testing.assert_close(p.grad, ref_params[name].grad, atol=1e-4, rtol=0, msg=name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_multi_layer_runs_in_the_parameters_dtype(dtype):
    """A 2-layer BiGRU converted with ``.to(dtype)`` (model.double(), a pure-bf16 model) runs like nn.GRU."""
    bigru = make_bigru(2).to(dtype)
    x, lengths = make_inputs()
    out, finals = bigru(x.to(dtype), lengths)
    ref_out, ref_finals, _ = packed_reference(make_bigru(2), x, lengths)
    real = real_mask(LENGTHS)
    tol = 1e-6 if dtype == torch.float64 else 5e-2
    torch.testing.assert_close(out[real].float(), ref_out[real].detach(), atol=tol, rtol=0)
    torch.testing.assert_close(finals.float(), ref_finals.detach(), atol=tol, rtol=0)


@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_first_token_only(num_layers):
    bigru = make_bigru(num_layers)
    x, lengths = make_inputs()
    with torch.no_grad():
        out, finals = bigru(x, lengths)
        first, first_finals = bigru(x, lengths, first_token_only=True)
    assert first.shape == (len(LENGTHS), 1, 2 * HIDDEN)
    torch.testing.assert_close(first[:, 0], out[:, 0], atol=1e-6, rtol=0)
    # Documented: the finals of every layer below the last, plus the last layer's backward final.
    keep = [*range(2 * num_layers - 2), 2 * num_layers - 1]
    torch.testing.assert_close(first_finals, finals[:, keep], atol=1e-6, rtol=0)


def test_first_token_only_gradients():
    """The shortcut's gradients equal the full run's (the loss reads only position 0)."""
    bigru = make_bigru(2)
    x, lengths = make_inputs()
    grads = []
    for first_only in (False, True):
        bigru.zero_grad()
        xi = x.clone().requires_grad_(True)
        out, _ = bigru(xi, lengths, first_token_only=first_only)
        (out[:, 0] * torch.linspace(-1, 1, 2 * HIDDEN)).sum().backward()
        grads.append([xi.grad, *param_grads(bigru)])
        # Every parameter takes part in the graph (distributed data-parallel training requires it): the
        # last forward W_hh multiplies the zero initial state, so its gradient is an exact zero.
        assert all(p.grad is not None for p in bigru.parameters())
    assert not grads[1][1 + [n for n, _ in bigru.named_parameters()].index("gru.weight_hh_l1")].any()
    for full, short in zip(*grads, strict=True):
        torch.testing.assert_close(short, full, atol=1e-5, rtol=0)


def param_grads(bigru: BiGRU) -> list[torch.Tensor]:
    """Each parameter's gradient; zeros where a parameter was not used (first_token_only's last forward
    W_hh, which multiplies the zero initial state)."""
    return [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in bigru.parameters()]


@pytest.mark.parametrize("first_token_only", [False, True])
def test_padding_never_leaks(first_token_only):
    """Garbage written into the padded positions changes no real output, no final state, no gradient."""
    bigru = make_bigru(2)
    x, lengths = make_inputs()
    pad = ~real_mask(LENGTHS).unsqueeze(-1)
    garbage = torch.where(pad, 1e3 * torch.randn(x.shape, generator=torch.Generator().manual_seed(9)), x)
    results = []
    for inp in (x, garbage):
        bigru.zero_grad()
        inp = inp.clone().requires_grad_(True)
        out, finals = bigru(inp, lengths, first_token_only=first_token_only)
        if first_token_only:
            loss = (out * torch.linspace(-1, 1, 2 * HIDDEN)).sum() + finals.sum()
        else:
            loss = weighted_loss(out, finals, lengths)
        loss.backward()
        results.append((out.detach(), finals.detach(), inp.grad, param_grads(bigru)))
    (out_a, fin_a, gx_a, gp_a), (out_b, fin_b, gx_b, gp_b) = results
    if first_token_only:
        torch.testing.assert_close(out_b, out_a, atol=1e-6, rtol=0)
    else:
        real = real_mask(LENGTHS)
        torch.testing.assert_close(out_b[real], out_a[real], atol=1e-6, rtol=0)
    torch.testing.assert_close(fin_b, fin_a, atol=1e-6, rtol=0)
    torch.testing.assert_close(gx_b, gx_a, atol=1e-5, rtol=0)
    assert gx_a[pad.expand_as(gx_a)].abs().max() == 0  # padding gets no gradient
    for a, b in zip(gp_a, gp_b, strict=True):
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-5)


def test_dropout_between_layers_only():
    """Dropout (as nn.GRU) applies to the input of every layer but the first, in train mode only."""
    x, lengths = make_inputs()
    with torch.no_grad():
        one = make_bigru(1, dropout=0.5).train()
        assert torch.equal(one(x, lengths)[0], one(x, lengths)[0])
        two = make_bigru(2, dropout=0.5).train()
        torch.manual_seed(0)
        a, b = two(x, lengths)[0], two(x, lengths)[0]
        assert not torch.allclose(a, b)
        two.eval()
        ref_out, _, _ = packed_reference(two, x, lengths)
        real = real_mask(LENGTHS)
        torch.testing.assert_close(two(x, lengths)[0][real], ref_out[real], atol=1e-5, rtol=0)


def test_bf16_autocast_on_cpu():
    bigru = make_bigru(2)
    x, lengths = make_inputs()
    out32, fin32 = bigru(x, lengths)
    xb = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out16, fin16 = bigru(xb, lengths)
        first16, _ = bigru(x, lengths, first_token_only=True)
    real = real_mask(LENGTHS)
    torch.testing.assert_close(out16.float()[real], out32[real].detach(), atol=5e-2, rtol=0)
    torch.testing.assert_close(fin16.float(), fin32.detach(), atol=5e-2, rtol=0)
    torch.testing.assert_close(first16.float()[:, 0], out32[:, 0].detach(), atol=5e-2, rtol=0)
    weighted_loss(out16.float(), fin16.float(), lengths).backward()  # the backward pass runs too
    assert xb.grad is not None and torch.isfinite(xb.grad).all()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in bigru.parameters())


def test_reverse_within_length():
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([4, 1, 6, 0, 3])
    x = torch.randn(6, 5, 2, generator=g)  # time-major (T, N, F)
    rev = reverse_within_length(x, lengths)
    assert torch.equal(reverse_within_length(rev, lengths), x)  # its own inverse
    for n, length in enumerate(lengths.tolist()):
        assert torch.equal(rev[:length, n], x[:length, n].flip(0))  # the real part reversed
        assert torch.equal(rev[length:, n], x[length:, n])  # the padding left where it was
    assert not torch.equal(rev, x)
    # Any number of trailing feature dimensions, or none.
    y = torch.arange(12.0).view(4, 3)
    torch.testing.assert_close(reverse_within_length(y, torch.tensor([4, 2, 3])),
                               torch.tensor([[9.0, 4, 8], [6, 1, 5], [3, 7, 2], [0, 10, 11]]))


@pytest.mark.parametrize("first_token_only", [False, True])
def test_cudnn_path_matches_the_step_loop(monkeypatch, first_token_only):
    """The per-direction path that CUDA takes (``torch._VF.gru``, which also runs on CPU) gives the same
    outputs, final states and gradients as the CPU step loop (made to take it here by standing in for the loop)."""
    x, lengths = make_inputs()
    bigru = make_bigru(2)
    fast_out, fast_finals = bigru(x, lengths, first_token_only=first_token_only)
    params = list(bigru.parameters())
    fast_grads = torch.autograd.grad(weighted_loss(fast_out[:, :1], fast_finals, lengths), params, allow_unused=True)
    monkeypatch.setattr(BiGRU, "_run_layer_loop", BiGRU._run_layer_cudnn)
    out, finals = bigru(x, lengths, first_token_only=first_token_only)
    grads = torch.autograd.grad(weighted_loss(out[:, :1], finals, lengths), params, allow_unused=True)
    real = real_mask(LENGTHS)[:, : out.shape[1]]
    torch.testing.assert_close(out[real], fast_out[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(finals, fast_finals, atol=1e-5, rtol=0)
    for a, b, p in zip(grads, fast_grads, params, strict=True):  # an unused weight's gradient is zero
        torch.testing.assert_close(torch.zeros_like(p) if a is None else a,
                                   torch.zeros_like(p) if b is None else b, atol=1e-4, rtol=0)


def _pack_like_cudnn(gru: nn.GRU) -> None:
    """What ``nn.GRU.flatten_parameters`` does on CUDA: every weight becomes a view of one flat buffer."""
    params = [getattr(gru, name) for name in gru._flat_weights_names]
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    for p in params:
        p.data = flat[offset: offset + p.numel()].view_as(p)
        offset += p.numel()


def test_weights_packed_on_a_move_are_unpacked_so_a_checkpoint_loads(monkeypatch, tmp_path):
    """A run on CUDA resumes: Accelerate's load_state loads the model with safetensors' ``load_model``, which
    refuses weights that are views of part of a buffer, as ``nn.GRU`` makes them when it moves to CUDA (played
    here on CPU by packing on every flatten). After a move, each of BiGRU's weights owns its storage."""
    from safetensors.torch import load_model, save_file

    monkeypatch.setattr(nn.GRU, "flatten_parameters", _pack_like_cudnn)
    bare = nn.Sequential(nn.GRU(F_IN, HIDDEN, 2, bidirectional=True)).to(torch.float32)
    path = tmp_path / "model.safetensors"
    save_file({k: v.clone() for k, v in bare.state_dict().items()}, path)
    with pytest.raises(RuntimeError, match="entire storage"):  # the failure this guards against
        load_model(bare, path)

    bigru = make_bigru(2).to(torch.float32)  # packed by the move, then unpacked
    for p in bigru.parameters():
        assert p.untyped_storage().nbytes() == p.numel() * p.element_size()
    saved = {k: torch.randn_like(v) for k, v in bigru.state_dict().items()}
    save_file(saved, path)
    load_model(bigru, path)  # loads, and the weights are the file's
    for name, value in bigru.state_dict().items():
        torch.testing.assert_close(value, saved[name], rtol=0, atol=0)
    x, lengths = make_inputs()
    assert torch.isfinite(bigru(x, lengths)[0]).all()
