"""The rank probe's encoding: each split's distinct questions and passages encoded apart, once, through the probe's
feature cache (:func:`encode_candidates`), and how many were cut short."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hire.data.examples import Example
from hire.lab.features import FeatureSettings, SplitFeatures, count_cut, split_features
from hire.lab.sources import EncoderSource
from hire.ranking.data import Candidates


def _texts_features(source: EncoderSource, fp: str, task: str, split: str, texts: list[str],
                    settings: FeatureSettings, cache_dir: Path) -> SplitFeatures:
    examples = [Example(str(i), text) for i, text in enumerate(texts)]
    return split_features(source, fp, task, split, examples, settings, cache_dir)


def encode_candidates(source: EncoderSource, fp: str, task: str, candidates: dict[str, Candidates],
                      settings: FeatureSettings, cache_dir: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]],
                                                                            dict[str, Any]]:
    """Each split's question and passage features ``(n, l + 1, 4, d)``, encoded apart (each distinct text once)
    through the probe's cache, and what the encoding cost: seconds, whether from the cache, how many distinct
    texts, and how many of them were cut short to ``settings.max_length`` tokens (``cut``, by split and side)."""
    features, seconds, cached, texts, cut = {}, 0.0, {}, 0, {}
    for split, c in candidates.items():
        q = _texts_features(source, fp, task, f"{split}-questions", c.question_texts, settings, cache_dir)
        p = _texts_features(source, fp, task, f"{split}-passages", c.passage_texts, settings, cache_dir)
        features[split] = (q.a, p.a)
        seconds += q.encode_seconds + p.encode_seconds
        cached[split] = q.cached and p.cached
        texts += len(c.question_texts) + len(c.passage_texts)
        cut[split] = _cut_record(q.cut, p.cut, c)
    return features, {"seconds": round(seconds, 3), "cached": cached, "texts": texts, "cut": cut}


def _cut_record(questions: int, passages: int, c: Candidates) -> dict[str, list[int]]:
    """How many of a split's distinct questions and passages were cut short, each as [cut, of how many]."""
    return {"questions": [questions, len(c.question_texts)], "passages": [passages, len(c.passage_texts)]}


def count_cut_candidates(source: EncoderSource, candidates: dict[str, Candidates], max_length: int,
                         ) -> dict[str, dict[str, list[int]]]:
    """``encode_candidates``' ``cut`` from the tokenizer alone (no weights, no features): for a results file
    written before the count was recorded, whose blocks are all done."""
    tokenizer = source.tokenizer()
    return {split: _cut_record(count_cut(tokenizer, c.question_texts, max_length),
                               count_cut(tokenizer, c.passage_texts, max_length), c)
            for split, c in candidates.items()}
