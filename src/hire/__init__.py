"""hire: fine-tune Transformer encoders with heads that use all of their hidden layers.

Above all HIRE, the Hidden Representation Extractor with its fusion network (Zhao & Yang), with the
paper's ablations and baselines, each a head found by name::

    from hire import build_model
    model = build_model("all-MiniLM-L6-v2", head="hire", num_labels=2)

The names below are imported on first use, so that ``hire --help`` and a bad option answer at once,
without loading torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hire.heads import build_head, describe_heads, head_names
    from hire.model import HireModel, ModelConfig, ModelOutput, build_model, load_tokenizer

__version__ = "0.1.0"
_EXPORTS = {"build_head": "hire.heads", "describe_heads": "hire.heads", "head_names": "hire.heads",
            "HireModel": "hire.model", "ModelConfig": "hire.model", "ModelOutput": "hire.model",
            "build_model": "hire.model", "load_tokenizer": "hire.model"}
__all__ = ["HireModel", "ModelConfig", "ModelOutput", "build_head", "build_model", "describe_heads",
           "head_names", "load_tokenizer"]


def __getattr__(name: str) -> Any:
    """``hire.build_model`` and the other exports, or a submodule (``hire.heads``), imported when first used."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
