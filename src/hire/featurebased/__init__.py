"""Feature-based token tagging (BERT §5.3, Table 7; lab, beyond the core library): a frozen encoder's word
features computed once and cached (:mod:`~hire.lab.words`), the paper's feature sets and HIRE's layer
mix over them (:mod:`~hire.featurebased.rows`), a BiLSTM tagger trained on them
(:mod:`~hire.featurebased.tagger`), and the ``hire features`` command (:mod:`~hire.featurebased.cli`)."""

ROWS = ("embeddings", "second-to-last", "last", "sum-last-4", "concat-last-4", "sum-all", "hire-mix")

__all__ = ["ROWS"]
