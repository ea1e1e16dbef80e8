"""Every feature set of a task probed at once, in PyTorch, on the CPU or a GPU.

The feature sets of a task (hidden state x pooling, and the concatenations) share their examples, labels
and folds, so the probes of all of them are one batched problem: the design matrices of the sets of one
width are stacked into ``x`` (S, N, D) and every fit below is a batch of S independent fits (S x C with the
``C`` grid). The protocol and every number's meaning are those of :mod:`hire.probing.classifiers`:

- **logistic regression** on standardised features (``StandardScaler``'s: training mean and population
  standard deviation, constant features left at scale 1), minimising scikit-learn's objective
  ``C * sum_i loss_i + 0.5 * ||W||^2`` (intercept unpenalised), scaled by ``1 / (C n)`` as scikit-learn's
  L-BFGS solver does, with the same stopping rule (largest gradient entry at most ``1e-4``) and iteration
  limit. Two classes: one weight vector and the logistic loss; more: the multinomial (softmax) loss with a
  vector per class. All ``C`` of the grid are solved together (they read ``x`` once per iteration);
- **ridge regression**: the closed form from one eigendecomposition per feature set, ``alpha`` chosen by
  exact leave-one-out error over the grid as ``RidgeCV`` does (first of the grid on ties);
- **MLP** (``ProbeSettings.probe = "mlp"``): SentEval's probe, Linear -> Dropout -> Sigmoid -> Linear,
  Adam, minibatches, early stopping on the selection split (its epoch replaces the choice of ``C``).

Sets are grouped by width (no zero padding) and a group is cut into chunks of at most
:data:`CHUNK_ELEMENTS` feature values, so memory stays bounded on any task.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hire.probing.classifiers import FeatureSet, ProbeSettings, design_matrix, hold_out, scores

TOL = 1e-4  # scikit-learn's LogisticRegression tol: L-BFGS stops when max |gradient| <= TOL
HISTORY = 10  # L-BFGS memory (SciPy's L-BFGS-B default, which scikit-learn uses)
MAX_LINE_SEARCH = 50  # line-search steps before a problem keeps its best step (SciPy's maxls in scikit-learn)
WOLFE_DECREASE, WOLFE_CURVATURE = 1e-4, 0.9  # the strong Wolfe constants (sufficient decrease, curvature)
REFRESH = 50  # iterations between exact recomputations of the logits (they are updated along each step)
HESSIAN_WEIGHT = 0.25  # p (1 - p) at p = 1/2: the logistic loss's curvature at the start, for the preconditioner
GRAM_ROWS = 4096  # rows the preconditioner's X^T X is estimated on
PRECONDITION_MAX_DIM = 4096  # wider sets are solved without the preconditioner (its factor costs D^3)
PRECONDITION_MIN_ROWS = 1.25  # ... and so are sets with fewer rows than this many per feature (see `preconditioner`)
CONSTANT_VARIANCE = 1e-10  # a feature's variance on a row set below this (of unit overall variance): constant
CHUNK_ELEMENTS = 2**28  # feature values per batch of feature sets (1 GiB in float32)
MLP_ROUND_STEPS = 100  # the MLP is scored on the selection split after at least this many steps (whole passes)


# --- standardisation ------------------------------------------------------------------------------------------


def scaler(x: Tensor) -> tuple[Tensor, Tensor]:
    """StandardScaler's mean and scale of ``x`` (S, N, D), each (S, 1, D): the population standard deviation,
    1 where a feature is constant (as scikit-learn does, so that it standardises to 0, not to nan)."""
    mean = x.sum(1, keepdim=True, dtype=torch.float64).div_(x.shape[1]).to(x.dtype)  # (S, 1, D)
    std = (x - mean).pow_(2).mean(1, keepdim=True).sqrt_()
    constant = x.amax(1, keepdim=True) == x.amin(1, keepdim=True)
    return mean, torch.where(constant, torch.ones_like(std), std)


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


# --- logistic regression: every problem of one feature set as a column of one weight matrix ---------------------


@dataclass
class RowSets:
    """The training rows of each fit of one feature set, as 0/1 columns ``masks`` (N, R) over the rows of ``x``,
    with each row set's size and ``StandardScaler`` statistics (mean, scale: (R, D)) of ``x`` on it."""

    masks: Tensor
    counts: Tensor
    mean: Tensor
    scale: Tensor


def row_sets(x: Tensor, rows: Sequence[np.ndarray]) -> RowSets:
    """Masks and standardisation of each row set (indices into ``x``'s rows). ``x`` should be roughly centred
    and scaled already (see :func:`standardise`), so that the statistics lose nothing to rounding in float32.
    A feature constant on a row set gets scale 1, as ``StandardScaler`` gives it (its weight is 0 at the optimum
    whatever the scale: it carries nothing on the training rows)."""
    masks = x.new_zeros(x.shape[0], len(rows))
    for r, idx in enumerate(rows):
        masks[torch.as_tensor(idx, device=x.device, dtype=torch.long), r] = 1
    counts = masks.sum(0)
    mean = (masks.T @ x) / counts[:, None]
    var = (masks.T @ x.square()) / counts[:, None] - mean.square()
    scale = torch.where(var > CONSTANT_VARIANCE, var.clamp(min=0).sqrt(), torch.ones_like(var))
    return RowSets(masks, counts, mean, scale)


