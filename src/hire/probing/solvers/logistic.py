"""Logistic-regression probes (:func:`fit_logistic`): ``StandardScaler`` + ``LogisticRegression``'s fits, many at once
on one feature set's design matrix, each seeing only the classes present in its rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from hire.probing.solvers.lbfgs import TOL, _solve
from hire.probing.solvers.objective import Preconditioner, _Problems
from hire.probing.solvers.standardise import RowSets


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
