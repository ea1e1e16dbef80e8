"""Which encoder to probe, and its fingerprint.

``--encoder`` takes what ``hire train`` takes (a hub name, a local folder, ``all-MiniLM-L6-v2``) and also
what ``hire train`` writes: a run folder (its ``best/`` model is used) or a saved model folder, whose
``.encoder`` is the fine-tuned encoder. The fingerprint is a hash of the files the encoder is loaded
from (weights, configuration, tokenizer), by content, so the feature cache is reused across runs and
copies and invalidated by any change to the weights, however small.

``random:<encoder>`` names any of these with its weights drawn afresh: the same architecture, built from the
encoder's configuration under a fixed seed, and its real tokenizer (an untrained encoder, the control that says
what a probe learns from the architecture and the token identities alone). Every command that reads
``--encoder(s)`` takes it, and it names the same weights in all of them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedTokenizerBase

from hire.lab.files import file_sha256, sha256_json
from hire.model.encoder import Encoder, resolve_encoder

# Files that are never read when the encoder is loaded: other frameworks' weights and documentation.
_UNUSED_SUFFIXES = (".h5", ".msgpack", ".ot", ".onnx", ".md")
_UNUSED_NAMES = (".gitattributes",)
# What a tokenizer is read from besides hire.model.TOKENIZER_FILES (its vocabulary): a random twin's key hashes these.
_TOKENIZER_EXTRAS = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "merges.txt")

RANDOM_PREFIX = "random:"
RANDOM_SEED = 0
"""The seed of every ``random:`` encoder: one fixed value, so that a spec names one set of weights in every
command, run and machine (its rows in two tables are the same encoder, and its features are shared through the
cache). Varying it would make ``random:<encoder>`` ambiguous; a second draw is a different encoder."""


@dataclass
class EncoderSource:
    """Where an encoder comes from. ``kind`` is ``hire-model`` (a fine-tuned ``HireModel`` folder,
    whose encoder is taken), ``pretrained`` (anything ``Encoder.from_pretrained`` loads) or ``random``
    (``random:<encoder>``: ``base``'s architecture with weights drawn under ``seed``, and ``base``'s tokenizer)."""

    spec: str  # as given on the command line
    kind: str
    # What is loaded: a folder, or a hub name. A random twin's is its spec: no weights are loaded, so code that
    # loads from ``path`` itself (not through :func:`load_source`) fails rather than take the trained weights.
    path: str
    folder: Path | None  # the local folder holding its files, when there is one (a random twin: None)
    base: EncoderSource | None = None  # a random twin's trained encoder (its configuration and tokenizer)
    seed: int | None = None  # a random twin's seed
    _loaded: tuple[Encoder, PreTrainedTokenizerBase] | None = field(default=None, repr=False)
    _tokenizer: PreTrainedTokenizerBase | None = field(default=None, repr=False)  # tokenizer() alone, loaded once

    def describe(self) -> dict[str, Any]:
        if self.base is not None:  # a random twin: where its configuration and tokenizer come from
            return {"encoder": self.spec, "kind": self.kind, "path": self.base.path, "seed": self.seed}
        return {"encoder": self.spec, "kind": self.kind, "path": self.path}

    def load(self) -> tuple[Encoder, PreTrainedTokenizerBase]:
        """The encoder (eval mode) and its tokenizer, loaded once: only a cache miss needs them."""
        if self._loaded is None:
            self._loaded = load_source(self)
        return self._loaded

    def encoder(self) -> Encoder:
        """The encoder alone (loaded once, with its tokenizer): a function to pass where only a cache miss needs
        it."""
        return self.load()[0]

    def tokenizer(self, words: bool = False) -> PreTrainedTokenizerBase:
        """The tokenizer alone (no weights loaded; loaded once), padding on the right; ``words``: for text given as
        words (:func:`hire.model.load_tokenizer`)."""
        if words:
            return load_source_tokenizer(self, words)
        if self._loaded is not None:
            return self._loaded[1]
        if self._tokenizer is None:
            self._tokenizer = load_source_tokenizer(self)
        return self._tokenizer

    def release(self) -> None:
        self._loaded = self._tokenizer = None
        if self.base is not None:
            self.base.release()


def _model_folder(path: Path) -> Path:
    """The folder an encoder path loads from: a run folder's ``best/`` (a ``HireModel``, or the plain encoder that a
    fine-tuned bi-encoder saves, with ``bi_encoder.json`` beside it), else the path itself."""
    best = path / "best"
    if _is_hire_model(best) or ((best / "config.json").is_file() and not (path / "config.json").is_file()):
        return best
    return path


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
    ``hire train``, :func:`hire.config.check_encoder`: an installable encoder not installed is named with
    the command that installs it; offline, a hub name must be in the cache). ``random:`` must name such an
    encoder after it. Every error is a one-line ``ConfigError`` naming ``option``."""
    from hire.config import ConfigError, check_encoder

    if spec.startswith(RANDOM_PREFIX):
        base = spec[len(RANDOM_PREFIX):]
        if not base.strip():
            raise ConfigError(f"{option} {spec}: random: needs an encoder after it (random:all-MiniLM-L6-v2)")
        if base.startswith(RANDOM_PREFIX):
            raise ConfigError(f"{option} {spec}: random: takes an encoder with weights, not another random: one")
        try:
            check_source(base, option)
        except ConfigError as err:  # name the whole spec: "--encoder random:nope: no such folder ..."
            said = str(err)
            raise ConfigError(f"{option} {RANDOM_PREFIX}{said.removeprefix(f'{option} ')}"
                              if said.startswith(f"{option} {base}") else f"{said} (in {spec})") from None
        return
    path = Path(spec).expanduser()
    if path.is_dir() and (_model_folder(path) != path or _is_hire_model(path)):
        return
    if path.exists() and not (path / "config.json").is_file():
        raise ConfigError(f"{option} {spec}: not a model folder (no config.json), nor a run folder with best/")
    check_encoder(spec, option)


