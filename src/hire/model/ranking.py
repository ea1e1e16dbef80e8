"""The cross-encoder ranker (:class:`HireForRanking`): a (question, passage) pair read together, one relevance score
from the head and output layer, trained pointwise or pairwise."""

from __future__ import annotations

from torch import Tensor

from hire.model.config import HireConfig
from hire.model.losses import check_rank_loss, pairwise_hinge_loss, pointwise_loss
from hire.model.registry import register_model_class
from hire.model.sequence import HireModel


class HireForRanking(HireModel):
    """A :class:`HireModel` with one output, a relevance score per (question, passage) pair; ``labels`` are relevance
    grades (>= 0) and the loss is the configuration's ``task_options["rank_loss"]``: ``pointwise``
    (:func:`pointwise_loss`) or ``pairwise`` (:func:`pairwise_hinge_loss` over the pairs of each question, which
    ``groups`` (B,) names: the same integer for the candidates of one question), with ``rank_margin``."""

    @classmethod
    def check_config(cls, config: HireConfig) -> None:
        """One output (a relevance score) and a loss it knows."""
        if config.num_labels != 1:
            raise ValueError(f"a ranking model has one output (a relevance score), not num_labels={config.num_labels}")
        options = config.task_options
        check_rank_loss(options.get("rank_loss", "pointwise"), options.get("rank_margin", 1.0))

    def check_labels(self, labels: Tensor) -> None:
        if bool((labels < 0).any()):
            raise ValueError(f"labels of a ranker are relevance grades >= 0; got {labels.tolist()[:10]}")

    def loss(self, q: Tensor, labels: Tensor, groups: Tensor | None) -> Tensor:
        options, labels = self.config.task_options, labels.to(q.dtype)
        if options.get("rank_loss", "pointwise") == "pointwise":
            return pointwise_loss(q, labels)
        if groups is None:
            raise ValueError("a pairwise ranker's loss needs groups: the question index of each example")
        return pairwise_hinge_loss(q, labels, groups, float(options.get("rank_margin", 1.0)))


register_model_class("ranking", HireForRanking)
