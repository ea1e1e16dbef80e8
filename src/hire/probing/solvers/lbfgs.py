"""Batched L-BFGS with a strong-Wolfe line search (:func:`_solve`): every logistic-regression problem of a feature set
(:class:`hire.probing.solvers.objective._Problems`) with its own curvature pairs and steps, at scikit-learn's
stopping rule."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from hire.probing.solvers.objective import HESSIAN_WEIGHT, _Problems

TOL = 1e-4  # scikit-learn's LogisticRegression tol: L-BFGS stops when max |gradient| <= TOL
HISTORY = 10  # L-BFGS memory (SciPy's L-BFGS-B default, which scikit-learn uses)
MAX_LINE_SEARCH = 50  # line-search steps before a problem keeps its best step (SciPy's maxls in scikit-learn)
WOLFE_DECREASE, WOLFE_CURVATURE = 1e-4, 0.9  # the strong Wolfe constants (sufficient decrease, curvature)
REFRESH = 50  # iterations between exact recomputations of the logits (they are updated along each step)


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
