"""Which encoder to probe, and its fingerprint.

``--encoder`` takes what ``hire train`` takes (a hub name, a local folder, ``all-MiniLM-L6-v2``) and also
what ``hire train`` writes: a run folder (its ``best/`` model is used) or a saved model folder, whose
``.encoder`` is the fine-tuned encoder. The fingerprint is a hash of the files the encoder is loaded
from (weights, configuration, tokenizer), by content, so the feature cache is reused across runs and
copies and invalidated by any change to the weights, however small.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from hire.encoder import Encoder, resolve_encoder

# Files that are never read when the encoder is loaded: other frameworks' weights and documentation.
_UNUSED_SUFFIXES = (".h5", ".msgpack", ".ot", ".onnx", ".md")
_UNUSED_NAMES = (".gitattributes",)


@dataclass
class EncoderSource:
    """Where an encoder comes from. ``kind`` is ``hire-model`` (a fine-tuned ``HireModel`` folder,
    whose encoder is taken) or ``pretrained`` (anything ``Encoder.from_pretrained`` loads)."""

    spec: str  # as given on the command line
    kind: str
    path: str  # what is loaded: a folder, or a hub name
    folder: Path | None  # the local folder holding its files, when there is one
    _loaded: tuple[Encoder, PreTrainedTokenizerBase] | None = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        return {"encoder": self.spec, "kind": self.kind, "path": self.path}

    def load(self) -> tuple[Encoder, PreTrainedTokenizerBase]:
        """The encoder (eval mode) and its tokenizer, loaded once: only a cache miss needs them."""
        if self._loaded is None:
            self._loaded = load_source(self)
        return self._loaded

    def release(self) -> None:
        self._loaded = None


def _is_hire_model(folder: Path) -> bool:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and "encoder_config" in config and "head" in config


def _hub_snapshot(name: str) -> Path | None:
    """The local copy of a hub model, if the Hugging Face cache holds one (nothing is downloaded)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # not cached, or not a valid repository name: the loader will say why
        return None


def check_source(spec: str, option: str = "--encoder") -> None:
    """Refuse, before any work, an ``--encoder`` that :func:`resolve_source` could not load: a folder that is
    neither a model folder nor a run folder with ``best/``, or a name that is no encoder here (the check of
    ``hire train``, :func:`hire.checks.check_encoder`: an installable encoder not installed is named with
    the command that installs it; offline, a hub name must be in the cache)."""
    from hire.checks import check_encoder
    from hire.config import ConfigError

    path = Path(spec).expanduser()
    if path.is_dir() and (_is_hire_model(path / "best") or _is_hire_model(path)):
        return
    if path.exists() and not (path / "config.json").is_file():
        raise ConfigError(f"{option} {spec}: not a model folder (no config.json), nor a run folder with best/")
    check_encoder(spec, option)


def resolve_source(spec: str) -> EncoderSource:
    """Interpret ``--encoder``: a run folder (``runs/x``: its ``best/``), a saved model folder
    (``runs/x/best``), a local encoder folder, ``all-MiniLM-L6-v2``, or a hub name (:func:`check_source`)."""
    path = Path(spec).expanduser()
    if path.is_dir() and _is_hire_model(path / "best"):
        return EncoderSource(spec, "hire-model", str(path / "best"), path / "best")
    if path.is_dir() and _is_hire_model(path):
        return EncoderSource(spec, "hire-model", str(path), path)
    check_source(spec)
    resolved = Path(resolve_encoder(spec))
    if (resolved / "config.json").is_file():
        return EncoderSource(spec, "pretrained", str(resolved), resolved)
    if path.exists() or spec.startswith((".", "/", "~")):
        raise ValueError(f"--encoder {spec}: not a model folder (no config.json), nor a run folder with best/")
    return EncoderSource(spec, "pretrained", spec, _hub_snapshot(spec))


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def module_sha256(module: nn.Module) -> str:
    """A hash of a module's tensors (names, shapes, dtypes, values), for encoders without local files."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def fingerprint(source: EncoderSource) -> dict[str, Any]:
    """``{"sha256": ..., "files": {name: sha256}}`` over the files the encoder is loaded from.

    Without a local folder (a hub model outside the cache) the loaded weights themselves are hashed.
    """
    if source.folder is None:
        encoder, _ = source.load()
        return {"sha256": module_sha256(encoder), "files": {}}
    files = {p.name: file_sha256(p) for p in sorted(source.folder.iterdir())
             if p.is_file() and p.name not in _UNUSED_NAMES and not p.name.endswith(_UNUSED_SUFFIXES)}
    if not files:
        raise ValueError(f"--encoder {source.spec}: the folder {source.folder} holds no model files")
    total = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return {"sha256": total, "files": files}


def load_source(source: EncoderSource) -> tuple[Encoder, PreTrainedTokenizerBase]:
    """The encoder (in eval mode) and its tokenizer, padding on the right."""
    from hire.model import HireModel, load_config, load_tokenizer

    if source.kind == "hire-model":
        encoder = HireModel.from_pretrained(source.path).encoder
        folder = Path(source.path)
        has_tokenizer = (folder / "tokenizer_config.json").is_file()
        tokenizer = load_tokenizer(source.path if has_tokenizer else load_config(folder).encoder)
    else:
        encoder, tokenizer = Encoder.from_pretrained(source.path), load_tokenizer(source.path)
    return encoder.eval(), tokenizer