def resolve_source(spec: str) -> EncoderSource:
    """Interpret ``--encoder``: a run folder (``runs/x``: its ``best/``), a saved model folder
    (``runs/x/best``), a local encoder folder, ``all-MiniLM-L6-v2``, a hub name (:func:`check_source`), or any
    of these after ``random:`` (its random-weight twin, seed :data:`RANDOM_SEED`)."""
    if spec.startswith(RANDOM_PREFIX):
        check_source(spec)
        base = resolve_source(spec[len(RANDOM_PREFIX):])
        return EncoderSource(spec, "random", spec, None, base=base, seed=RANDOM_SEED)
    path = Path(spec).expanduser()
    folder = _model_folder(path)
    if _is_hire_model(folder):
        return EncoderSource(spec, "hire-model", str(folder), folder)
    if folder != path:  # a bi-encoder's run: best/ is the fine-tuned encoder itself
        return EncoderSource(spec, "pretrained", str(folder), folder)
    check_source(spec)
    resolved = Path(resolve_encoder(spec))
    if (resolved / "config.json").is_file():
        return EncoderSource(spec, "pretrained", str(resolved), resolved)
    if path.exists() or spec.startswith((".", "/", "~")):
        raise ValueError(f"--encoder {spec}: not a model folder (no config.json), nor a run folder with best/")
    return EncoderSource(spec, "pretrained", spec, _hub_snapshot(spec))


