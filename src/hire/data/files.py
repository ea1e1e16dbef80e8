"""Readers for users' own data: CSV, TSV and JSON-lines tables.

Also holds the helpers that the other readers share (GLUE, CoNLL, ranking files, TREC files): every reader
here reads UTF-8 text line by line, ends a line only at ``\\n`` (so a stray ``\\r``, ``\\x85`` or ``\\u2028``
inside a field never splits a row), and raises :class:`DataError` naming the file and the 1-based line.
"""

from __future__ import annotations

import codecs
import csv
import ctypes
import itertools
import json
import math
import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hire.data.examples import DataError, Example

__all__ = ["EXTENSIONS", "data_error", "default_data_dir", "delimited_rows", "header_records", "infer_label_names",
           "iter_lines", "number_value", "read_table", "text_value", "utf8_error"]

_ID_COLUMNS = ("id", "idx", "index")
# The table formats read by file extension (``.txt`` is tab-separated, ``.json`` is JSON lines).
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}


def data_error(path: str | Path, line: int | None, message: str) -> DataError:
    """Build a DataError whose message starts with ``<path>, line <n>:``."""
    where = f"{path}, line {line}" if line is not None else str(path)
    return DataError(f"{where}: {message}")


def utf8_error(path: str | Path) -> DataError:
    """Locate the first line of ``path`` that is not valid UTF-8 and describe it.

    Decoding errors surface while a text stream reads ahead in blocks, so the line being parsed at
    that moment is not the culprit; re-scanning the raw bytes gives the true line.
    """
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return data_error(
                    path,
                    number,
                    f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                    "save the file as UTF-8",
                )
    return data_error(path, None, "not valid UTF-8; save the file as UTF-8")


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` for each line, without its ``\\n`` / ``\\r\\n`` ending.

    A UTF-8 byte-order mark is dropped; a missing final newline is fine.
    """
    try:
        # newline="\n": only LF ends a line, and a CR before it is left for us to strip.
        with open(path, encoding="utf-8-sig", newline="\n") as handle:
            for number, line in enumerate(handle, start=1):
                yield number, line.removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError as exc:
        raise utf8_error(path) from exc


def json_objects(text: str, where: str, expected: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of JSON-lines ``text``; a line that is not a JSON object is a
    DataError naming ``where``, the line and what was ``expected`` in it. Lines end at ``\n`` alone (a ``\r`` before
    it dropped), as :func:`iter_lines` reads them: a U+2028 inside a JSON string ends no line."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}, line {number}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise DataError(f"{where}, line {number}: expected a JSON object with {expected}, found a "
                            f"{type(row).__name__}")
        yield number, row


def default_data_dir(env_var: str, *parts: str) -> Path:
    """Where a data set is looked for when no data dir is given: ``$<env_var>`` if set; else the first existing of
    ``<repo>/../shared/data/<parts>`` and ``./../shared/data/<parts>``; else the first (so that a "not found"
    error names it)."""
    env = os.environ.get(env_var)
    if env:
        return Path(env).expanduser()
    repo_root = Path(__file__).resolve().parents[3]
    candidates = [repo_root.parent.joinpath("shared", "data", *parts).resolve(),
                  Path.cwd().joinpath("..", "shared", "data", *parts).resolve()]
    return next((path for path in candidates if path.is_dir()), candidates[0])


# Python's csv module refuses a field longer than 128 KiB unless told otherwise; a long document in one cell is
# valid CSV, so the limit is raised to the largest the module takes (a C long: 2**31 - 1 where that is 32 bits).
_CSV_FIELD_LIMIT = (1 << (8 * ctypes.sizeof(ctypes.c_long) - 1)) - 1


def delimited_rows(path: Path, kind: str) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line number, fields)`` for a CSV (quoted, RFC 4180) or TSV (no quoting) file.

    A CSV field may be of any length (no 128 KiB limit); the process's own csv limit is restored after each
    row, so that no other reader of CSV in the process sees it changed.
    """
    if kind == "tsv":
        # Quotes are ordinary characters in TSV: a quote must never swallow a tab or a line.
        for number, line in iter_lines(path):
            yield number, ([] if line == "" else line.split("\t"))
        return
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, strict=True)
            while True:
                start = reader.line_num + 1  # a quoted field may span lines: report where the row begins
                previous = csv.field_size_limit(_CSV_FIELD_LIMIT)
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    raise data_error(path, start, f"malformed CSV ({exc})") from exc
                finally:
                    csv.field_size_limit(previous)
                yield start, row
    except UnicodeDecodeError as exc:
        raise utf8_error(path) from exc


def _table_records(path: Path, kind: str) -> tuple[int, list[str], Iterator[tuple[int, dict[str, Any]]]]:
    """Read the header row; return its line number, its column names and an iterator of
    ``(line number, record)`` with those names as keys."""
    rows = delimited_rows(path, kind)
    first = next(rows, None)
    if first is None:
        raise data_error(path, 1, "the file is empty (expected a header row)")
    header_line, header = first
    header = [name.strip() for name in header]
    if not any(header):
        raise data_error(path, header_line, "the header row is empty")
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise data_error(path, header_line, f"duplicate column name(s) in the header: {duplicates}")

    def records() -> Iterator[tuple[int, dict[str, Any]]]:
        for number, fields in rows:
            if not fields:
                raise data_error(path, number, "the line is empty (blank lines are not allowed)")
            if len(fields) != len(header):
                sep = "tab-separated" if kind == "tsv" else "comma-separated"
                message = f"expected {len(header)} {sep} fields (as in the header), found {len(fields)}"
                raise data_error(path, number, message)
            yield number, dict(zip(header, fields, strict=True))

    return header_line, header, records()


def _jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for a JSON-lines file (one object per line)."""
    for number, line in iter_lines(path):
        if not line.strip():
            raise data_error(path, number, "the line is empty (JSON lines needs one object per line)")
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            hint = ""
            if line.lstrip().startswith("["):
                hint = "; a JSON array is not supported, write one object per line"
            raise data_error(path, number, f"invalid JSON ({exc.msg} at column {exc.colno}){hint}") from exc
        if not isinstance(record, dict):
            hint = (
                " (a JSON array is not supported: write one object per line)"
                if isinstance(record, list)
                else ""
            )
            raise data_error(path, number, f"expected a JSON object, found {type(record).__name__}{hint}")
        yield number, record


def header_records(path: Path, kind: str) -> tuple[int, list[str], Iterator[tuple[int, dict[str, Any]]]]:
    """The column names of a table with a header (``kind``: ``csv``, ``tsv`` or ``jsonl``), the line that fixes
    them, and ``(line number, record)`` for every row, the header's line excluded.

    A CSV / TSV file's header row names the columns; a JSON-lines file has no header, so its first object's keys
    are the columns, and that object is the first record.
    """
    if kind != "jsonl":
        return _table_records(path, kind)
    records = _jsonl_records(path)
    first = next(records, None)
    if first is None:
        raise data_error(path, 1, "the file is empty (expected one JSON object per line)")
    return first[0], list(first[1]), itertools.chain([first], records)


def text_value(path: Path, number: int, column: str, value: Any) -> str:
    """``value`` as the text of ``column`` on line ``number``: it must be a string, and not blank."""
    if value is None:
        raise data_error(path, number, f"the text in column {column!r} is missing")
    if not isinstance(value, str):
        raise data_error(path, number, f"the text in column {column!r} must be a string, got {value!r}")
    if not value.strip():
        raise data_error(path, number, f"the text in column {column!r} is empty")
    return value


def number_value(value: Any) -> float | None:
    """``value`` (a JSON number, or text that reads as one) as a float; ``None`` when it is not a number. A boolean
    is not one, though ``float(True)`` would silently give 1.0."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON integer of hundreds of digits
        return None


def _label(path: Path, number: int, column: str, value: Any, regression: bool, required: bool) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise data_error(path, number, f"the label in column {column!r} is missing")
        return None
    if regression:
        score = number_value(value)
        if score is None:
            raise data_error(path, number, f"regression label {value!r} is not a number")
        if not math.isfinite(score):
            raise data_error(path, number, f"regression label {value!r} is not a finite number")
        return score
    if isinstance(value, (dict, list)):
        raise data_error(path, number, f"label {value!r} must be a string, number or boolean")
    return value.strip() if isinstance(value, str) else str(value)


def read_table(
    path: str | Path,
    text_columns: Sequence[str],
    label_column: str | None,
    regression: bool = False,
    require_label: bool = True,
    labels: Collection[str] | None = None,
    labels_from: str = "the training file",
) -> list[Example]:
    """Read a user's table into examples.

    Formats by extension: ``.csv`` (comma-separated, standard quoting), ``.tsv`` / ``.txt``
    (tab-separated, no quoting), each with a header row; ``.jsonl`` / ``.json`` (one JSON object
    per line). ``text_columns`` names 1 or 2 text columns (``text_a`` and ``text_b``).

    ``guid`` is the ``id`` / ``idx`` / ``index`` column if there is one, else the 0-based row number.
    Classification labels are strings (JSON numbers and booleans go through ``str``); regression
    labels are floats. ``label_column=None`` reads no labels. With ``require_label=False`` a missing
    label column gives ``None`` labels, and so does an empty label value. Given ``labels`` (those of
    ``labels_from``), any other classification label is an error: a typo must not become a new class.

    Raises:
        DataError: naming the file and line (or the column at fault and the columns that exist).
    """
    path = Path(path)
    if isinstance(text_columns, str) or not 1 <= len(text_columns) <= 2:
        raise DataError(f"text_columns must name 1 or 2 columns, got {text_columns!r}")
    if len(set(text_columns)) < len(text_columns):
        raise DataError(f"text_columns names the same column twice ({list(text_columns)}): a pair needs two columns")
    if label_column is not None and label_column in text_columns:
        raise DataError(f"text column {label_column!r} is also the label column: the model would read the label")
    kind = EXTENSIONS.get(path.suffix.lower())
    if kind is None:
        raise data_error(
            path, None, f"unknown file extension {path.suffix!r}; use one of {', '.join(EXTENSIONS)}"
        )
    if not path.is_file():
        raise data_error(path, None, "file not found")
    columns_line, columns, records = header_records(path, kind)
    wanted = list(text_columns) + ([label_column] if label_column and require_label else [])
    for column in wanted:
        if column not in columns:
            raise data_error(path, columns_line, f"no column {column!r}; the columns are {columns}")
    has_label = label_column is not None and label_column in columns
    id_column = next((name for name in _ID_COLUMNS if name in columns), None)

    examples: list[Example] = []
    for row, (number, record) in enumerate(records):
        for column in text_columns:
            if column not in record:
                raise data_error(path, number, f"no column {column!r} on this line; it has {list(record)}")
        texts = [text_value(path, number, column, record[column]) for column in text_columns]
        label = None
        if has_label and label_column is not None:
            if label_column not in record and require_label:
                message = f"no column {label_column!r} on this line; it has {list(record)}"
                raise data_error(path, number, message)
            label = _label(path, number, label_column, record.get(label_column), regression, require_label)
            if labels is not None and isinstance(label, str) and label not in labels:
                message = f"label {label!r} is not one of the labels of {labels_from}: {list(labels)} (a typo?)"
                raise data_error(path, number, message)
        guid = str(row)
        if id_column is not None:
            value = record.get(id_column)
            if value is None or not str(value).strip():
                raise data_error(path, number, f"the id in column {id_column!r} is missing")
            guid = str(value).strip()
        examples.append(Example(guid=guid, text_a=texts[0], text_b=texts[1] if len(texts) > 1 else None, label=label))
    if not examples:
        raise data_error(path, columns_line + 1, "the file has a header but no data rows")
    return examples


def _label_sort_key(label: str) -> tuple[int, float, str]:
    try:
        number = float(label)
    except ValueError:
        return (1, 0.0, label)
    return (0, number, label) if math.isfinite(number) else (1, 0.0, label)


def infer_label_names(examples: Iterable[Example]) -> tuple[str, ...]:
    """The sorted set of the examples' classification labels (``None`` labels are ignored).

    Numeric labels sort numerically ("2" before "10") and come before non-numeric ones, which sort
    alphabetically, so the label -> id mapping is the same on every run.

    Raises:
        DataError: if there are no labels, or a label is a float (a regression target).
    """
    labels: set[str] = set()
    for example in examples:
        if example.label is None:
            continue
        if not isinstance(example.label, str):
            raise DataError(
                f"example {example.guid!r} has a numeric label {example.label!r}: "
                "label names exist only for classification"
            )
        labels.add(example.label)
    if not labels:
        raise DataError("the examples have no labels to infer label names from")
    return tuple(sorted(labels, key=_label_sort_key))
