"""Types and ranges of options, and the one check of a value against them: torch-free, standard library only.

A range is written once, in a type annotation: ``Annotated[int, Range(int, (">=", 1), name="AtLeast1")]``
(:func:`bounded`), for a head's options (in the head's signature) and for every command-line option alike
(:mod:`hire.optionfields`); the command-line parser checks it where it reads a value, as the jsonargparse restricted
number type of the same name and bounds (:func:`hire.config.parser_type`), and :func:`value_problem` checks a value
that comes from Python (a configuration built in code, a head's options). This module travels with the model's
exported code (:mod:`hire.model.sharing`), so it imports nothing else of hire's, nor jsonargparse.
"""

from __future__ import annotations

import math
import numbers
import operator
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args, get_origin

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {">=": operator.ge, ">": operator.gt, "<=": operator.le,
                                                      "<": operator.lt}


class Range:
    """A number's range in a type annotation, ``Annotated[int, Range(int, (">=", 0), ("<=", 3))]``
    (:func:`bounded`): what an option may be, written once, beside the option, with the ``name`` that ``--help``
    shows. It has the form of jsonargparse's restricted number types (``_type``, ``_restrictions``), so that the
    checks here read either."""

    def __init__(self, base: type, *bounds: tuple[str, int | float], name: str | None = None) -> None:
        self._type = base
        self.bounds = tuple((op, base(ref)) for op, ref in bounds)
        self._restrictions = [(_OPERATORS[op], ref) for op, ref in self.bounds]
        self.name = name


def bounded(base: type, *bounds: tuple[str, int | float], name: str | None = None) -> Any:
    """``Annotated[base, Range(base, *bounds)]``: ``bounded(int, (">=", 1), name="AtLeast1")``."""
    return Annotated[base, Range(base, *bounds, name=name)]


AtLeast1 = bounded(int, (">=", 1), name="AtLeast1")
Probability = bounded(float, (">=", 0.0), ("<", 1.0), name="Probability")  # dropout rates, Adam's betas


def _is_range(tp: Any) -> bool:
    """A :class:`Range`, or a jsonargparse restricted number type."""
    return hasattr(tp, "_restrictions") and hasattr(tp, "_type")


def range_of(tp: Any) -> Any:
    """The restricted number type in ``tp`` (``Annotated[int, R]``, or ``R | None``), or None."""
    if _is_range(tp):
        return tp
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return next((a for a in args[1:] if _is_range(a)), None)
    if origin in (typing.Union, types.UnionType):
        return next((r for r in map(range_of, args) if r is not None), None)
    return None


_BOUND = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def range_text(rng: Any) -> str:
    """A range's bounds in words: ``>= 1``, ``in [0, 1)``."""
    bounds = {_BOUND[op.__name__]: ref for op, ref in rng._restrictions}
    number = "{:g}".format if rng._type is float else str
    low, high = next(((k, v) for k, v in bounds.items() if k[0] == ">"), None), \
        next(((k, v) for k, v in bounds.items() if k[0] == "<"), None)
    if low and high:
        left, right = "[" if low[0] == ">=" else "(", "]" if high[0] == "<=" else ")"
        return f"in {left}{number(low[1])}, {number(high[1])}{right}"
    op, ref = low or high  # type: ignore[misc]
    return f"{op} {number(ref)}"


def in_range(value: Any, rng: Any) -> bool:
    return all(op(value, ref) for op, ref in rng._restrictions)


def value_problem(value: Any, tp: Any) -> str | None:
    """What is wrong with ``value`` for an option of type ``tp`` (its range included), or None: ``expected an
    integer, not 'abc'``, ``must be a finite number, not nan``, ``must be >= 1, not 0``. The one check of a value
    that comes from Python (a configuration built in code, a head's options) rather than through the parser."""
    if not type_ok(value, tp):
        return f"expected {describe_type(tp)}, not {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {value}"
    rng = range_of(tp)  # of the number in the type (``int | Literal["ner"]``: a name has no range)
    numeric = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if numeric and rng is not None and not in_range(value, rng):
        return f"must be {range_text(rng)}, not {value!r}"
    return None


def type_ok(value: Any, tp: Any) -> bool:
    """Whether ``value`` is of the declared type ``tp`` (an int is a float; a bool is neither; a range's number
    type is its base type)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return type_ok(value, args[0])
    if _is_range(tp):
        return type_ok(value, tp._type)
    if origin in (typing.Union, types.UnionType):
        return any(type_ok(value, a) for a in args)
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin in (list, dict):
        return isinstance(value, origin) and all(type_ok(v, args[0] if args else Any) for v in value)
    if tp is bool:
        return isinstance(value, bool)
    if tp in (int, float):
        kind = numbers.Integral if tp is int else numbers.Real
        return isinstance(value, kind) and not isinstance(value, bool)
    if tp is Any:
        return True
    return isinstance(value, tp) if isinstance(tp, type) else True


def describe_type(tp: Any) -> str:
    """``int | None`` -> ``"an integer or null"``."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return describe_type(args[0])
    if _is_range(tp):
        return describe_type(tp._type)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    if origin is Literal:
        return f"one of {', '.join(map(str, args))}"
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string", type(None): "null",
             list: "a list of names", dict: "a mapping of options"}
    return names.get(origin or tp, str(tp))
