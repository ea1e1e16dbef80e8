"""The contract every head follows, and the registry that finds heads by name.

A head maps the encoder's ``l + 1`` hidden states and the attention mask to one representation
vector per example (``c`` in the paper's eq. 8), plus, where it weights layers, each example's
layer weights. The output layer (eq. 8-9) sits on top of it in :mod:`hire.model`.

Each name is registered with the options that apply to it: HIRE's variants share one module, but a variant
without an extractor has no extractor sizes, fixed scores over all states have no ``k``, and only random
scores have a ``seed``. An option that does not apply is an error, never silently ignored.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from torch import Tensor, nn

from hire.model.optiontypes import value_problem


@dataclass
class HeadOutput:
    representation: Tensor  # (B, output_dim): the vector the output layer reads; per token (B, n, output_dim)
    layer_weights: Tensor | None = None  # (B, l + 1): each example's weight on each hidden state


class Head(nn.Module):
    """Base class: ``forward(hidden_states, mask) -> HeadOutput``; ``output_dim`` says its width."""

    output_dim: int
    # False when the head reads a hidden state below the last, leaving the encoder's upper layers out of
    # the graph (distributed data-parallel training must then look for unused parameters).
    reads_last_layer: bool = True

    def forward(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:  # pragma: no cover
        raise NotImplementedError

    def tokens(self, hidden_states: Sequence[Tensor], mask: Tensor) -> HeadOutput:
        """The per-token form, for token tasks: a representation at every token, (B, n, output_dim), and the
        layer weights (B, l + 1) where the head weights layers. A head without one says so."""
        self.check_tokens()
        raise NotImplementedError

    def check_tokens(self) -> None:
        """A ValueError unless the head has a per-token form (checked when a token model is built)."""
        if type(self).tokens is Head.tokens:
            raise ValueError(f"the {type(self).__name__} head has no per-token form (it reads one vector per "
                             "sentence); for a token task use last-layer, scalar-mix, concat-last-4, pool-cls with "
                             "a layer, or hire")


HeadFactory = Callable[..., Head]
_SIZES = ("hidden_size", "num_hidden_states")  # what every factory takes first, from the encoder


@dataclass(frozen=True)
class _Registered:
    factory: HeadFactory
    preset: dict[str, Any]  # fixed for this name
    options: tuple[str, ...]  # what a user may set, in the factory's order
    doc: str


_REGISTRY: dict[str, _Registered] = {}


def register_head(name: str, factory: HeadFactory, doc: str, options: Sequence[str] | None = None,
                  **preset: Any) -> None:
    """Register ``factory(hidden_size, num_hidden_states, **preset, **options)`` under ``name``.

    ``preset`` options are fixed for this name (a user's options may not override them); ``options`` are the
    factory's parameters a user may set (default: all that are not preset). The rest keep their defaults,
    because they do not apply to this variant. An option's type and range are the factory's annotation
    (``fusion_layers: Annotated[int, R]``, :func:`hire.model.optiontypes.bounded`): written once, beside the option.
    """
    if name in _REGISTRY:
        raise ValueError(f"head {name!r} is registered twice")
    params = [p for p in inspect.signature(factory).parameters if p not in _SIZES]
    allowed = [p for p in params if p not in preset] if options is None else list(options)
    unknown = sorted((set(preset) | set(allowed)) - set(params))
    if unknown:
        raise ValueError(f"head {name!r}: its factory has no parameter {', '.join(map(repr, unknown))}")
    if set(preset) & set(allowed):
        raise ValueError(f"head {name!r}: {', '.join(sorted(set(preset) & set(allowed)))} both preset and an option")
    _REGISTRY[name] = _Registered(factory, preset, tuple(p for p in params if p in allowed), doc)


def head_names() -> list[str]:
    return sorted(_REGISTRY)


def describe_heads() -> dict[str, str]:
    """Each registered head's one-line description."""
    return {name: _REGISTRY[name].doc for name in head_names()}


def head_options(name: str) -> list[str]:
    """The options a user may set for head ``name`` (only those that apply to it)."""
    return list(_lookup(name).options)


def head_option_types(name: str, ranges: bool = False) -> dict[str, Any]:
    """Each option of head ``name`` with its declared type (``Any`` where the factory does not say); with
    ``ranges``, as declared, its range included (``Annotated[int, Range(int, (">=", 1))]``,
    :func:`hire.model.optiontypes.bounded`). A factory's annotations are the one place where a head option's type and
    range are written."""
    factory = _lookup(name).factory
    try:
        hints = get_type_hints(factory.__init__ if isinstance(factory, type) else factory, include_extras=ranges)
    except (NameError, TypeError):
        hints = {}
    return {option: hints.get(option, Any) for option in head_options(name)}


def head_option_defaults(name: str) -> dict[str, Any]:
    """The value each option of head ``name`` takes when it is not given (its preset, else its factory's default)."""
    registered = _lookup(name)
    parameters = inspect.signature(registered.factory).parameters
    return {option: registered.preset.get(option, parameters[option].default) for option in registered.options
            if option in parameters and parameters[option].default is not inspect.Parameter.empty}


def _lookup(name: str) -> _Registered:
    if not isinstance(name, str):
        raise ValueError(f"a head is named by a string (one of {', '.join(head_names())}), not {name!r}")
    if name not in _REGISTRY:
        raise ValueError(f"unknown head {name!r}; the heads are: {', '.join(head_names())}")
    return _REGISTRY[name]


def check_head_options(name: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` for head ``name`` as a dict: a mapping of options the head takes (an option it does not take
    is an error that lists those it does), each of its declared type and in its declared range (the factory's
    annotations)."""
    registered = _lookup(name)
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"head_options must be a mapping of option names to values (e.g. {{'fusion_layers': 1}}), "
                         f"not {options!r}")
    options = dict(options)
    unknown = sorted(map(str, set(options) - set(registered.options)))
    if unknown:
        raise ValueError(
            f"head {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options are: {', '.join(registered.options) or '(none)'}"
        )
    types_by_name = head_option_types(name, ranges=True)
    for option, value in options.items():
        problem = value_problem(value, types_by_name[option])
        if problem is not None:
            raise ValueError(f"head {name!r}: option {option}: {problem}")
    return options


def check_arguments(function: Callable[..., Any], values: Mapping[str, Any]) -> None:
    """Each of ``values`` (a factory's arguments by name) of its annotated type and in its annotated range, for
    a head built directly rather than through :func:`build_head`: ValueError ``option: must be >= 1, not 0``."""
    hints = get_type_hints(function, include_extras=True)
    for option, value in values.items():
        problem = value_problem(value, hints[option]) if option in hints and option not in _SIZES else None
        if problem is not None:
            raise ValueError(f"{option}: {problem}")


def build_head(name: str, hidden_size: int, num_hidden_states: int, options: Mapping[str, Any] | None = None,
               ) -> Head:
    """Build the head registered as ``name``; an option it does not take, or a value of the wrong type, is an
    error (:func:`check_head_options`)."""
    registered = _lookup(name)
    options = check_head_options(name, options)
    return registered.factory(hidden_size, num_hidden_states, **registered.preset, **options)
