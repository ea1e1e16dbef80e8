"""SentEval's MLP probe (:func:`fit_mlp`): Linear -> Dropout -> Sigmoid -> Linear, Adam on minibatches, early stopping
on the selection split, every feature set of a chunk trained at once."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hire.probing.classifiers import ProbeSettings
from hire.probing.solvers.standardise import scaler

MLP_ROUND_STEPS = 100  # the MLP is scored on the selection split after at least this many steps (whole passes)


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