def standardise(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x``'s mean and scale (D,) (accumulated in float64; scale 1 for a constant feature): one affine map for
    the whole feature set, which every fit's own standardisation (:func:`row_sets`) then refines exactly."""
    mean = (x.sum(0, dtype=torch.float64) / x.shape[0]).to(x.dtype)
    var = (x - mean).square_().sum(0, dtype=torch.float64) / x.shape[0]
    return mean, torch.where(var > 0, var.sqrt(), torch.ones_like(var)).to(x.dtype)


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
    D above :data:`PRECONDITION_MAX_DIM`, or fewer than :data:`PRECONDITION_MIN_ROWS` rows per feature. Measured on
    the committed probe grid (one thread): with 2,490 rows (RTE) the sets of 1,536 features fitted in half the time
    with it and those of 3,072 in 3.4 times the time; with 3,668 rows (MRPC) those of 3,072 in 2.2 times the time;
    with 3,771 (CR) those of 2,688 in three quarters, and with 8,551 (CoLA) in a quarter. Near one row per feature
    the Gram matrix is close to singular and its factor buys few iterations at the price of D^3 work."""
    n, d = x.shape
    if d > PRECONDITION_MAX_DIM or n < PRECONDITION_MIN_ROWS * d:
        return None
    return Preconditioner(x, seed)


@dataclass
class LogisticFits:
    """P fitted logistic regressions on the raw features of one feature set, each as a linear map to the logits
    of all the task's classes: ``weight`` (P, K, D), ``bias`` (P, K); a class absent from a fit's training rows
    has logit -inf. Prediction is the class of the largest logit (the first on ties: for two classes, the second
    class exactly where its logit is positive, as scikit-learn decides)."""

    weight: Tensor
    bias: Tensor
    converged: Tensor  # (P,) bool
    iterations: Tensor  # (P,) long

    def logits(self, x: Tensor) -> Tensor:
        """(P, K, N) for raw features ``x`` (N, D)."""
        p, k, d = self.weight.shape
        return (self.weight.reshape(p * k, d) @ x.T).view(p, k, -1) + self.bias[..., None]

    def predict(self, x: Tensor, classes: Tensor) -> Tensor:
        """Class ids (P, N)."""
        return classes[self.logits(x).argmax(1)]


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
        self.factor: Tensor | None = None  # one for all problems, at their mean ridge: on the committed grid
        # faster than a factor per problem's C (1.2x to 1.4x, where the problems span the C grid)
        if preconditioner is not None:
            self.factor = preconditioner.factor(float(self.inv_cn.double().mean()) / HESSIAN_WEIGHT)

    def precondition(self, v: Tensor) -> Tensor:
        """``M^-1 v`` for vectors (P, K (D + 1)), ``M`` the Hessian's approximation of :func:`_solve` (identity on
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


def _line_search(phi: Callable[[Tensor, Tensor], tuple[Tensor, Tensor, Tensor]], f0: Tensor, d0: Tensor,
                 t0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Steps ``t`` (P,) meeting the strong Wolfe conditions along each problem's direction, where ``phi(t, cols)``
    gives the objective, its slope and the logits' loss derivative at steps ``t`` of the problems ``cols``: a
    bracketing search with secant steps on the slope (the objectives are convex). Evaluations cost no product
    with ``x`` (the logits move along a line), so the search can be near-exact. Returns the accepted steps (0
    where no step decreased the objective), the objective and the loss derivative (P, K, N) there."""
    cols = torch.arange(len(t0), device=t0.device)
    lo, hi = torch.zeros_like(t0), torch.full_like(t0, float("inf"))
    dlo, dhi = d0.clone(), torch.zeros_like(d0)
    t, step, f_at = t0.clone(), torch.zeros_like(t0), f0.clone()
    resid: Tensor | None = None
    slack = 1e-6 * (f0.abs() + 1e-3)  # float32 rounding of the objective
    for _ in range(MAX_LINE_SEARCH):
        f, df, r = phi(t[cols], cols)
        if resid is None:
            resid = r.clone()
        armijo = f <= f0[cols] + WOLFE_DECREASE * t[cols] * d0[cols] + slack[cols]
        ok = armijo & (df.abs() <= -WOLFE_CURVATURE * d0[cols])
        keep = ok | (armijo & (f < f_at[cols]))  # the best step so far, kept if the search runs out
        step[cols[keep]], f_at[cols[keep]] = t[cols[keep]], f[keep]
        resid[cols[keep]] = r[keep]
        c, short, df = cols[~ok], (armijo & (df < 0))[~ok], df[~ok]
        if len(c) == 0:
            break
        lo[c], dlo[c] = torch.where(short, t[c], lo[c]), torch.where(short, df, dlo[c])
        hi[c], dhi[c] = torch.where(short, hi[c], t[c]), torch.where(short, dhi[c], df)
        width = hi[c] - lo[c]
        secant = lo[c] - dlo[c] * width / (dhi[c] - dlo[c])
        secant = torch.where(dhi[c] > dlo[c], torch.minimum(torch.maximum(secant, lo[c] + 0.1 * width),
                                                             hi[c] - 0.1 * width), lo[c] + 0.5 * width)
        t[c] = torch.where(torch.isfinite(hi[c]), secant, 4 * t[c])  # no upper bound yet: expand
        cols = c
    assert resid is not None
    return step, f_at, resid


def _along(problems: _Problems, theta: Tensor, direction: Tensor, z: Tensor, zq: Tensor,
           ) -> Callable[[Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]:
    """``phi(t, cols)``: the objective, its slope and the logits' loss derivative of the problems ``cols`` at
    ``theta + t direction``, from the logits ``z + t zq`` (no product with ``x``)."""
    d = problems.x.shape[1]
    w, dw = theta[..., :d], direction[..., :d]
    reg_ww, reg_wd, reg_dd = (u.double().mul(v.double()).sum((1, 2)) for u, v in ((w, w), (w, dw), (dw, dw)))

    def phi(t: Tensor, cols: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        zc = zq[cols]
        loss, resid = problems.loss(z[cols] + t.to(z.dtype)[:, None, None] * zc)
        weight, inv_cn = problems.weight[cols], problems.inv_cn[cols].double()
        fv = (loss * weight).sum(-1, dtype=torch.float64)
        fv = fv + 0.5 * inv_cn * (reg_ww[cols] + 2 * t * reg_wd[cols] + t.square() * reg_dd[cols])
        dv = ((resid * zc).sum(1) * weight).sum(-1, dtype=torch.float64) + inv_cn * (reg_wd[cols] + t * reg_dd[cols])
        return fv, dv, resid

    return phi


class _State:
    """The L-BFGS state of the problems still running (rows), with their ids among all problems. Besides the
    gradient ``g`` it keeps ``pg = M^-1 g`` and, with each curvature pair, ``py = M^-1 y``: the recursion's
    ``M^-1 q`` is then a combination of stored vectors, and each iteration applies ``M^-1`` once (to the new
    gradient) instead of twice."""

    def __init__(self, ids: Tensor, theta: Tensor, f: Tensor, g: Tensor, pg: Tensor, z: Tensor):
        p, n = theta.shape
        self.ids, self.theta, self.f, self.g, self.pg, self.z = ids, theta, f, g, pg, z
        self.s, self.y, self.py = theta.new_zeros(HISTORY, p, n), theta.new_zeros(HISTORY, p, n), \
            theta.new_zeros(HISTORY, p, n)
        self.rho, self.gamma = theta.new_zeros(HISTORY, p), theta.new_ones(p)
        self.pairs = torch.zeros(p, dtype=torch.long, device=theta.device)

    def select(self, keep: Tensor) -> None:
        for name in ("ids", "theta", "f", "g", "pg", "z", "gamma", "pairs"):
            setattr(self, name, getattr(self, name)[keep])
        self.s, self.y, self.py, self.rho = self.s[:, keep], self.y[:, keep], self.py[:, keep], self.rho[:, keep]

    def direction(self, slot: int) -> Tensor:
        """The two-loop recursion, newest pair first, from ``H0 = gamma M^-1``: ``-H g``. ``M^-1 q`` follows ``q``
        through the first loop (``M^-1`` is linear), from ``pg`` and the stored ``py``."""
        q, pq = self.g.clone(), self.pg.clone()
        alphas = []
        for j in range(HISTORY):
            i = (slot - 1 - j) % HISTORY
            a = self.rho[i] * (self.s[i] * q).sum(1)
            q -= a[:, None] * self.y[i]
            pq -= a[:, None] * self.py[i]
            alphas.append((i, a))
        r = self.gamma[:, None] * pq
        for i, a in reversed(alphas):
            r += self.s[i] * (a - self.rho[i] * (self.y[i] * r).sum(1))[:, None]
        return -r


def _solve(problems: _Problems, theta: Tensor, max_iter: int, tol: float = TOL) -> tuple[Tensor, Tensor, Tensor]:
    """Batched L-BFGS (memory :data:`HISTORY`, as SciPy's) with a strong-Wolfe line search, each problem with its
    own curvature pairs and steps, from ``theta`` (P, K, D + 1); a problem stops when the largest entry of its
    gradient is at most ``tol`` (scikit-learn's rule) or after ``max_iter`` iterations, and its column then leaves
    the products. Each iteration reads ``x`` twice: the direction's logits and the new gradient.
    Hand-written: ``torch.optim.LBFGS`` minimises one function, and a sum of problems would share one line search
    and mix their curvature pairs. Returns theta, converged (P,) and iterations (P,)."""
    p_all, shape = theta.shape[0], theta.shape[1:]
    out, converged = theta.clone(), torch.zeros(p_all, dtype=torch.bool, device=theta.device)
    iterations = torch.zeros(p_all, dtype=torch.long, device=theta.device)
    z = problems.linear(theta)
    f, g = problems.objective(theta, z)
    g = g.reshape(p_all, -1)
    st = _State(torch.arange(p_all, device=theta.device), theta.reshape(p_all, -1).clone(), f, g,
                problems.precondition(g), z)
    slot = 0
    for it in range(max_iter + 1):
        done = st.g.abs().amax(1) <= tol
        converged[st.ids[done]] = True
        if it == max_iter:
            done = torch.ones_like(done)
        if bool(done.any()):
            out[st.ids[done]] = st.theta[done].view(-1, *shape)
            if bool(done.all()):
                break
            st.select(~done)
            problems.select(~done)
        d = st.direction(slot)
        slope = (st.g * d).sum(1)
        restart = (slope >= 0) | (st.pairs == 0)  # no curvature yet, or no descent (rounding): steepest descent
        if bool(restart.any()):
            steepest = -st.pg
            d = torch.where(restart[:, None], steepest, d)
            slope = torch.where(restart, (st.g * steepest).sum(1), slope)
        first = 1 / HESSIAN_WEIGHT if problems.factor is not None else 1.0 / d.norm(dim=1).clamp(min=1.0)
        t0 = torch.where(restart, first, torch.ones_like(slope))
        direction = d.view(-1, *shape)
        zq = problems.linear(direction)
        phi = _along(problems, st.theta.view(-1, *shape), direction, st.z, zq)
        step, f_new, resid = _line_search(phi, st.f, slope.double(), t0.double())
        moved = step > 0
        s = step.to(d.dtype)[:, None] * d
        theta_new = st.theta + s
        st.z = st.z + step.to(zq.dtype)[:, None, None] * zq
        if (it + 1) % REFRESH == 0:  # the logits afresh, against drift from the updates
            st.z = problems.linear(theta_new.view(-1, *shape))
            resid = problems.loss(st.z)[1]
        g_new = problems.gradient(theta_new.view(-1, *shape), resid).reshape(len(d), -1)
        pg_new = problems.precondition(g_new)  # the iteration's one application of M^-1
        y, py = g_new - st.g, pg_new - st.pg
        sy = (s * y).sum(1)
        pair = moved & (sy > 1e-10 * s.norm(dim=1) * y.norm(dim=1))
        st.s[slot] = torch.where(pair[:, None], s, torch.zeros_like(s))
        st.y[slot] = torch.where(pair[:, None], y, torch.zeros_like(y))
        st.py[slot] = torch.where(pair[:, None], py, torch.zeros_like(py))
        st.rho[slot] = torch.where(pair, 1.0 / sy, torch.zeros_like(sy))
        st.gamma = torch.where(pair, sy / (y * py).sum(1), st.gamma)
        st.pairs += pair.long()
        slot = (slot + 1) % HISTORY
        iterations[st.ids] += 1
        st.theta, st.g, st.pg, st.f = theta_new, g_new, pg_new, torch.where(moved, f_new, st.f)
        if not bool(moved.all()):  # no step decreased the objective: as good as this precision allows
            out[st.ids[~moved]] = st.theta[~moved].view(-1, *shape)
            if not bool(moved.any()):
                break
            st.select(moved)
            problems.select(moved)
    return out, converged, iterations


def fit_logistic(x: Tensor, y: Tensor, classes: Tensor, rs: RowSets, rowset: Sequence[int], c: Sequence[float],
                 max_iter: int, init: LogisticFits | None = None, preconditioner: Preconditioner | None = None,
                 tol: float = TOL) -> LogisticFits:
    """P logistic regressions on raw features ``x`` (N, D) with labels ``y`` (N,) (ids into ``classes``, the
    task's K classes): problem p fits row set ``rowset[p]`` of ``rs`` with inverse strength ``c[p]``, on the
    features standardised on those rows, as ``StandardScaler`` + ``LogisticRegression`` does. A fit sees only
    the classes present in its rows (two: the logistic loss, more: the multinomial loss, one: that class always);
    ``init`` (P fits) starts the solver from other fits' functions, mapped to this standardisation."""
    p, d, k_all = len(rowset), x.shape[1], len(classes)
    rowset_t = torch.as_tensor(list(rowset), dtype=torch.long, device=x.device)
    c_t = torch.as_tensor(list(c), dtype=torch.float64, device=x.device)
    weight = x.new_zeros(p, k_all, d)
    bias = x.new_full((p, k_all), float("-inf"))
    converged = torch.ones(p, dtype=torch.bool, device=x.device)
    iterations = torch.zeros(p, dtype=torch.long, device=x.device)
    onehot = F.one_hot(y, k_all).to(x.dtype)  # (N, K)
    present = (rs.masks.T @ onehot) > 0  # (R, K): the classes of each row set
    groups: dict[tuple[int, ...], list[int]] = {}
    for j, r in enumerate(rowset):
        groups.setdefault(tuple(present[r].nonzero()[:, 0].tolist()), []).append(j)
    for cls, members in groups.items():
        pp = torch.as_tensor(members, dtype=torch.long, device=x.device)
        cl = torch.as_tensor(cls, dtype=torch.long, device=x.device)
        wg, bg = x.new_zeros(len(members), k_all, d), x.new_full((len(members), k_all), float("-inf"))
        if len(cls) == 1:  # one class: nothing to fit, every prediction is that class
            bg[:, cl] = 0.0
            weight[pp], bias[pp] = wg, bg
            continue
        k = 1 if len(cls) == 2 else len(cls)
        target = (onehot[:, cl[1:]] if k == 1 else onehot[:, cl]).T[None].contiguous()  # (1, K, N)
        problems = _Problems(x, target, k, rs, rowset_t[pp], c_t[pp], preconditioner)
        mean, scale = problems.mean, problems.scale
        theta = x.new_zeros(len(members), k, d + 1)
        if init is not None:
            v, b = init.weight[pp][:, cl], init.bias[pp][:, cl]
            if k == 1:  # two logits -> their difference
                v, b = v[:, 1:] - v[:, :1], b[:, 1:] - b[:, :1]
            ok = torch.isfinite(b).all(1)  # a class the initial fit never saw: start that problem from zero
            theta[ok, :, :d] = (v * scale[:, None])[ok]
            theta[ok, :, d] = (b + (v * mean[:, None]).sum(-1))[ok]
        theta, conv, its = _solve(problems, theta, max_iter, tol)
        v = theta[..., :d] / scale[:, None]
        b = theta[..., d] - (v * mean[:, None]).sum(-1)
        if k == 1:  # logits (0, z) of the two classes
            wg[:, cl[1]], bg[:, cl[0]], bg[:, cl[1]] = v[:, 0], 0.0, b[:, 0]
        else:
            wg[:, cl], bg[:, cl] = v, b
        weight[pp], bias[pp], converged[pp], iterations[pp] = wg, bg, conv, its
    return LogisticFits(weight, bias, converged, iterations)


class _LogisticSet:
    """One feature set's logistic-regression probes under a task's protocol: every fit of the protocol (each
    fold x each C, then the refits) is a column of one batched problem over the set's design matrix. The C grid
    is taken in ascending order whatever order it was given in, so that a tie goes to the smaller C; a refit
    starts from its chosen C's solution on the selection rows."""

    def __init__(self, xs: dict[str, np.ndarray], ys: dict[str, np.ndarray], fit_split: str,
                 metrics: tuple[str, ...], settings: ProbeSettings, device: torch.device):
        self.metrics, self.settings, self.device = metrics, settings, device
        self.c_grid = tuple(sorted(settings.c_grid))
        raw = {s: torch.from_numpy(x).to(device) for s, x in xs.items()}
        mean, scale = standardise(raw[fit_split])
        self.xs = {s: (x - mean).div_(scale) for s, x in raw.items()}
        self.x = self.xs[fit_split]
        self.classes = np.unique(ys[fit_split])
        self.ys = ys
        self.y = torch.as_tensor(np.searchsorted(self.classes, ys[fit_split]), device=device)
        self.classes_t = torch.as_tensor(self.classes, device=device)
        self.not_converged = 0
        self.preconditioner = preconditioner(self.x, settings.seed)

    def fit(self, rs: RowSets, rowset: Sequence[int], c: Sequence[float], init: LogisticFits | None = None,
            ) -> LogisticFits:
        fits = fit_logistic(self.x, self.y, self.classes_t, rs, rowset, c, self.settings.max_iter, init,
                            self.preconditioner, self.settings.tol)
        self.not_converged += int((~fits.converged).sum())
        return fits

    def grid(self, rs: RowSets, rowsets: Sequence[int]) -> list[LogisticFits]:
        """For each C of the grid, the fits of every row set in ``rowsets``: every (C, row set) one problem of a
        single batch, each from zero as scikit-learn fits each C, so that each pass over ``x`` serves all of them
        (on the committed grid 1.3x to 1.8x faster than solving one C after another, each from the previous one's
        solution)."""
        rows = list(rowsets)
        fits = self.fit(rs, rows * len(self.c_grid), [c for c in self.c_grid for _ in rows])
        part = [slice(i * len(rows), (i + 1) * len(rows)) for i in range(len(self.c_grid))]
        return [LogisticFits(fits.weight[s], fits.bias[s], fits.converged[s], fits.iterations[s]) for s in part]

    def choose(self, fits: list[LogisticFits], j: int, x_sel: Tensor, y_sel: np.ndarray) -> int:
        """The index (into the ascending :attr:`c_grid`) of the C whose fit number ``j`` scores best on (x_sel,
        y_sel); ties: the smaller C."""
        values = [scores(self.metrics, f.predict(x_sel, self.classes_t)[j].cpu().numpy(), y_sel)["score"]
                  for f in fits]
        return int(np.argmax(values))

    @staticmethod
    def take(fits: list[LogisticFits], picks: Sequence[int]) -> LogisticFits:
        """Fit number j of ``fits[picks[j]]``, for each j."""
        j = torch.arange(len(picks))
        stack = [torch.stack([getattr(f, name) for f in fits]) for name in ("weight", "bias", "converged",
                                                                           "iterations")]
        picked = [t[torch.as_tensor(list(picks)), j] for t in stack]
        return LogisticFits(*picked)

    def cv(self, folds: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
        y = self.ys["all"]
        parts = [hold_out(train, y[train], False, self.settings.seed) for train, _ in folds]
        rs = row_sets(self.x, [fit for fit, _ in parts] + [train for train, _ in folds])
        nf = len(folds)
        grid = self.grid(rs, range(nf))
        picks = [self.choose(grid, f, self.x[torch.as_tensor(sel, device=self.device)], y[sel])
                 for f, (_, sel) in enumerate(parts)]
        c = [self.c_grid[i] for i in picks]
        final = self.fit(rs, range(nf, 2 * nf), c, self.take(grid, picks))
        pred = np.zeros(len(y), dtype=y.dtype)
        fold_scores = []
        for f, (_, test) in enumerate(folds):
            p = final.predict(self.x[torch.as_tensor(test, device=self.device)], self.classes_t)[f].cpu().numpy()
            pred[test] = p
            fold_scores.append(scores(self.metrics, p, y[test])["score"])
        return {"splits": {"cv": scores(self.metrics, pred, y)}, "fold_std": float(np.std(fold_scores)),
                "chosen": [{"C": float(v)} for v in c]}

    def split(self) -> dict[str, Any]:
        y = self.ys["train"]
        if "test" in self.xs:  # SentEval: choose on dev, report dev and test of that model
            rs = row_sets(self.x, [np.arange(len(y))])
            grid = self.grid(rs, [0])
            pick = self.choose(grid, 0, self.xs["dev"], self.ys["dev"])
            final = grid[pick]
        else:  # choose on a held-out tenth of train, refit on all of it, report dev
            fit, sel = hold_out(np.arange(len(y)), y, False, self.settings.seed)
            rs = row_sets(self.x, [fit, np.arange(len(y))])
            grid = self.grid(rs, [0])
            pick = self.choose(grid, 0, self.x[torch.as_tensor(sel, device=self.device)], y[sel])
            final = self.fit(rs, [1], [self.c_grid[pick]], grid[pick])
        splits = {s: scores(self.metrics, final.predict(x, self.classes_t)[0].cpu().numpy(), self.ys[s])
                  for s, x in self.xs.items() if s != "train"}
        return {"splits": splits, "chosen": [{"C": float(self.c_grid[pick])}]}


# --- ridge regression ---------------------------------------------------------------------------------------------


def _gram(z: Tensor, rows: bool) -> Tensor:
    """``z z^T`` (``rows``) or ``z^T z`` of each matrix of ``z`` (S, N, D). On the CPU through NumPy, whose product
    of a matrix with its own transpose is one symmetric rank-k update (half the multiply-adds of ``torch.bmm``)."""
    if z.device.type != "cpu":
        return torch.bmm(z, z.transpose(1, 2)) if rows else torch.bmm(z.transpose(1, 2), z)
    return torch.from_numpy(np.stack([m @ m.T if rows else m.T @ m for m in z.numpy()]))


def _eigh(a: Tensor) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) and eigenvectors of the symmetric matrices ``a`` (S, M, M). On the CPU through
    SciPy's LAPACK, faster there than ``torch.linalg.eigh`` on the CPUs we measured; elsewhere torch's."""
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
    decomposing K once for a grid of six): with ``c = (K + alpha I)^-1 y``, the residual is ``alpha c`` and the
    hat diagonal ``1/n + 1 - alpha [(K + alpha I)^-1]_ii``, and ``W = X^T c``. The leave-one-out residual is the
    residual over ``1 - h_ii``."""
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


# --- MLP ------------------------------------------------------------------------------------------------------------


@dataclass
class MLPProbe:
    """S one-hidden-layer MLPs (SentEval's probe) on standardised inputs: Linear -> Dropout -> Sigmoid -> Linear."""

    mean: Tensor
    scale: Tensor
    params: list[Tensor]  # w1 (S, D, H), b1 (S, 1, H), w2 (S, H, K), b2 (S, 1, K)
    classes: Tensor | None  # class ids of the K outputs; None: regression (K = 1, standardised target)
    target: tuple[float, float] = (0.0, 1.0)  # regression: the target's mean and scale

    def forward(self, z: Tensor, dropout: float = 0.0, generator: torch.Generator | None = None) -> Tensor:
        w1, b1, w2, b2 = self.params
        h = torch.baddbmm(b1, z, w1)
        if dropout > 0:
            keep = torch.rand(h.shape, generator=generator, device=h.device, dtype=h.dtype) >= dropout
            h = h * keep / (1 - dropout)
        return torch.baddbmm(b2, torch.sigmoid(h), w2)  # (S, N, K)

    def predict(self, x: Tensor) -> Tensor:
        """Class ids or values (S, 1, N)."""
        out = self.forward((x - self.mean) / self.scale)
        if self.classes is None:
            return (out[..., 0] * self.target[1] + self.target[0])[:, None]
        return self.classes[out.argmax(-1)][:, None]


def fit_mlp(x: Tensor, y: Tensor, x_sel: Tensor, y_sel: Tensor, score: Callable[[np.ndarray, np.ndarray], float],
            regression: bool, settings: ProbeSettings) -> tuple[MLPProbe, list[int]]:
    """S MLPs trained with Adam on minibatches of (x, y), each kept at its epoch of best ``score`` on the
    selection split (x_sel, y_sel), scored after every :data:`MLP_ROUND_STEPS` steps or more (whole passes, as
    SentEval's ``epoch_size``); training stops when no set improved for ``mlp_patience`` such rounds or after
    exactly ``mlp_max_epochs`` passes (the last round is cut short to end there). Returns the probes and each
    set's best number of passes."""
    s, n, d = x.shape
    mean, scale = scaler(x)
    z, z_sel = (x - mean) / scale, (x_sel - mean) / scale
    generator = torch.Generator(device=x.device).manual_seed(settings.seed)
    if regression:
        classes, target, k = None, (float(y.double().mean()), float(y.double().std().clamp(min=1e-12))), 1
        y_fit = ((y.double() - target[0]) / target[1]).to(x.dtype)
    else:
        classes, y_fit = torch.unique(y, return_inverse=True)
        target, k = (0.0, 1.0), len(classes)
    h = settings.mlp_hidden

    def uniform(shape: tuple[int, ...], fan_in: int) -> Tensor:  # nn.Linear's initialisation
        bound = 1.0 / fan_in**0.5
        return (torch.rand(shape, generator=generator, device=x.device, dtype=x.dtype) * 2 - 1) * bound

    params = [uniform((s, d, h), d), uniform((s, 1, h), d), uniform((s, h, k), h), uniform((s, 1, k), h)]
    for p in params:
        p.requires_grad_(True)
    model = MLPProbe(mean, scale, params, classes, target)
    optimizer = torch.optim.Adam(params, lr=settings.mlp_lr)
    best = [p.detach().clone() for p in params]
    best_score, best_epoch = np.full(s, -np.inf), [0] * s
    y_sel_np, waited = y_sel.cpu().numpy(), 0
    steps = -(-n // settings.mlp_batch_size)  # per pass over the data
    passes = -(-MLP_ROUND_STEPS // steps)  # passes between evaluations: small data sets take several
    rounds = [*range(passes, settings.mlp_max_epochs, passes), settings.mlp_max_epochs]  # passes done at each score
    for previous, epoch in itertools.pairwise([0, *rounds]):
        for _ in range(epoch - previous):
            order = torch.randperm(n, generator=generator, device=x.device)
            for start in range(0, n, settings.mlp_batch_size):
                rows = order[start : start + settings.mlp_batch_size]
                out = model.forward(z[:, rows], settings.mlp_dropout, generator)  # (S, B, K)
                if regression:
                    loss = F.mse_loss(out[..., 0], y_fit[rows].expand(s, -1), reduction="sum") / len(rows)
                else:  # a sum of the sets' mean losses: each set's gradient is its own
                    loss = F.cross_entropy(out.reshape(-1, k), y_fit[rows].repeat(s), reduction="sum") / len(rows)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            pred = MLPProbe(mean, scale, [p.detach() for p in params], classes, target).predict(x_sel)[:, 0]
            pred_np = pred.cpu().numpy()
            improved = False
            for i in range(s):
                value = score(pred_np[i], y_sel_np)
                if value > best_score[i]:
                    best_score[i], best_epoch[i], improved = value, epoch, True
                    for b, p in zip(best, params, strict=True):
                        b[i] = p[i].detach()
        waited = 0 if improved else waited + 1
        if waited >= settings.mlp_patience:
            break
    del z_sel
    return MLPProbe(mean, scale, best, classes, target), best_epoch


# --- the protocol, batched --------------------------------------------------------------------------------------


class _Batch:
    """The ridge or MLP probes of one chunk of feature sets (their design matrices stacked), under one task's
    protocol."""

    def __init__(self, metrics: tuple[str, ...], regression: bool, settings: ProbeSettings, device: torch.device):
        self.metrics, self.regression, self.settings, self.device = metrics, regression, settings, device

    def score(self, pred: np.ndarray, y: np.ndarray) -> float:
        return scores(self.metrics, pred, y)["score"]

    def choose(self, x: Tensor, y: np.ndarray, x_sel: Tensor, y_sel: np.ndarray,
               ) -> tuple[Any, list[dict[str, Any]]]:
        """Each set's MLP, early-stopped on the selection split (x_sel, y_sel), trained on (x, y)."""
        probe, epochs = fit_mlp(x, torch.as_tensor(y, device=self.device), x_sel,
                                torch.as_tensor(y_sel, device=self.device), self.score, self.regression, self.settings)
        return probe, [{"epochs": e} for e in epochs]

    def choose_and_refit(self, x: Tensor, y: np.ndarray) -> tuple[Any, list[dict[str, Any]]]:
        """Ridge: one fit, alpha by leave-one-out. MLP: trained on nine tenths of (x, y), early-stopped on the
        held-out tenth (it keeps that model: its epoch is tied to the data seen)."""
        if self.settings.probe == "linear":
            probe, best = fit_ridge(x, torch.as_tensor(y, device=self.device), self.settings.alpha_grid)
            return probe, [{"alpha": float(self.settings.alpha_grid[b])} for b in best.cpu().numpy()]
        fit_rows, sel_rows = hold_out(np.arange(len(y)), y, self.regression, self.settings.seed)
        fit_t, sel_t = (torch.as_tensor(r, device=self.device) for r in (fit_rows, sel_rows))
        return self.choose(x[:, fit_t], y[fit_rows], x[:, sel_t], y[sel_rows])

    def cv(self, x: Tensor, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
        s = x.shape[0]
        pred = np.zeros((s, len(y)), dtype=y.dtype)
        fold_scores: list[list[float]] = [[] for _ in range(s)]
        chosen: list[list[dict[str, Any]]] = [[] for _ in range(s)]
        for train, test in folds:
            probe, picks = self.choose_and_refit(x[:, torch.as_tensor(train, device=self.device)], y[train])
            p = probe.predict(x[:, torch.as_tensor(test, device=self.device)])[:, 0].cpu().numpy()
            pred[:, test] = p
            for i in range(s):
                fold_scores[i].append(self.score(p[i], y[test]))
                chosen[i].append(picks[i])
        return [{"splits": {"cv": _scores_of(self.metrics, pred[i], y)}, "fold_std": float(np.std(fold_scores[i])),
                 "chosen": chosen[i]} for i in range(s)]

    def split(self, xs: dict[str, Tensor], ys: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        if "test" in xs and not self.regression and self.settings.probe == "mlp":  # choose on dev (SentEval)
            probe, chosen = self.choose(xs["train"], ys["train"], xs["dev"], ys["dev"])
        else:  # choose on a held-out tenth of train, refit on all of it, report dev
            probe, chosen = self.choose_and_refit(xs["train"], ys["train"])
        preds = {name: probe.predict(xs[name])[:, 0].cpu().numpy() for name in xs if name != "train"}
        return [{"splits": {name: _scores_of(self.metrics, p[i], ys[name]) for name, p in preds.items()},
                 "chosen": [chosen[i]]} for i in range(len(chosen))]


def _scores_of(metrics: tuple[str, ...], pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    return scores(metrics, pred, y)


def _width(features: dict[str, tuple[np.ndarray, np.ndarray | None]], fs: FeatureSet) -> int:
    a, b = next(iter(features.values()))
    return len(fs.layers) * a.shape[3] * (1 if b is None else 4)


def chunks(features: dict[str, tuple[np.ndarray, np.ndarray | None]], sets: Sequence[FeatureSet],
           budget: int = CHUNK_ELEMENTS) -> list[list[int]]:
    """Indices of ``sets`` batched together: the same width, at most ``budget`` feature values per batch (at
    least one set)."""
    examples = sum(len(a) for a, _ in features.values())
    groups: dict[int, list[int]] = {}
    for i, fs in enumerate(sets):
        groups.setdefault(_width(features, fs), []).append(i)
    out = []
    for width, members in groups.items():
        per = max(1, budget // (examples * width))
        out += [members[j : j + per] for j in range(0, len(members), per)]
    return out


def probe_feature_sets(features: dict[str, tuple[np.ndarray, np.ndarray | None]], labels: dict[str, np.ndarray],
                       sets: Sequence[FeatureSet], metrics: tuple[str, ...], regression: bool,
                       settings: ProbeSettings, folds: list[tuple[np.ndarray, np.ndarray]] | None = None,
                       device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                       progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Scores of every feature set in ``sets``, in their order, each as
    :func:`probe_feature_set` gives it. ``features`` maps each split to its ``(a, b)``
    arrays; ``folds`` is given for cross-validation (split ``all``); ``progress(k)`` is called as each batch of
    k sets is done. Logistic regressions are fitted one feature set at a time (all of its fits at once); ridge
    and MLP probes of a chunk of sets of one width at once (``dtype``: theirs)."""
    dev = torch.device(device)
    results: list[dict[str, Any] | None] = [None] * len(sets)

    def record(fs: FeatureSet, dim: int, result: dict[str, Any], missed: int) -> dict[str, Any]:
        return {"row": fs.row, "layers": list(fs.layers), "pooling": fs.pooling, "dim": dim, **result,
                "not_converged": missed}

    if not regression and settings.probe == "linear":
        fit_split = "all" if folds is not None else "train"
        for i, fs in enumerate(sets):
            xs = {split: design_matrix(a, b, fs) for split, (a, b) in features.items()}
            probe = _LogisticSet(xs, labels, fit_split, metrics, settings, dev)
            result = probe.cv(folds) if folds is not None else probe.split()
            results[i] = record(fs, int(xs[fit_split].shape[1]), result, probe.not_converged)
            del xs, probe
            if progress is not None:
                progress(1)
        return [r for r in results if r is not None]
    for chunk in chunks(features, sets):
        xs = {split: torch.from_numpy(np.stack([design_matrix(a, b, sets[i]) for i in chunk])).to(dev, dtype)
              for split, (a, b) in features.items()}  # (S, N, D) per split
        batch = _Batch(metrics, regression, settings, dev)
        rows = batch.cv(xs["all"], labels["all"], folds) if folds is not None else batch.split(xs, labels)
        for j, i in enumerate(chunk):
            results[i] = record(sets[i], int(xs[next(iter(xs))].shape[2]), rows[j], 0)
        del xs
        if progress is not None:
            progress(len(chunk))
    return [r for r in results if r is not None]


def probe_feature_set(features: dict[str, tuple[np.ndarray, np.ndarray | None]], labels: dict[str, np.ndarray],
                      fs: FeatureSet, metrics: tuple[str, ...], regression: bool, settings: ProbeSettings,
                      folds: list[tuple[np.ndarray, np.ndarray]] | None = None, device: str = "cpu",
                      ) -> dict[str, Any]:
    """Scores of one feature set (:func:`probe_feature_sets` fits many at once). ``features``
    maps each split to its ``(a, b)`` arrays; ``folds`` is given for cross-validation (split ``all``)."""
    return probe_feature_sets(features, labels, [fs], metrics, regression, settings, folds, device)[0]
