"""The options the lab's commands share, each declared once, as small dataclasses that a command's options
dataclass is composed of (its bases; :mod:`hire.options` turns the fields into the command's ``--help``).

- :class:`EncoderList`: ``--encoder``, repeatable or comma-separated, the one spelling of every lab command
  that reads several frozen encoders; ``--encoders`` is its other spelling (an alias: both parse, and add up).
- :class:`EncoderOptions`: those and ``--labels``, the encoders' names in tables and plots.
- :class:`DeviceOption`: ``--device``; :class:`CacheOption`: ``--cache_dir``, the feature cache.
- :class:`LengthOption`: ``--max_length``, where a longer text is cut; :class:`FeatureOptions`: how texts become
  cached pooled states (``hire probe``, ``hire rank-probe``); :class:`WordFeatureOptions`: how words become cached
  word features, a longer sentence read in windows (``hire features``, ``hire probe-tokens``).

Every ``--max_length`` has the core's range (:data:`hire.config.MaxLength`, at least 8 tokens: room for the
special tokens and some text). A dataclass's fields come before those of the class composed of it, in the
reverse order of its bases: a command lists its encoders first by naming :class:`EncoderOptions` last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from hire.config import AtLeast1, MaxLength
from hire.lab.checks import encoders_and_labels, feature_cache, forward_precision, resolve_device
from hire.options import option, split_words

ENCODERS_HELP = ("an encoder, or several comma-separated: hub name, local folder, all-MiniLM-L6-v2, a run folder "
                 "(its best/), a saved model folder (its fine-tuned encoder), or random:<encoder> (its architecture "
                 "with random weights, fixed seed, and its real tokenizer: an untrained twin)")
CACHE_HELP = "feature cache (default: $HIRE_FEATURE_CACHE or ~/.cache/hire/features)"


@dataclass(kw_only=True)
class EncoderList:
    """``--encoder``, repeatable or comma-separated, and its other spelling ``--encoders``."""

    encoder: list[str] = option(ENCODERS_HELP, [])
    encoders: list[str] = option("the same as --encoder (its other spelling; the encoders of both are read)", [])

    ENCODER_OPTION: ClassVar[str] = "--encoder"  # what a message names where no encoder is given

    def encoder_words(self) -> list[str]:
        """The encoders given, under either spelling, in the order given (each spelling's in turn)."""
        return split_words([*self.encoder, *self.encoders])

    def encoder_option(self) -> str:
        """The spelling to name in a message about the encoders: the one given (``--encoder`` where both are),
        else :attr:`ENCODER_OPTION`."""
        if self.encoders and not self.encoder:
            return "--encoders"
        return "--encoder" if self.encoder else self.ENCODER_OPTION


@dataclass(kw_only=True)
class EncoderOptions(EncoderList):
    """``--encoder`` (:class:`EncoderList`) and ``--labels``, one label per encoder."""

    labels: list[str] = option("names for the encoders in tables and plots, comma-separated (default: the "
                               "--encoder values)", [])

    def encoders_and_labels(self) -> tuple[list[str], list[str]]:
        """The encoders and their labels, checked (:func:`hire.lab.checks.encoders_and_labels`)."""
        return encoders_and_labels(self.encoder_words(), self.labels, self.encoder_option())


@dataclass(kw_only=True)
class DeviceOption:
    """``--device``: where the encoder runs and what the command fits on its features trains."""

    device: str = option("cpu, cuda, cuda:1 ... for the encoder and what is fitted on its features (auto: cuda "
                         "where there is one)", "auto")

    def resolved_device(self) -> str:
        """``--device``, checked (:func:`hire.lab.checks.resolve_device`)."""
        return resolve_device(self.device)


@dataclass(kw_only=True)
class CacheOption:
    """``--cache_dir``: the feature cache, shared by every lab command that encodes."""

    cache_dir: str | None = option(CACHE_HELP, None)


@dataclass(kw_only=True)
class LengthOption:
    """``--max_length`` of a command that cuts a longer text."""

    max_length: MaxLength = option("maximum tokens per text encoded (a longer one is cut)", 128)


@dataclass(kw_only=True)
class FeatureOptions(DeviceOption, LengthOption, CacheOption):
    """How ``hire probe`` and ``hire rank-probe`` encode texts into cached pooled states
    (:class:`hire.lab.features.FeatureSettings`): the cache, its precision, the forward passes and the device
    (which fits the probes too)."""

    cache_dtype: Literal["float16", "float32"] = option("stored feature precision (float16: half the space)",
                                                        "float16")
    batch_size: AtLeast1 = option("texts per encoder forward pass", 64)
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = option(
        "encoder forward precision; auto: bf16 where the hardware is fast at it", "auto")

    def encoding(self) -> tuple[str, str, str]:
        """The feature cache folder (:func:`~hire.lab.checks.feature_cache`), the device
        (:func:`~hire.lab.checks.resolve_device`) and the forward precision on it
        (:func:`~hire.lab.checks.forward_precision`), checked."""
        device = self.resolved_device()
        precision = forward_precision(self.mixed_precision, device)
        return feature_cache(self.cache_dir), device, precision


@dataclass(kw_only=True)
class WordFeatureOptions(DeviceOption, CacheOption):
    """How ``hire features`` and ``hire probe-tokens`` encode words into cached word features
    (:class:`hire.lab.encoding.WordEncoding`): a longer sentence is read in overlapping windows."""

    max_length: MaxLength = option("sub-tokens per window (longer sentences: overlapping windows)", 128)
    encode_batch_size: AtLeast1 = option("windows per encoder forward pass", 32)


__all__ = ["CACHE_HELP", "ENCODERS_HELP", "CacheOption", "DeviceOption", "EncoderList", "EncoderOptions",
           "FeatureOptions", "LengthOption", "WordFeatureOptions"]
