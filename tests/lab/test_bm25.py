"""Tests for the BM25 baseline (hire.ranking.bm25): Lucene BM25 by hand, each question its own corpus,
determinism, and the tokenisation it documents."""

from __future__ import annotations

import importlib.util
import math

import pytest

from hire.data.ranking import RankingExample
from hire.ranking.bm25 import BM25Settings, bm25_scores

QUESTION = "What is the capital of Mongolia?"
PASSAGES = ["The capital city is large.", "Mongolia is a country in Asia.", "The capital of the country is big.",
            "Mongolia, MONGOLIA: steppe horses."]


def question(qid: str, text: str, passages: list[str]) -> list[RankingExample]:
    return [RankingExample(qid, text, f"p{i}", passage, None) for i, passage in enumerate(passages)]


def lucene(tf: int, df: int, n: int, length: int, mean_length: float, k1: float = 1.5, b: float = 0.75) -> float:
    """One token's Lucene BM25 term weight, from the formula."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * length / mean_length))


def test_the_passage_with_the_rare_word_ranks_first_with_lucene_values() -> None:
    scores = bm25_scores(question("q", QUESTION, PASSAGES))
    # Tokens without stop words: the question's capital, mongolia ("what" is in no passage); the passages' lengths
    # are 3 (capital city large), 3 (mongolia country asia), 3 (capital country big), 4 (mongolia x2, steppe horses).
    mean = (3 + 3 + 3 + 4) / 4
    expected = [lucene(1, 2, 4, 3, mean), lucene(1, 2, 4, 3, mean), lucene(1, 2, 4, 3, mean),
                lucene(2, 2, 4, 4, mean)]
    assert scores == pytest.approx(expected, rel=1e-6)  # bm25s computes in float32
    rare = question("r", "Which country holds the steppe?", PASSAGES)
    steppe = bm25_scores(rare)
    assert max(range(4), key=steppe.__getitem__) == 3  # "steppe" is in one passage only; "country" in two
    assert steppe[3] > steppe[1] > steppe[0] == 0.0 and steppe[1] == steppe[2]


def test_scores_are_per_question_and_in_the_examples_order() -> None:
    alone = bm25_scores(question("q", QUESTION, PASSAGES))
    # Another question whose passages are full of "mongolia" and "capital": a shared corpus would change the idf.
    other = question("o", "Mongolia capital?", ["Mongolia capital Mongolia."] * 3 + ["Ulaanbaatar."])
    mine = question("q", QUESTION, PASSAGES)
    mixed = [other[0], mine[0], other[1], mine[1], mine[2], other[2], other[3], mine[3]]
    scores = bm25_scores(mixed)
    assert [scores[i] for i in (1, 3, 4, 7)] == alone
    assert [scores[i] for i in (0, 2, 5, 6)] == bm25_scores(other)
    assert bm25_scores(mixed) == scores  # deterministic


def test_tokenisation_settings_and_a_question_of_stop_words() -> None:
    examples = question("q", "Is it that?", ["It is that.", "Another thing."])
    assert bm25_scores(examples) == [0.0, 0.0]  # only stop words: nothing to match
    kept = bm25_scores(examples, BM25Settings(stopwords=None))
    assert kept[0] > 0.0 == kept[1]
    upper = bm25_scores(question("q", "HORSES", ["horses run", "cats sit"]))
    assert upper[0] > 0.0 == upper[1]  # lower-cased
    assert bm25_scores(question("q", "horse", ["horses run", "cats sit"])) == [0.0, 0.0]  # no stemming by default
    flat = bm25_scores(question("q", QUESTION, PASSAGES), BM25Settings(b=0.0))
    assert flat[3] == pytest.approx(lucene(2, 2, 4, 4, 1.0, b=0.0), rel=1e-6)  # b = 0: no length normalisation


def test_bad_settings() -> None:
    for kwargs, words in [({"method": "okapi"}, "method"), ({"b": 1.5}, "b must"), ({"k1": -1.0}, "k1")]:
        with pytest.raises(ValueError, match=words):
            BM25Settings(**kwargs)
    if importlib.util.find_spec("Stemmer") is None:
        with pytest.raises(ImportError, match="PyStemmer"):
            bm25_scores(question("q", "horse", ["horses"]), BM25Settings(stemmer="english"))
    else:
        stemmed = bm25_scores(question("q", "horse", ["horses run", "cats sit"]), BM25Settings(stemmer="english"))
        assert stemmed[0] > 0.0 == stemmed[1]
