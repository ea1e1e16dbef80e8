"""hire: fine-tune Transformer encoders with heads that use all of their hidden layers.

Above all HIRE, the Hidden Representation Extractor with its fusion network (Zhao & Yang), with the
paper's ablations and baselines, each a head found by name::

    from hire import build_model
    model = build_model("all-MiniLM-L6-v2", head="hire", num_labels=2)

A saved model is a ``transformers`` model of type ``"hire"``: after ``import hire``,
``AutoModelForSequenceClassification.from_pretrained(run/best)`` and ``pipeline("text-classification", run/best)``
load it.

The names below are imported on first use, so that ``hire --help`` and a bad option answer at once,
without loading torch and transformers.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hire.model import HireConfig, HireModel, ModelOutput, build_model, load_tokenizer
    from hire.model.heads import build_head, describe_heads, head_names

__version__ = "0.1.0"
_EXPORTS = {"build_head": "hire.model.heads", "describe_heads": "hire.model.heads", "head_names": "hire.model.heads",
            "HireConfig": "hire.model", "HireModel": "hire.model", "ModelOutput": "hire.model",
            "build_model": "hire.model", "load_tokenizer": "hire.model"}
__all__ = ["HireConfig", "HireModel", "ModelOutput", "build_head", "build_model", "describe_heads",
           "head_names", "load_tokenizer"]


def __getattr__(name: str) -> Any:
    """``hire.build_model`` and the other exports, or a submodule (``hire.model.heads``), imported when first used."""
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


_AUTO_MODELS = "transformers.models.auto.modeling_auto"  # where AutoModelForSequenceClassification lives


class _RegisterWithTransformers(importlib.abc.MetaPathFinder):
    """Registers the model type "hire" with ``transformers``' Auto classes as soon as they are imported.

    The Auto classes register a class, not a name to import later, and :class:`~hire.model.HireModel` needs torch
    (seconds), which ``import hire`` must not load: the command line answers a bad option without torch. So
    registering plainly here is ruled out, and this finder waits on ``sys.meta_path`` for the module
    that holds the Auto model classes, lets it load, then registers :mod:`hire.model`'s classes.
    """

    def find_spec(self, name: str, path: Any, target: ModuleType | None = None) -> Any:
        if name != _AUTO_MODELS:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)  # as the finders after this one would find it
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def load_then_register(module: ModuleType) -> None:
                load(module)
                _import_model()

            spec.loader.exec_module = load_then_register  # type: ignore[method-assign]
        return spec


def _import_model() -> None:
    try:
        importlib.import_module("hire.model").register_with_transformers()
    except Exception as err:  # never break the user's import of transformers
        warnings.warn(f"hire could not register its model type with transformers ({err}); import hire.model "
                      "before loading a saved hire model with transformers' Auto classes", stacklevel=2)


if _AUTO_MODELS in sys.modules:  # transformers' Auto classes are loaded already, and torch with them
    _import_model()
else:
    sys.meta_path.insert(0, _RegisterWithTransformers())
