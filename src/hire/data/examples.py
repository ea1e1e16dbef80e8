"""The records every reader produces, and the error every reader raises."""

from __future__ import annotations

from dataclasses import dataclass


class DataError(ValueError):
    """Bad input data. The message always names the file (and line, where there is one) at fault."""


class MissingData(DataError):
    """A named data set's split file is not there (a folder without GLUE's ``test.tsv``, say): an error where the
    split is needed, and no error where it is not (``hire evaluate --split dev`` never reads the test split)."""


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


@dataclass(frozen=True)
class TokenExample:
    """One sentence of a token task (NER, chunking, part-of-speech tagging): its words and one tag per word.

    ``tags`` are as the task's scheme reads them (IOB2 for entity and chunk tags, whatever the file's scheme
    was; plain tags for parts of speech), ``None`` for unlabelled text. ``document`` numbers the document the
    sentence belongs to (``-DOCSTART-`` lines separate documents; ``None``: the file has no documents), for
    document context. ``line`` is the file's 1-based line of the sentence's first word (0: not from a file).
    """

    guid: str
    tokens: tuple[str, ...]
    tags: tuple[str, ...] | None = None
    document: int | None = None
    line: int = 0
