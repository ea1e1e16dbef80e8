"""The building blocks of typed options: a field with its ``--help`` (:func:`option_field`) and the ranged number
types the parser checks where it reads a value (``AtLeast1``, ``Probability``, ``MaxLength`` ...), each a
:class:`hire.model.optiontypes.Range` written once (the heads' options use the same).

:mod:`hire.config` composes the run's sections from them, and each kind of task declares its own options with them
(:mod:`hire.tasks`); light (no torch), so that ``hire --help`` and a bad option answer at once."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from hire.model.optiontypes import AtLeast1, Probability, bounded

MIN_MAX_LENGTH = 8  # tokens: room for a pair's special tokens (4 for RoBERTa) and some text of each side

ranged = bounded  # a number within bounds, named for --help: ranged(int, (">=", 2), name="AtLeast2")
NonNegativeInt = bounded(int, (">=", 0), name="NonNegativeInt")
Positive = bounded(float, (">", 0.0), name="PositiveFloat")
NonNegative = bounded(float, (">=", 0.0), name="NonNegativeFloat")
UnitInterval = bounded(float, (">=", 0.0), ("<=", 1.0), name="ClosedUnitInterval")
Seed = bounded(int, (">=", 0), ("<", 2**32), name="Seed")
MaxLength = bounded(int, (">=", MIN_MAX_LENGTH), name="MaxLength")  # room for the special tokens and some text
__all__ = ["MIN_MAX_LENGTH", "AtLeast1", "MaxLength", "NonNegative", "NonNegativeInt", "Positive", "Probability",
           "Seed", "UnitInterval", "option_field", "ranged"]


def option_field(default: Any, help: str) -> Any:
    """A field with its ``--help`` text (its type, a range included, is the field's annotation)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})
