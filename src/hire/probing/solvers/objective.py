"""The logistic-regression probes' objective, batched (:class:`_Problems`: scikit-learn's, every problem of one
feature set a column of one weight matrix), and its preconditioner (:class:`Preconditioner`); solved by
:func:`hire.probing.solvers.lbfgs._solve`."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hire.probing.solvers.ridge import _gram
from hire.probing.solvers.standardise import RowSets

HESSIAN_WEIGHT = 0.25  # p (1 - p) at p = 1/2: the logistic loss's curvature at the start, for the preconditioner
GRAM_ROWS = 4096  # rows the preconditioner's X^T X is estimated on
PRECONDITION_MAX_DIM = 4096  # wider sets are solved without the preconditioner (its factor costs D^3)
PRECONDITION_MIN_ROWS = 1.25  # ... and so are sets with fewer rows than this many per feature (see `preconditioner`)


class Preconditioner:
    """``M = X^T X / N + (lambda / a) I`` on standardised features, with ``a`` = :data:`HESSIAN_WEIGHT`: the
    logistic loss's Hessian at the start, ``a X^T X / N + lambda I`` (``lambda = 1 / (C n)``), up to a factor.
    Correlated features make that Hessian ill-conditioned and plain L-BFGS slow; started from ``M^-1``, it needs a
    fraction of the iterations. ``X^T X`` is estimated on at most :data:`GRAM_ROWS` rows (it only has to be
    close), and the Cholesky factor is computed once per half decade of ``lambda``, in ``x``'s precision where it
    exists there (it only has to be close too), else in float64."""

    def __init__(self, x: Tensor, seed: int = 0):
        rows = x
        if x.shape[0] > GRAM_ROWS:
            pick = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:GRAM_ROWS]
            rows = x[pick.to(x.device)]
        self.gram = _gram(rows[None], rows=False)[0] / rows.shape[0]
        self.factors: dict[float, Tensor] = {}

    def factor(self, ridge: float) -> Tensor:
        """The Cholesky factor of ``X^T X / N + r I`` for ``r`` near ``ridge``."""
        key = round(2 * float(np.log10(ridge))) / 2
        if key not in self.factors:
            for dtype in dict.fromkeys((self.gram.dtype, torch.float64)):
                m = self.gram.to(dtype, copy=True)
                m.diagonal().add_(10**key)
                factor, info = torch.linalg.cholesky_ex(m)
                if int(info) == 0:
                    break
            else:
                raise np.linalg.LinAlgError(f"probe preconditioner: X^T X / N + {10**key:g} I is not positive definite")
            self.factors[key] = factor.to(self.gram.dtype)
        return self.factors[key]


def preconditioner(x: Tensor, seed: int = 0) -> Preconditioner | None:
    """The :class:`Preconditioner` of standardised features ``x`` (N, D), or None where it costs more than it saves:
    D above :data:`PRECONDITION_MAX_DIM`, or fewer than :data:`PRECONDITION_MIN_ROWS` rows per feature: near one row
    per feature the Gram matrix is close to singular and its factor buys few iterations at the price of D^3 work
    (the timings behind both bounds: docs/benchmarks/cpu-2core-probe-grid-2.md)."""
    n, d = x.shape
    if d > PRECONDITION_MAX_DIM or n < PRECONDITION_MIN_ROWS * d:
        return None
    return Preconditioner(x, seed)


class _Problems:
    """Logistic regressions of one class set, solved together: problem p fits the rows of row set ``rowset[p]``
    with inverse strength ``c[p]``, minimising scikit-learn's objective scaled by ``1 / (C n)``:
    ``mean_i loss_i + ||w||^2 / (2 C n)`` (intercept unpenalised) on the features standardised on those rows.
    Its parameters ``theta`` (P, K, D + 1) are the weights then the intercept in standardised coordinates; the
    standardisation is folded into the products with ``x``, ``X_std w = X (w / s) - (m / s) . w``, so that the
    logits of all problems are one product ``W @ x^T`` and their gradients one ``R @ x`` (every problem reads
    ``x`` in the same pass). K = 1 (logistic loss) for two classes, else the multinomial loss. Logits and loss
    derivatives are (P, K, N)."""

    def __init__(self, x: Tensor, target: Tensor, k: int, rs: RowSets, rowset: Tensor, c: Tensor,
                 preconditioner: Preconditioner | None = None):
        self.x, self.target, self.k = x, target, k  # target: (1, K, N), 0/1
        self.mean, self.scale = rs.mean[rowset], rs.scale[rowset]  # (P, D)
        self.weight = (rs.masks[:, rowset] / rs.counts[rowset]).T.contiguous()  # (P, N): shares of the mean loss
        self.inv_cn = (1.0 / (c * rs.counts[rowset].double())).to(x.dtype)  # (P,)
        self.factor: Tensor | None = None  # one for all problems, at their mean ridge, not one per problem's C
        # (the timing: docs/benchmarks/cpu-2core-probe-grid-2.md)
        if preconditioner is not None:
            self.factor = preconditioner.factor(float(self.inv_cn.double().mean()) / HESSIAN_WEIGHT)

    def precondition(self, v: Tensor) -> Tensor:
        """``M^-1 v`` for vectors (P, K (D + 1)), ``M`` the Hessian's approximation of
        :func:`~hire.probing.solvers.lbfgs._solve` (identity on
        the intercepts); ``v`` itself without one."""
        if self.factor is None:
            return v
        d = self.x.shape[1]
        p = v.shape[0]
        u = v.view(p, self.k, d + 1)
        w = torch.cholesky_solve(u[..., :d].reshape(p * self.k, d).T, self.factor).T.reshape(p, self.k, d)
        return torch.cat([w, u[..., d:]], -1).reshape(p, -1)

    def select(self, keep: Tensor) -> None:
        """Keep only the problems ``keep`` (a mask)."""
        self.mean, self.scale, self.weight = self.mean[keep], self.scale[keep], self.weight[keep]
        self.inv_cn = self.inv_cn[keep]

    def raw(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        """Weights (P, K, D) and bias (P, K) on raw features of parameters (or a direction) ``theta``."""
        d = self.x.shape[1]
        v = theta[..., :d] / self.scale[:, None]
        return v, theta[..., d] - (v * self.mean[:, None]).sum(-1)

    def linear(self, theta: Tensor) -> Tensor:
        """The logits (P, K, N) of parameters ``theta``; of a direction, the logits' change per unit step."""
        v, bias = self.raw(theta)
        p, k, d = v.shape
        return (v.reshape(p * k, d) @ self.x.T).view(p, k, -1) + bias[..., None]

    def loss(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """Each row's loss (P, N) and the loss's derivative in the logits (P, K, N)."""
        if self.k == 1:
            return F.softplus(z[:, 0]) - self.target[:, 0] * z[:, 0], torch.sigmoid(z) - self.target
        return torch.logsumexp(z, 1) - (z * self.target).sum(1), torch.softmax(z, 1) - self.target

    def gradient(self, theta: Tensor, resid: Tensor) -> Tensor:
        """The objective's gradient (P, K, D + 1) from the loss derivative ``resid`` at ``theta``."""
        p, k, n = resid.shape
        d = self.x.shape[1]
        r = resid * self.weight[:, None]
        total = r.sum(-1)  # (P, K)
        rx = (r.view(p * k, n) @ self.x).view(p, k, d)
        gw = (rx - total[..., None] * self.mean[:, None]) / self.scale[:, None] + self.inv_cn[:, None, None] * theta[
            ..., :d]
        return torch.cat([gw, total[..., None]], -1)

    def objective(self, theta: Tensor, z: Tensor) -> tuple[Tensor, Tensor]:
        """Objective (P,) float64 and gradient at ``theta`` with logits ``z``."""
        d = self.x.shape[1]
        loss, resid = self.loss(z)
        f = (loss * self.weight).sum(-1, dtype=torch.float64)
        f = f + 0.5 * self.inv_cn.double() * theta[..., :d].double().square().sum((1, 2))
        return f, self.gradient(theta, resid)
