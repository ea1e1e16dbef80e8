"""A saved bi-encoder folder as the commands read it before loading anything (:func:`bi_encoder_config`): the
encoder as ``transformers`` saves it, with ``bi_encoder.json`` beside it, each field hire reads checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hire.checks import ConfigError

BI_ENCODER_FILE = "bi_encoder.json"  # hire.model.sharing.BI_ENCODER_FILE: what makes a folder a hire bi-encoder


# What every bi-encoder is (hire.model.biencoder.BI_ENCODER_IS, not choices): a bi_encoder.json written before
# these fields went holds them, and they must say this.
_FIXED = {"ranker": "bi", "task_type": "ranking", "pooling": "mean", "layer": "last", "similarity": "cosine"}
# The fields of bi_encoder.json that hire reads: (is the value right, what it must be).
_BI_FIELDS: dict[str, tuple[Any, str]] = {
    "scale": (lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < float("inf"),
              "a finite number > 0"),
    "head": (lambda v: v in ("last-layer", "pool-mean"), '"last-layer" or "pool-mean"'),
    "encoder": (lambda v: isinstance(v, str), "a string (the encoder's name or path)"),
    "rank_loss": (lambda v: v in ("in-batch", "pairwise"), '"in-batch" or "pairwise"'),
    "rank_margin": (lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < float("inf"),
                    "a finite number > 0"),
    "task_options": (lambda v: v is None or isinstance(v, dict), "a JSON object"),
}


def bi_encoder_config(model_dir: str | Path, option: str = "--model") -> dict[str, Any] | None:
    """A saved bi-encoder's description, None where the folder holds none (no ``bi_encoder.json``): its
    ``bi_encoder.json`` (each field hire reads checked) with ``encoder_config``, the encoder's own ``config.json``
    (a ``transformers`` config with a ``model_type``). A file that is not what hire writes is a ConfigError naming
    it."""
    folder = Path(model_dir).expanduser()
    path = folder / BI_ENCODER_FILE
    if not path.is_file():
        return None
    values: dict[str, Any] = {}
    for file in (path, folder / "config.json"):
        try:
            read = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{option} {model_dir}: a bi-encoder ({BI_ENCODER_FILE}) without its encoder's "
                              "config.json") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            read = None
        if not isinstance(read, dict):
            raise ConfigError(f"{option} {model_dir}: {file} is not a JSON object")
        values[file.name] = read
    config = values[BI_ENCODER_FILE]
    for key, only in _FIXED.items():
        if key in config and config[key] != only:
            raise ConfigError(f"{path}: {key} must be {json.dumps(only)}, not {json.dumps(config[key])[:80]}")
    for key, (ok, what) in _BI_FIELDS.items():
        if key not in config or not ok(config[key]):
            shown = json.dumps(config[key])[:80] if key in config else "missing"
            raise ConfigError(f"{path}: {key} must be {what}, not {shown}")
    encoder = values["config.json"]
    if not isinstance(encoder.get("model_type"), str):
        raise ConfigError(f"{folder / 'config.json'}: not a transformers encoder's config (no model_type)")
    return {**config, **_FIXED, "encoder_config": encoder}
