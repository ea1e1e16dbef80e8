"""BM25, the lexical baseline of answer ranking, with bm25s over each question's own candidates.

In answer-sentence selection every question comes with its own short list of candidates (WikiQA: the sentences
of one Wikipedia summary), so each question is its own corpus: document frequencies and the average length are
those of that question's passages, and a passage's score never depends on another question's candidates.

Tokenisation (``bm25s.tokenize``, the same for question and passages): lower-cased; tokens are matches of
bm25s' default pattern ``(?u)\\b\\w\\w+\\b`` (runs of two or more word characters, as scikit-learn's
CountVectorizer); bm25s' English stop words removed (``stopwords="en"``; None keeps every token); no stemming
unless ``stemmer`` names a PyStemmer language (``"english"``: the Snowball stemmer; needs ``pip install
PyStemmer``). A question left with no token scores every candidate 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hire.data.ranking import RankingExample

__all__ = ["DEFAULT_SETTINGS", "METHODS", "BM25Settings", "bm25_scores"]

METHODS = ("robertson", "atire", "bm25l", "bm25+", "lucene")  # bm25s' BM25 variants


@dataclass(frozen=True)
class BM25Settings:
    """BM25's parameters: ``k1`` (term-frequency saturation), ``b`` (length normalisation, 0 to 1), ``method``
    (bm25s' variant), ``stemmer`` (a PyStemmer language, or None) and ``stopwords`` (a bm25s stop-word language
    such as ``"en"``, or None).

    ``lucene`` (the default, Lucene's accurate BM25) scores a passage ``d`` of ``|d|`` tokens, among ``N``
    passages of mean length ``avgdl``, as the sum over the question's tokens ``t`` (a repeated one counts again) of
    ``log(1 + (N - df_t + 0.5) / (df_t + 0.5)) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))``, where ``tf`` is
    the count of ``t`` in ``d`` and ``df_t`` the number of passages that hold ``t``.
    """

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stemmer: str | None = None
    stopwords: str | None = "en"

    def __post_init__(self) -> None:
        if not self.k1 >= 0:
            raise ValueError(f"BM25 k1 must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ValueError(f"BM25 b must be between 0 and 1, got {self.b}")
        if self.method not in METHODS:
            raise ValueError(f"unknown BM25 method {self.method!r}; use one of {', '.join(METHODS)}")


def _stemmer(name: str | None) -> Callable[[list[str]], list[str]] | None:
    if name is None:
        return None
    try:
        import Stemmer  # PyStemmer: optional, only for stemming
    except ImportError:
        raise ImportError(f"BM25 stemmer {name!r} needs PyStemmer: pip install PyStemmer") from None
    try:
        return Stemmer.Stemmer(name).stemWords
    except KeyError:
        raise ValueError(f"unknown stemmer language {name!r}; PyStemmer has {Stemmer.algorithms()}") from None


DEFAULT_SETTINGS = BM25Settings()


def bm25_scores(examples: Sequence[RankingExample], settings: BM25Settings = DEFAULT_SETTINGS) -> list[float]:
    """The BM25 score of each candidate (in the examples' order) for its question, with each question's own
    candidates as the corpus (see the module docstring for the tokenisation). Deterministic."""
    import bm25s  # imported here: the lab's baseline only

    stemmer = _stemmer(settings.stemmer)
    stopwords = settings.stopwords or []

    def tokens(texts: list[str]) -> list[list[str]]:
        return bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False)

    questions: dict[str, list[int]] = {}  # qid -> its candidates' positions in examples
    for i, example in enumerate(examples):
        questions.setdefault(example.qid, []).append(i)
    scores = [0.0] * len(examples)
    for positions in questions.values():
        query = tokens([examples[positions[0]].question])[0]
        if not query:
            continue  # nothing to match: every candidate scores 0
        index = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        index.index(tokens([examples[i].passage for i in positions]), show_progress=False)
        for i, score in zip(positions, index.get_scores(query), strict=True):
            scores[i] = float(score)
    return scores
