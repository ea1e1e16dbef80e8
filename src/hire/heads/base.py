"""The contract every head follows, and the registry that finds heads by name.

A head maps the encoder's ``l + 1`` hidden states and the attention mask to one representation
vector per example (``c`` in the paper's eq. 8), plus, where it weights layers, each example's
layer weights. The output layer (eq. 8-9) sits on top of it in :mod:`hire.model`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn


@dataclass
class HeadOutput:
    representation: Tensor  # (B, output_dim): the vector the output layer reads
    layer_weights: Tensor | None = None  # (B, l + 1): each example's weight on each hidden state


class Head(nn.Module):
    """Base class: ``forward(hidden_states, mask) -> HeadOutput``; ``output_dim`` says its width."""

    output_dim: int
    # False when the head reads a hidden state below the last, leaving the encoder's upper layers out of
    # the graph (distributed data-parallel training must then look for unused parameters).
    reads_last_layer: bool = True

    def forward(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:  # pragma: no cover
        raise NotImplementedError

    def get_output_dim(self) -> int:
        return self.output_dim


HeadFactory = Callable[..., Head]
_REGISTRY: dict[str, tuple[HeadFactory, dict[str, Any], str]] = {}


def register_head(name: str, factory: HeadFactory, doc: str, **preset: Any) -> None:
    """Register ``factory(hidden_size, num_hidden_states, **options)`` under ``name``.

    ``preset`` options are fixed for this name (a user's options may not override them).
    """
    if name in _REGISTRY:
        raise ValueError(f"head {name!r} is registered twice")
    _REGISTRY[name] = (factory, preset, doc)


def head_names() -> list[str]:
    return sorted(_REGISTRY)


def describe_heads() -> dict[str, str]:
    """Each registered head's one-line description."""
    return {name: _REGISTRY[name][2] for name in head_names()}


def head_options(name: str) -> list[str]:
    """The options a user may set for head ``name``."""
    factory, preset, _ = _lookup(name)
    params = inspect.signature(factory).parameters
    return [p for p in params if p not in ("hidden_size", "num_hidden_states", *preset)]


def _lookup(name: str) -> tuple[HeadFactory, dict[str, Any], str]:
    if name not in _REGISTRY:
        raise ValueError(f"unknown head {name!r}; the heads are: {', '.join(head_names())}")
    return _REGISTRY[name]


def build_head(name: str, hidden_size: int, num_hidden_states: int, options: dict[str, Any] | None = None,
               ) -> Head:
    """Build the head registered as ``name``; unknown options are an error that lists the valid ones."""
    factory, preset, _ = _lookup(name)
    options = dict(options or {})
    valid = head_options(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"head {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options are: {', '.join(valid) or '(none)'}"
        )
    return factory(hidden_size, num_hidden_states, **preset, **options)
