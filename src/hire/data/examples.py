"""The records every reader produces, and the error every reader raises."""

from __future__ import annotations

from dataclasses import dataclass


class DataError(ValueError):
    """Bad input data. The message always names the file (and line, where there is one) at fault."""


@dataclass(frozen=True)
class Example:
    """One sentence or sentence pair.

    ``label`` is the label as spelled in the file for classification (``"1"``, ``"entailment"``),
    a float for regression, and ``None`` for unlabeled (test) examples. ``guid`` is the example's
    id within its split: the file's index column where it has one, else the 0-based row number.
    """

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None
