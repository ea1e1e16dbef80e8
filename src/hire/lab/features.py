"""Pooled hidden-state features of a frozen encoder, computed once and cached.

A split's features are an array ``(N, l + 1, 4, d)``: for each example, each hidden state ``H_0 .. H_l``
and each pooling of :data:`~hire.lab.pooling.POOLINGS`. Sentence pairs are encoded one sentence at
a time, as the layer-wise study does (``u`` from the first sentence, ``v`` from the second); the probe
combines them later as ``(u, v, u * v, |u - v|)``.

**Cache.** ``<cache_dir>/<task>-<split>-<key>.npz`` (NumPy, uncompressed) holds ``a`` (and ``b`` for
pairs) and the key; ``<...>.json`` beside it says in words what was encoded. The key is the SHA-256 of
the encoder's fingerprint (every file it is loaded from, by content: weights, configuration, tokenizer),
the texts encoded (so any change to a data file's sentences, the text columns or the subset of rows
invalidates it, while a change to labels alone does not), the maximum length, the forward precision
and the stored dtype. Features are stored as float16 by default: half the disk and memory, and far
below what a standardised linear probe can tell apart (a bf16 forward pass is coarser still);
``--cache_dtype float32`` keeps them exact. Files are written to a temporary name and renamed, so an
interrupted run never leaves a half-written file under a valid name.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
import zipfile
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from hire.data.batching import Collator, LengthGroupedBatches, encode
from hire.data.examples import Example
from hire.lab.files import atomic_write
from hire.lab.pooling import POOLINGS, pool_hidden_states
from hire.lab.sources import EncoderSource
from hire.model.encoder import Encoder

FORMAT_VERSION = 1
_DTYPES = {"float16": np.float16, "float32": np.float32}


def default_cache_dir() -> Path:
    """``$HIRE_FEATURE_CACHE``, else ``$XDG_CACHE_HOME/hire/features`` (``~/.cache/hire/features``)."""
    if os.environ.get("HIRE_FEATURE_CACHE"):
        return Path(os.environ["HIRE_FEATURE_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hire" / "features"


@dataclass(frozen=True)
class FeatureSettings:
    max_length: int = 128
    batch_size: int = 64
    precision: str = "no"  # resolved: "no", "bf16" or "fp16"
    dtype: str = "float16"  # stored dtype
    device: str = "cpu"


@dataclass
class SplitFeatures:
    a: np.ndarray  # (N, l + 1, 4, d): the (first) sentence
    b: np.ndarray | None  # (N, l + 1, 4, d): the second sentence of a pair, else None
    cached: bool  # True when read from the cache
    encode_seconds: float  # this call's encoding time (0 when cached)
    path: Path
    cut: int = 0  # how many texts were longer than max_length tokens, and cut short


def texts_of(examples: list[Example]) -> tuple[list[str], list[str] | None]:
    first = [e.text_a for e in examples]
    pair = any(e.text_b is not None for e in examples)
    return first, ([e.text_b or "" for e in examples] if pair else None)


def cache_key(fingerprint: str, texts: tuple[list[str], list[str] | None], settings: FeatureSettings) -> str:
    digest = hashlib.sha256()
    header = {"version": FORMAT_VERSION, "encoder": fingerprint, "max_length": settings.max_length,
              "precision": settings.precision, "dtype": settings.dtype, "poolings": POOLINGS,
              "pair": texts[1] is not None, "examples": len(texts[0])}
    digest.update(json.dumps(header, sort_keys=True).encode())
    for side in texts:
        for text in side or []:
            digest.update(text.encode())
            digest.update(b"\0")
    return digest.hexdigest()


def name_slug(text: str) -> str:
    """``text`` as part of a cache file's name: every character other than a letter, a digit, ``-``, ``_`` or ``.``
    replaced by ``-``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def _read_cache(path: Path, key: str) -> dict[str, np.ndarray] | None:
    """The arrays of a cache file whose stored key is ``key``; None for a missing or unreadable file."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key:
                return None
            return {name: data[name] for name in data.files if name != "key"}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
        return None  # damaged: computed again and replaced


@torch.inference_mode()
def encode_texts(encoder: Encoder, tokenizer: PreTrainedTokenizerBase, texts: list[str],
                 settings: FeatureSettings, desc: str = "encoding") -> np.ndarray:
    """Pooled features ``(N, l + 1, 4, d)`` of ``texts``, longest batches first (length-grouped, so
    little padding, and an out-of-memory error shows at once), under autocast where asked for."""
    examples = [Example(str(i), text) for i, text in enumerate(texts)]
    encoded = encode(examples, tokenizer, settings.max_length, None, labelled=False)
    batches = LengthGroupedBatches(encoded.lengths, settings.batch_size, shuffle=False)
    loader = DataLoader(encoded, batch_sampler=batches, collate_fn=Collator(tokenizer.pad_token_id))
    device = torch.device(settings.device)
    encoder = encoder.to(device).eval()
    out = np.empty((len(texts), encoder.num_hidden_states, len(POOLINGS), encoder.hidden_size),
                   dtype=_DTYPES[settings.dtype])
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(settings.precision)
    autocast = torch.autocast(device.type, dtype=half) if half is not None else nullcontext()
    with autocast:
        for batch in tqdm(loader, desc=desc, unit="batch", dynamic_ncols=True):
            enc = encoder(batch["input_ids"].to(device), batch["attention_mask"].to(device),
                          batch["token_type_ids"].to(device) if "token_type_ids" in batch else None)
            pooled = pool_hidden_states(enc.hidden_states, enc.mask)  # (B, l + 1, 4, d)
            out[batch["index"].numpy()] = pooled.cpu().numpy()
    return out


def count_cut(tokenizer: PreTrainedTokenizerBase, texts: list[str], max_length: int) -> int:
    """How many of ``texts`` do not fit ``max_length`` tokens with the special tokens (:func:`encode_texts` cuts
    those short). Each is tokenized only a token beyond what fits: a 10,000-word text is not tokenized whole."""
    room = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    bare = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=room + 1)["input_ids"]
    return sum(len(ids) > room for ids in bare)


def _count(tokenizer: PreTrainedTokenizerBase, texts: tuple[list[str], list[str] | None], max_length: int) -> int:
    return sum(count_cut(tokenizer, t, max_length) for t in texts if t is not None)


def _warn_cut(cut: int, n: int, task: str, split: str, max_length: int) -> None:
    if cut:
        warnings.warn(f"{task} {split}: {cut} of {n} texts were cut short to fit --max_length {max_length} tokens "
                      "(the features read only their first tokens)", RuntimeWarning, stacklevel=3)


def split_features(source: EncoderSource, fingerprint: str, task: str, split: str, examples: list[Example],
                   settings: FeatureSettings, cache_dir: Path) -> SplitFeatures:
    """The split's features from the cache, or encoded now (and cached). One warning says how many texts were
    longer than ``settings.max_length`` and cut short, read from the cache too."""
    texts = texts_of(examples)
    n = len(texts[0]) + (len(texts[1]) if texts[1] is not None else 0)
    key = cache_key(fingerprint, texts, settings)
    path = cache_dir / f"{name_slug(task)}-{name_slug(split)}-{key[:20]}.npz"
    cached = _read_cache(path, key)
    if cached is not None:
        # A cache written before the count was stored: counted now, from the tokenizer alone (no weights).
        cut = int(cached["cut"]) if "cut" in cached else _count(source.tokenizer(), texts, settings.max_length)
        _warn_cut(cut, n, task, split, settings.max_length)
        return SplitFeatures(cached["a"], cached.get("b"), True, 0.0, path, cut)
    encoder, tokenizer = source.load()
    cut = _count(tokenizer, texts, settings.max_length)
    _warn_cut(cut, n, task, split, settings.max_length)
    start = time.perf_counter()
    arrays = {"a": encode_texts(encoder, tokenizer, texts[0], settings, f"{task} {split}")}
    if texts[1] is not None:
        arrays["b"] = encode_texts(encoder, tokenizer, texts[1], settings, f"{task} {split} (2nd)")
    seconds = time.perf_counter() - start
    atomic_write(path, lambda f: np.savez(f, key=np.array(key), cut=np.array(cut), **arrays))
    meta = {"key": key, **source.describe(), "fingerprint": fingerprint, "task": task, "split": split,
            "examples": len(examples), "shape": list(arrays["a"].shape), "poolings": list(POOLINGS),
            "pair": "b" in arrays, "max_length": settings.max_length, "cut": cut, "precision": settings.precision,
            "dtype": settings.dtype, "device": settings.device, "encode_seconds": round(seconds, 3)}
    atomic_write(path.with_suffix(".json"), lambda f: f.write((json.dumps(meta, indent=2) + "\n").encode()))
    return SplitFeatures(arrays["a"], arrays.get("b"), False, seconds, path, cut)
