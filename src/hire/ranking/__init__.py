"""Answer ranking (the lab): baselines and scorers that rank each question's candidate passages.

The data (:mod:`hire.data.ranking`), the TREC files (:mod:`hire.data.trec`) and the metrics
(:func:`hire.metrics.ranking_metrics`) are in the core; this package builds on them. :mod:`hire.ranking.bm25`: the
BM25 baseline.
"""
