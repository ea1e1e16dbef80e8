"""Answer ranking (the lab): baselines and scorers that rank each question's candidate passages.

The data (:mod:`hire.data.ranking`), the TREC files (:mod:`hire.data.trec`) and the metrics
(:func:`hire.metrics.ranking_metrics`) are in the core; this package builds on them. :mod:`hire.ranking.bm25`: the
BM25 baseline. :data:`SCORERS` and :data:`LOSSES` are here, light, so that checking a command line needs no torch.
"""

SCORERS = ("cosine", "bilinear", "logistic", "mlp")  # how a question's vector and a passage's give a score
LOSSES = ("hinge", "pointwise")  # how the learned scorers are trained

__all__ = ["LOSSES", "SCORERS"]
