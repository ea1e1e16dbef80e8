"""How a run turns words into cached features: the part of its options that :func:`~hire.lab.words.
cached_features` reads, shared by ``hire features`` (:class:`hire.featurebased.grid.FeatureRun`) and ``hire
probe-tokens`` (:class:`hire.probing.tokens.TokenProbeRun`).

Light on purpose: the cache (torch, transformers) is imported only when features are asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from hire.data.examples import TokenExample
    from hire.lab.words import WordFeatures
    from hire.model.encoder import Encoder


@dataclass(kw_only=True)
class WordEncoding:
    """``max_length``: sub-tokens per window (a longer sentence is read in overlapping windows);
    ``encode_batch_size``: windows per encoder forward pass; ``cache_dir``: the feature cache (None:
    :func:`~hire.lab.words.default_cache_dir`). Keyword-only, so that a run's own fields keep their
    places in its constructor."""

    max_length: int = 128
    encode_batch_size: int = 32
    cache_dir: str | None = None

    def cache_folder(self) -> Path:
        """``cache_dir`` with ``~`` expanded, else the default cache folder."""
        from hire.lab.words import default_cache_dir

        return Path(self.cache_dir).expanduser() if self.cache_dir else default_cache_dir()

    def word_features(self, examples: Sequence[TokenExample], tokenizer: PreTrainedTokenizerBase,
                      encoder: Encoder | Callable[[], Encoder], encoder_id: str, name: str, device: str,
                      describe: dict[str, Any] | None = None, subword: str = "first") -> WordFeatures:
        """The split's word features under these settings (:func:`~hire.lab.words.cached_features`:
        found in the cache, or computed with ``encoder`` on ``device`` and cached)."""
        from hire.lab.words import cached_features

        return cached_features(examples, tokenizer, encoder, encoder_id, self.cache_folder(), name, self.max_length,
                               self.encode_batch_size, device, describe, subword)


__all__ = ["WordEncoding"]
