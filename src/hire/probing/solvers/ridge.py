"""Ridge regression probes in closed form: ``alpha`` chosen per feature set by the exact leave-one-out error over the
grid, as ``RidgeCV`` does, in float64 (:func:`fit_ridge`), with the CPU's LAPACK routes for its Gram matrices and
decompositions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hire.probing.solvers.standardise import scaler


@dataclass
class LinearProbe:
    """S x C fitted linear models on standardised inputs: ``weight`` (S, C, D, K) and ``bias`` (S, C, K); K = 1
    for two classes (a logistic regression) and for regression, else one column per class present in training
    (``classes``: their ids; None for regression)."""

    mean: Tensor
    scale: Tensor
    weight: Tensor
    bias: Tensor
    classes: Tensor | None
    converged: Tensor  # (S, C) bool

    def decision(self, x: Tensor) -> Tensor:
        """Logits or regression outputs (S, C, N, K) for raw features ``x`` (S, N, D)."""
        s, c, d, k = self.weight.shape
        z = (x - self.mean) / self.scale
        out = torch.bmm(z, self.weight.permute(0, 2, 1, 3).reshape(s, d, c * k))  # (S, N, C K)
        return out.view(s, -1, c, k).permute(0, 2, 1, 3) + self.bias[:, :, None]

    def predict(self, x: Tensor) -> Tensor:
        """Class ids or values (S, C, N)."""
        out = self.decision(x)
        if self.classes is None:
            return out[..., 0]
        ids = (out[..., 0] > 0).long() if out.shape[-1] == 1 else out.argmax(-1)
        return self.classes[ids]

    def take(self, column: Tensor) -> LinearProbe:
        """Each set's model number ``column[s]`` of its C (S,) -> a probe with C = 1."""
        rows = torch.arange(len(column), device=column.device)
        return LinearProbe(self.mean, self.scale, self.weight[rows, column][:, None],
                           self.bias[rows, column][:, None], self.classes, self.converged[rows, column][:, None])



def _gram(z: Tensor, rows: bool) -> Tensor:
    """``z z^T`` (``rows``) or ``z^T z`` of each matrix of ``z`` (S, N, D). On the CPU through NumPy, whose product
    of a matrix with its own transpose is one symmetric rank-k update (half the multiply-adds of ``torch.bmm``)."""
    if z.device.type != "cpu":
        return torch.bmm(z, z.transpose(1, 2)) if rows else torch.bmm(z.transpose(1, 2), z)
    return torch.from_numpy(np.stack([m @ m.T if rows else m.T @ m for m in z.numpy()]))


def _eigh(a: Tensor) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) and eigenvectors of the symmetric matrices ``a`` (S, M, M). On the CPU through
    SciPy's LAPACK rather than ``torch.linalg.eigh`` (why: docs/benchmarks/cpu-2core-ridge-floor.md); elsewhere
    torch's."""
    if a.device.type != "cpu":
        return torch.linalg.eigh(a)
    import scipy.linalg

    pairs = [scipy.linalg.eigh(m, driver="evd", check_finite=False) for m in a.numpy()]
    return torch.from_numpy(np.stack([w for w, _ in pairs])), torch.from_numpy(np.stack([v for _, v in pairs]))


def _inverse_factor(a: Tensor) -> Tensor:
    """``L^-1`` for the Cholesky factor ``L`` of the positive definite ``a`` (M, M): then ``a^-1 = L^-T L^-1``, its
    diagonal the squared column norms of ``L^-1``. On the CPU through LAPACK's ``potrf`` and ``trtri`` (a third of
    the work of a triangular solve against the identity, which is what torch offers)."""
    if a.device.type != "cpu":
        factor = torch.linalg.cholesky(a)
        return torch.linalg.solve_triangular(factor, torch.eye(len(a), dtype=a.dtype, device=a.device), upper=False)
    from scipy.linalg import lapack

    factor, info = lapack.dpotrf(a.numpy(), lower=1, clean=1)
    if info == 0:
        factor, info = lapack.dtrtri(factor, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"ridge: the kernel matrix plus alpha is not positive definite (LAPACK {info})")
    return torch.from_numpy(factor)


