"""Word features of a frozen encoder, computed once per data set and kept on disk (BERT §5.3, Table 7).

For every word of every sentence, the hidden states ``H_0 .. H_l`` of the encoder at the word's **first
sub-token** (BERT's choice for its feature-based NER; ``subword="last"``: its last sub-token, ``"mean"``: the mean
of its sub-tokens' states), from :func:`hire.data.tokens.encode_tokens`: a sentence longer than ``max_length`` is
read in overlapping windows and each word is taken from exactly one of them (a word's sub-tokens are never cut
apart by a window).

**Layout.** A split is one folder ``<cache_dir>/<name>-<key[:20]>/`` holding ``features.npy`` (float16,
``(words, l + 1, d)``, all sentences' words one after another), ``offsets.npy`` (int64, ``(sentences + 1,)``:
sentence ``i`` is rows ``offsets[i]:offsets[i + 1]``) and ``meta.json`` (the key and what was encoded, in words).
Both arrays are read back as memory maps, so a split larger than memory trains as well.

**Key.** SHA-256 of the encoder key (its name and the SHA-256 of every file it loads from: weights,
configuration, tokenizer; :func:`encoder_key`) and of the data: every sentence's words, ``max_length``, the
sub-token choice (``subword``) and the tokenizer (its class and its fast tokenizer's full definition). Tags are
not in it: features do not depend on them.

**Atomic.** The folder is written under a temporary name beside it and renamed into place once complete, so a
killed write leaves no folder under a valid name (its ``.tmp-<name>-<pid>-*`` remains are removed by the next
write of the same key once that process is gone), and a cache that is found is read without running (or even
loading) the encoder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from hire.data.examples import TokenExample
from hire.data.tokens import SUBWORD_MODES, TokenCollator, encode_tokens
from hire.lab.features import default_cache_dir, name_slug  # the same cache folder as `hire probe`'s
from hire.model.encoder import Encoder

if TYPE_CHECKING:
    from hire.lab.sources import EncoderSource

FORMAT_VERSION = 1


@dataclass
class WordFeatures:
    """A split's cached word features: ``features[offsets[i]:offsets[i + 1]]`` are sentence ``i``'s words,
    each ``(l + 1, d)``, float16 (memory-mapped)."""

    features: np.ndarray  # (words, l + 1, d)
    offsets: np.ndarray  # (sentences + 1,)
    path: Path
    cached: bool  # read from the cache (the encoder never ran)
    encode_seconds: float  # this call's encoding time (0.0 when cached)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_hidden_states(self) -> int:
        return self.features.shape[1]

    @property
    def hidden_size(self) -> int:
        return self.features.shape[2]

    def sentence(self, i: int) -> np.ndarray:
        return self.features[self.offsets[i]:self.offsets[i + 1]]


def encoder_key(encoder: str | EncoderSource) -> str:
    """The key of an encoder named on the command line (or resolved from it): its name and the SHA-256 of the files
    it is loaded from (:func:`hire.lab.sources.fingerprint`: any change to weights, configuration or tokenizer
    changes it; a ``random:`` twin's covers its configuration, seed and tokenizer)."""
    from hire.lab.sources import fingerprint, resolve_source

    source = resolve_source(encoder) if isinstance(encoder, str) else encoder
    return _sha256({"encoder": source.spec, "files": fingerprint(source)["sha256"]})


def data_key(examples: Sequence[TokenExample], tokenizer: PreTrainedTokenizerBase, max_length: int,
             subword: str = "first") -> str:
    """SHA-256 of the sentences' words, ``max_length``, ``subword`` and the tokenizer's definition."""
    digest = hashlib.sha256()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # the tokenizer itself, not the truncation/padding state its last call left behind
        definition = json.dumps({k: v for k, v in json.loads(backend.to_str()).items()
                                 if k not in ("truncation", "padding")}, sort_keys=True)
    else:
        definition = json.dumps(tokenizer.get_vocab(), sort_keys=True)
    header = {"version": FORMAT_VERSION, "max_length": max_length, "subword": subword,
              "tokenizer": type(tokenizer).__name__, "definition": hashlib.sha256(definition.encode()).hexdigest(),
              "sentences": len(examples)}
    digest.update(json.dumps(header, sort_keys=True).encode())
    for example in examples:
        digest.update("\x1f".join(example.tokens).encode())
        digest.update(b"\x1e")
    return digest.hexdigest()


def _check_subword(subword: str) -> None:
    if subword not in SUBWORD_MODES:
        raise ValueError(f"subword must be one of {list(SUBWORD_MODES)}, not {subword!r}")


def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _alive(pid: str) -> bool:
    """Whether process ``pid`` (as written in a temporary folder's name) still runs on this machine."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _read(folder: Path, key: str) -> WordFeatures | None:
    """The split in ``folder`` if it is complete and holds ``key``; None otherwise (then written again)."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("key") != key:
            return None
        features = np.load(folder / "features.npy", mmap_mode="r")
        offsets = np.load(folder / "offsets.npy")
    except (OSError, ValueError, json.JSONDecodeError):
        return None
    if features.ndim != 3 or offsets[-1] != features.shape[0]:
        return None
    return WordFeatures(features, offsets, folder, cached=True, encode_seconds=0.0)


@torch.inference_mode()
def encode_words(encoder: Encoder, tokenizer: PreTrainedTokenizerBase, examples: Sequence[TokenExample],
                 out: np.ndarray, offsets: np.ndarray, max_length: int = 128, batch_size: int = 32,
                 device: str = "cpu", desc: str | None = "encoding", subword: str = "first") -> None:
    """Fill ``out`` ``(words, l + 1, d)`` with every word's hidden states at its first sub-token (``subword``:
    ``"last"`` at its last, ``"mean"`` averaged over its sub-tokens) (the frozen encoder in eval mode; windows
    longest first, so little padding and an out-of-memory error shows at once). ``offsets[i]`` is sentence
    ``i``'s first row; ``desc`` labels the progress bar (None: no bar)."""
    _check_subword(subword)
    # encode_tokens marks the first sub-token for "mean" (and "first"), the last for "last".
    split = encode_tokens(examples, tokenizer, max_length, None, labelled=False, subword=subword)
    order = sorted(range(len(split)), key=lambda i: -split.lengths[i])
    collate = TokenCollator(tokenizer.pad_token_id)
    encoder = encoder.to(device).eval()
    starts = range(0, len(order), batch_size)
    for start in starts if desc is None else tqdm(starts, desc=desc, unit="batch", dynamic_ncols=True):
        batch = collate([split[i] for i in order[start:start + batch_size]])
        types = batch.get("token_type_ids")
        hidden = encoder(batch["input_ids"].to(device), batch["attention_mask"].to(device),
                         None if types is None else types.to(device)).hidden_states
        H = torch.stack(hidden, dim=2).float().cpu()  # (B, n, l+1, d)
        for b, item in enumerate(batch["index"].tolist()):
            positions = batch["scored"][b].nonzero().squeeze(-1)  # the scored words' sub-tokens, in order
            rows = offsets[split.item_example[item]] + np.asarray(split.item_words[item])
            if subword == "mean":  # every sub-token of each scored word (its positions share its word id)
                word_ids = batch["word_ids"][b]
                members = (word_ids[None, :] == word_ids[positions][:, None]).to(H.dtype)  # (k, n)
                pooled = (members @ H[b].flatten(1)) / members.sum(1, keepdim=True)
                out[rows] = pooled.view(len(positions), *H.shape[2:]).numpy()
            else:
                out[rows] = H[b, positions].numpy()


def cached_features(examples: Sequence[TokenExample], tokenizer: PreTrainedTokenizerBase,
                    encoder: Encoder | Callable[[], Encoder], encoder_id: str, cache_dir: str | Path,
                    name: str = "split", max_length: int = 128, batch_size: int = 32,
                    device: str = "cpu", describe: dict[str, Any] | None = None,
                    subword: str = "first") -> WordFeatures:
    """The split's word features from the cache, or computed now with ``encoder`` and cached.

    ``encoder`` may be a function that loads it, called only on a cache miss; ``encoder_id`` is its key
    (:func:`encoder_key`). ``name`` (e.g. ``conll2003-train``) makes the folder's name readable; ``describe``
    adds entries to ``meta.json`` (e.g. the encoder's name); ``subword`` picks each word's sub-token (first,
    last or mean, :func:`encode_words`), and is part of the key.
    """
    _check_subword(subword)
    key = _sha256({"encoder": encoder_id, "data": data_key(examples, tokenizer, max_length, subword)})
    folder = Path(cache_dir).expanduser() / f"{name_slug(name)}-{key[:20]}"
    found = _read(folder, key)
    if found is not None:
        return found
    model = encoder if isinstance(encoder, Encoder) else encoder()
    lengths = np.array([len(e.tokens) for e in examples], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    folder.parent.mkdir(parents=True, exist_ok=True)
    for stale in folder.parent.glob(f".tmp-{folder.name}-*"):  # a killed write's remains (not a live writer's)
        if not _alive(stale.name.removeprefix(f".tmp-{folder.name}-").partition("-")[0]):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".tmp-{folder.name}-{os.getpid()}-"))
    try:
        out = np.lib.format.open_memmap(tmp / "features.npy", mode="w+", dtype=np.float16,
                                        shape=(int(offsets[-1]), model.num_hidden_states, model.hidden_size))
        start = time.perf_counter()
        encode_words(model, tokenizer, examples, out, offsets, max_length, batch_size, device, desc=f"encoding {name}",
                     subword=subword)
        seconds = time.perf_counter() - start
        out.flush()
        del out
        np.save(tmp / "offsets.npy", offsets)
        meta = {"key": key, "encoder": encoder_id, "name": name, "sentences": len(examples),
                "words": int(offsets[-1]), "hidden_states": model.num_hidden_states, "hidden_size": model.hidden_size,
                "subword": subword, "max_length": max_length, "dtype": "float16", "device": device,
                "encode_seconds": round(seconds, 3), "format": FORMAT_VERSION, **(describe or {})}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        if folder.exists():  # written meanwhile by another process, or a stale one of another key
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    found = _read(folder, key)
    assert found is not None
    found.cached, found.encode_seconds = False, seconds
    return found


__all__ = ["WordFeatures", "cached_features", "data_key", "default_cache_dir", "encode_words", "encoder_key"]