def module_sha256(module: nn.Module) -> str:
    """A hash of a module's tensors (names, shapes, dtypes, values), for encoders without local files."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def fingerprint(source: EncoderSource) -> dict[str, Any]:
    """``{"sha256": ..., "files": {name: sha256}}`` over the files the encoder is loaded from.

    Without a local folder (a hub model outside the cache) the loaded weights themselves are hashed. A random
    twin's is :func:`random_fingerprint` (its weights are never read from a file).
    """
    if source.kind == "random":
        return random_fingerprint(source)
    if source.folder is None:
        encoder, _ = source.load()
        return {"sha256": module_sha256(encoder), "files": {}}
    files = {p.name: file_sha256(p) for p in sorted(source.folder.iterdir())
             if p.is_file() and p.name not in _UNUSED_NAMES and not p.name.endswith(_UNUSED_SUFFIXES)}
    if not files:
        raise ValueError(f"--encoder {source.spec}: the folder {source.folder} holds no model files")
    total = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return {"sha256": total, "files": files}


def _random_base(source: EncoderSource) -> EncoderSource:
    if source.kind != "random" or source.base is None or source.seed is None:
        raise ValueError(f"{source.spec}: not a random: encoder")
    return source.base


def encoder_config(source: EncoderSource) -> PretrainedConfig:
    """The ``transformers`` configuration of a source's encoder (a fine-tuned model's: the one it saved), read
    without loading any weights."""
    from transformers import CONFIG_MAPPING, AutoConfig

    from hire.model import load_config

    if source.kind == "random":
        return encoder_config(_random_base(source))
    if source.kind == "hire-model":
        values = load_config(source.path).encoder_config
        return CONFIG_MAPPING[values["model_type"]].from_dict(values)
    return AutoConfig.from_pretrained(resolve_encoder(source.path))


def random_fingerprint(source: EncoderSource) -> dict[str, Any]:
    """A random twin's fingerprint: the hash of what determines its weights and tokens, none of them read from
    a weights file: the configuration (without ``transformers``' private entries such as the folder it was read
    from, so a copy elsewhere gives the same key; with its ``transformers_version``, which is the version that
    builds it), the seed, the torch version (whose generator draws the weights) and the tokenizer, by its files'
    content (those of the base's folder that a tokenizer is read from), or by its definition where the tokenizer
    files are elsewhere (a fine-tuned model saved without them). ``files`` holds the parts' hashes."""
    base = _random_base(source)
    config = {k: v for k, v in encoder_config(source).to_dict().items() if not k.startswith("_")}
    parts = {"config": sha256_json(config), "seed": str(source.seed), "torch": torch.__version__,
             "tokenizer": _tokenizer_sha256(base)}
    return {"sha256": sha256_json({"kind": "random", **parts}), "files": parts}


def _tokenizer_sha256(base: EncoderSource) -> str:
    """The hash of a tokenizer: its files' content where the base's folder holds them, else its definition."""
    from fnmatch import fnmatch

    from hire.model import TOKENIZER_FILES

    patterns = (*TOKENIZER_FILES, *_TOKENIZER_EXTRAS)
    folder = base.folder
    if folder is not None and any(any(folder.glob(pattern)) for pattern in TOKENIZER_FILES):
        files = {p.name: file_sha256(p) for p in sorted(folder.iterdir())
                 if p.is_file() and any(fnmatch(p.name, pattern) for pattern in patterns)}
        return sha256_json({"files": files})
    tokenizer = base.tokenizer()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    definition = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    return sha256_json({"class": type(tokenizer).__name__, "definition": definition,
                         "special": tokenizer.special_tokens_map})


def build_random(source: EncoderSource) -> Encoder:
    """A random twin's encoder: its base's configuration through ``from_config`` (``transformers``' own
    initialisation, as pre-training starts from), drawn on the CPU under ``torch.manual_seed(source.seed)``
    inside a forked generator, so the same spec gives the same weights whatever ran before, and the caller's
    random state is left as it was."""
    _random_base(source)
    config = encoder_config(source)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(source.seed)
        return Encoder.from_config(config).eval()


def load_source_tokenizer(source: EncoderSource, words: bool = False) -> PreTrainedTokenizerBase:
    """A source's tokenizer, padding on the right: a fine-tuned model's own where it saved one, else its
    encoder's; a random twin's is its base's. ``words``: for text given as words (:func:`hire.model.load_tokenizer`)."""
    from hire.model import load_config, load_tokenizer

    if source.kind == "random":
        return load_source_tokenizer(_random_base(source), words)
    if source.kind == "hire-model":
        folder = Path(source.path)
        has_tokenizer = (folder / "tokenizer_config.json").is_file()
        return load_tokenizer(source.path if has_tokenizer else load_config(folder).encoder, words=words)
    return load_tokenizer(source.path, words=words)


def load_source(source: EncoderSource) -> tuple[Encoder, PreTrainedTokenizerBase]:
    """The encoder (in eval mode) and its tokenizer, padding on the right."""
    from hire.model import HireModel

    if source.kind == "random":
        encoder = build_random(source)
    elif source.kind == "hire-model":
        encoder = HireModel.from_pretrained(source.path).encoder
    else:
        encoder = Encoder.from_pretrained(source.path)
    return encoder.eval(), load_source_tokenizer(source)


def load_encoders(specs: list[str], labels: list[str]) -> tuple[list[EncoderSource], list[str], list[dict[str, Any]]]:
    """Each encoder resolved (:func:`resolve_source`), the fingerprint of its weights, and
    its record in ``results.json`` (label, what it is, fingerprint: what a resumed run compares)."""
    sources = [resolve_source(spec) for spec in specs]
    fingerprints = [fingerprint(s)["sha256"] for s in sources]
    encoders = [{"label": label, **s.describe(), "fingerprint": fp}
                for label, s, fp in zip(labels, sources, fingerprints, strict=True)]
    return sources, fingerprints, encoders