def fit_ridge(x: Tensor, y: Tensor, alphas: Sequence[float]) -> tuple[LinearProbe, Tensor]:
    """Ridge regressions (S of them) on standardised ``x`` (S, N, D), ``alpha`` per set chosen from ``alphas`` by
    the mean squared leave-one-out error (the first of the grid on ties), as ``RidgeCV`` does; returns the
    probe and the index of each set's alpha. Float64: the eigenvalues of a Gram matrix span many decades.

    ``X`` centred (the intercept unpenalised). Where D <= N, from ``X^T X = V diag(l) V^T``: the hat matrix has
    diagonal ``1/n + sum_j Z_ij^2 / (l_j + alpha)`` with ``Z = X V``, for every alpha from one decomposition.
    Where D > N, from the kernel ``K = X X^T``, one Cholesky factor of ``K + alpha I`` per alpha (cheaper than
    decomposing K once for a grid of six: the *one eigh* column of docs/benchmarks/cpu-2core-ridge-floor.md): with
    ``c = (K + alpha I)^-1 y``, the residual is ``alpha c`` and the hat diagonal ``1/n + 1 - alpha [(K + alpha
    I)^-1]_ii``, and ``W = X^T c``. The leave-one-out residual is the residual over ``1 - h_ii``."""
    s, n, d = x.shape
    mean, scale = scaler(x)
    z = ((x - mean) / scale).double()
    z_mean = z.mean(1, keepdim=True)  # zero up to rounding: centred exactly, as RidgeCV centres again
    z = z - z_mean
    yd = y.double()
    y_mean = yd.mean()
    yc = yd - y_mean  # (N,)
    grid = torch.tensor(list(alphas), dtype=torch.float64, device=x.device)
    rows = torch.arange(s, device=x.device)
    if d <= n:
        lam, v = _eigh(_gram(z, rows=False))  # (S, D), (S, D, D)
        lam = lam.clamp(min=0)
        proj = torch.bmm(z, v)  # (S, N, D): Z = X V
        zty = torch.einsum("snj,n->sj", proj, yc)  # (S, J)
        inv = 1.0 / (lam[:, None] + grid[None, :, None])  # (S, A, J)
        fitted = torch.einsum("snj,saj->san", proj, inv * zty[:, None])  # (S, A, N): centred predictions
        hat = 1.0 / n + torch.einsum("snj,saj->san", proj.pow(2), inv)
        loo = ((yc - fitted) / (1 - hat)).pow(2).mean(2)  # (S, A)
        best = loo.argmin(1)  # the first minimum
        weight = torch.einsum("sdj,sj->sd", v, inv[rows, best] * zty)  # W = V diag(1 / (l + alpha)) V^T X^T y
    else:
        kernel = _gram(z, rows=True)  # (S, N, N)
        eye = torch.eye(n, dtype=torch.float64, device=x.device)
        loo, duals = z.new_empty(s, len(alphas)), z.new_empty(s, len(alphas), n)
        for i in range(s):
            for a, alpha in enumerate(alphas):
                inv_factor = _inverse_factor(kernel[i] + alpha * eye)
                c = inv_factor.T @ (inv_factor @ yc)  # (K + alpha I)^-1 y
                residual = alpha * c / (alpha * inv_factor.pow(2).sum(0) - 1.0 / n)
                loo[i, a], duals[i, a] = residual.pow(2).mean(), c
        best = loo.argmin(1)  # the first minimum
        weight = torch.einsum("snd,sn->sd", z, duals[rows, best])  # W = X^T c
    bias = y_mean - (z_mean[:, 0] * weight).sum(1)  # (S,)
    w = weight.to(x.dtype)[:, None, :, None]  # (S, 1, D, 1)
    converged = torch.ones(s, 1, dtype=torch.bool, device=x.device)
    return LinearProbe(mean, scale, w, bias.to(x.dtype)[:, None, None], None, converged), best
