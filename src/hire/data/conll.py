"""Token tasks' data (NER, chunking, parts of speech): CoNLL column files and token JSON lines.

Formats:

- ``conll``: one word per line, its fields split by a tab (when the first word line has one) or else by runs of
  spaces; the token and tag columns are picked by index (negative: from the end), and every word line has as
  many columns as the first. A blank line (empty, spaces only, a lone tab, ``\\r\\n``) ends a sentence; a
  ``-DOCSTART-`` line ends one too and starts a new document, and is never a word.
- ``tokens``: one JSON object per line, ``{"tokens": [...], "tags": [...]}``, with an optional ``"id"`` (the
  guid; else the 0-based sentence index) and an optional ``"document"`` (any id; numbered from 0 in order).

Tag schemes. Tags that are all ``O`` or ``PREFIX-TYPE`` (prefix B, I, E or S) mark chunks. IOB1 begins a chunk
with I- and uses B- only right after a chunk of the same type; IOB2 begins every chunk with B-; BIOES also ends
every chunk with E- and marks a one-word chunk S-. All three are converted to IOB2, the scheme that seqeval's
strict mode scores. ``auto`` detects the scheme: S- or E- anywhere is BIOES, an I- that begins a chunk is IOB1,
else IOB2; any other tag makes the tags plain (``none``: parts of speech), kept as they are. Tags that fit no
single scheme are an error naming the first tag at which they stop fitting. The prefix and ``O`` are read in
either case (``b-per`` is ``B-per``, ``o`` is ``O``: written so, as seqeval's strict mode reads only upper-case
prefixes); the type keeps its case. A file of ``O`` tags alone fits every scheme (:attr:`TokenFile.fits`), so
it agrees with files of any scheme.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hire.data.examples import DataError, MissingData, TokenExample
from hire.data.files import data_error, default_data_dir, iter_lines
from hire.data.glue import data_dir_option_name

__all__ = ["FORMATS", "SCHEMES", "TokenFile", "check_tags", "default_conll2003_dir", "read_conll2003",
           "read_token_file", "tag_names"]

FORMATS = ("conll", "tokens")
SCHEMES = ("auto", "iob1", "iob2", "bioes", "none")
ENV_VAR = "HIRE_CONLL2003_DIR"
_DOCSTART = "-DOCSTART-"
_SPACES = re.compile(r"[ \t]+")  # not str.split(): a no-break space inside a token must not split it


@dataclass
class TokenFile:
    """The sentences of one file, their tag scheme (``iob1``, ``iob2``, ``bioes`` or ``none``: as detected or
    given; the examples' tags are IOB2 whatever it was) and where they came from."""

    examples: list[TokenExample]
    scheme: str
    path: Path
    format: str = "conll"
    # The schemes the tags fit (a file of O tags alone fits all three), and for plain tags detected by "auto"
    # the line and tag of the first that is not a chunk tag: what a message names when files disagree.
    fits: tuple[str, ...] = ()
    plain: tuple[int, str] | None = None


# Tag scheme evidence: what a tag shows (said of it in messages), and the schemes it rules out.
_EVIDENCE: dict[str, tuple[str, frozenset[str]]] = {
    "i_start": ("begins a chunk with I-", frozenset({"iob2", "bioes"})),
    "b_start": ("begins a chunk with B- where IOB1 has I- (IOB1 uses B- only right after a chunk of its type)",
                frozenset({"iob1"})),
    "bioes": ("has a BIOES prefix (S- or E-)", frozenset({"iob1", "iob2"})),
    "unended": ("ends a chunk without E- (BIOES ends every chunk with E- or S-)", frozenset({"bioes"})),
    "broken": ("ends a chunk (E-) that never began", frozenset({"iob1", "iob2", "bioes"})),
}
_BEGINS = {"I": "i_start", "B": "b_start", "E": "broken"}  # what beginning a chunk with a prefix shows
_PREFERENCE = ("iob2", "iob1", "bioes")  # what "auto" picks among the schemes the tags fit
_Position = tuple[int, int]  # (sentence, word)


def _split_tag(tag: str) -> tuple[str, str] | None:
    """``("B", "PER")`` for ``"B-PER"``, ``("O", "")`` for ``"O"``; None for a tag of no chunk scheme. The prefix
    and ``O`` in either case (``b-per`` is ``("B", "per")``): a lower-case file is still entities."""
    if tag in ("O", "o"):
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIESbies":
        return tag[0].upper(), tag[2:]
    return None


def _evidence(tag_lists: Sequence[Sequence[tuple[str, str]]]) -> dict[str, _Position]:
    """The first position of each kind of scheme evidence among split tags."""
    first: dict[str, _Position] = {}
    for s, tags in enumerate(tag_lists):
        prev_p, prev_t = "O", ""
        for w, (p, t) in enumerate(tags):
            kinds = []
            if p != "O" and not (prev_p in ("B", "I") and prev_t == t):  # p begins a chunk
                kinds.append(_BEGINS.get(p))
            if p in ("S", "E"):
                kinds.append("bioes")
            if p in ("B", "I"):
                next_p, next_t = tags[w + 1] if w + 1 < len(tags) else ("O", "")
                if not (next_p in ("I", "E") and next_t == t):
                    kinds.append("unended")
            for kind in kinds:
                if kind is not None and kind not in first:
                    first[kind] = (s, w)
            prev_p, prev_t = p, t
    return first


def _fitting(first: dict[str, _Position]) -> list[str]:
    """The schemes (in ``_PREFERENCE`` order) that no evidence rules out."""
    return [name for name in _PREFERENCE if not any(name in _EVIDENCE[k][1] for k in first)]


def _resolve_scheme(scheme: str, first: dict[str, _Position], where: Callable[[_Position], tuple[int, str]],
                    path: Path) -> str:
    """The scheme the tags are read in: ``scheme`` checked against the evidence, or the one ``auto`` detects.
    ``where`` gives a position's line and tag, for the error."""

    def say(kind: str) -> tuple[int, str]:
        line, tag = where(first[kind])
        return line, f"tag {tag!r} {_EVIDENCE[kind][0]}"

    if "broken" in first:
        raise data_error(path, *say("broken"))
    if scheme != "auto":
        kind = min((k for k in first if scheme in _EVIDENCE[k][1]), key=first.__getitem__, default=None)
        if kind is None:
            return scheme
        line, text = say(kind)
        raise data_error(path, line, f"{text}, which {scheme.upper()} does not allow (the tags are read as "
                                     f"{scheme.upper()})")
    fitting = _fitting(first)
    if fitting:
        return fitting[0]
    # No scheme fits: name the first tag at which none does, and the earlier tag it conflicts with.
    pairs = [(a, b) for a in first for b in first if a != b and first[a] <= first[b]
             and _EVIDENCE[a][1] | _EVIDENCE[b][1] >= set(_PREFERENCE)]
    earlier, later = min(pairs, key=lambda pair: (first[pair[1]], first[pair[0]]))
    line, text = say(later)
    other_line, other_text = say(earlier)
    raise data_error(path, line, f"{text}, but on line {other_line} {other_text}: the tags mix schemes "
                                 "(a file must be one of IOB1, IOB2, BIOES)")


def _to_iob2(tags: Sequence[tuple[str, str]], scheme: str) -> tuple[str, ...]:
    """Split tags of a checked ``scheme`` as IOB2 tags (for iob2 itself: the prefixes written upper-case)."""
    out = []
    prev_p, prev_t = "O", ""
    for p, t in tags:
        if scheme == "bioes":
            q = {"S": "B", "E": "I"}.get(p, p)
        elif scheme == "iob2":
            q = p
        else:  # IOB1: an I- that begins a chunk becomes B-
            q = "B" if p == "I" and not (prev_p in ("B", "I") and prev_t == t) else p
        out.append("O" if q == "O" else f"{q}-{t}")
        prev_p, prev_t = p, t
    return tuple(out)


@dataclass(frozen=True)
class _Sentence:
    """A sentence as read, before its tags are checked and converted."""

    line: int
    tokens: tuple[str, ...]
    tags: tuple[str, ...] | None
    document: Any  # the file's own document mark; numbered from 0 once the whole file is read
    guid: str | None = None


def _column(index: int, columns: int) -> int | None:
    """``index`` (negative: from the end) as a 0-based column of a line of ``columns``; None if out of range."""
    resolved = index + columns if index < 0 else index
    return resolved if 0 <= resolved < columns else None


def _is_docstart(line: str) -> bool:
    return line.startswith(_DOCSTART) and (len(line) == len(_DOCSTART) or line[len(_DOCSTART)] in " \t")


def _layout(path: Path, number: int, columns: int, token_column: int, tag_column: int,
            require_tags: bool) -> tuple[int, int | None]:
    """The token and tag columns' 0-based indices in word lines of ``columns`` fields (tag None: no tags)."""
    token = _column(token_column, columns)
    if token is None:
        raise data_error(path, number, f"token column {token_column} is out of range: the line has {columns} column(s)")
    tag = _column(tag_column, columns)
    if tag == token and columns > 1:
        raise data_error(path, number, f"tag column {tag_column} is the token column {token_column}")
    if tag is None or tag == token:  # a file of tokens only
        if require_tags:
            raise data_error(path, number, f"tag column {tag_column} is out of range: the line has {columns} "
                                           "column(s)")
        return token, None
    return token, tag


def _conll_sentences(path: Path, token_column: int, tag_column: int, separator: str | None,
                     require_tags: bool) -> tuple[list[_Sentence], int]:
    """The sentences of a CoNLL column file (their document mark: how many -DOCSTART- lines came before, or None
    for a file with none), and the number of lines read."""
    sentences: list[_Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    start = docstarts = number = columns = first_line = token_index = 0
    tag_index: int | None = None

    def split(line: str) -> list[str]:
        if separator is None:
            return _SPACES.split(line.strip(" \t"))
        return [field.strip() for field in line.split(separator)]

    def end_sentence() -> None:
        if tokens:
            sentences.append(_Sentence(start, tuple(tokens), None if tag_index is None else tuple(tags), docstarts))
            tokens.clear()
            tags.clear()

    for number, line in iter_lines(path):
        if not line.strip() or _is_docstart(line):
            end_sentence()
            docstarts += bool(line.strip())
            continue
        if not columns:  # the first word line fixes the separator and the columns
            if separator is None and "\t" in line:
                separator = "\t"
            elif separator is not None and separator not in line.strip() and require_tags:  # not the tag's fault
                raise data_error(path, number, f"the column separator given, {separator!r}, is not in the line: give "
                                               "the one its columns have, or none to split at a tab or runs of spaces")
            columns, first_line = len(split(line)), number
            token_index, tag_index = _layout(path, number, columns, token_column, tag_column, require_tags)
        fields = split(line)
        if len(fields) != columns:
            raise data_error(path, number, f"found {len(fields)} column(s), but line {first_line} has {columns} "
                                           "(every word line needs the same columns)")
        if not tokens:
            start = number
        tokens.append(fields[token_index])
        if tag_index is not None:
            tags.append(fields[tag_index])
        if not tokens[-1] or (tag_index is not None and not tags[-1]):
            raise data_error(path, number, "the tag is empty (an extra separator?)" if tokens[-1] else
                             "the token is empty (an extra separator?)")
    end_sentence()
    if not docstarts:
        sentences = [replace(sentence, document=None) for sentence in sentences]
    return sentences, number


def _strings(path: Path, number: int, record: dict[str, Any], key: str) -> tuple[str, ...]:
    """``record[key]``, a list of non-empty strings (``tokens``, ``tags``), each named in messages as a token or
    tag."""
    value, word = record[key], key.removesuffix("s")
    if not isinstance(value, list):
        raise data_error(path, number, f"{key!r} must be a list of strings, found {type(value).__name__}")
    if not value:
        raise data_error(path, number, f"{key!r} is empty (a sentence needs at least one word)")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            found = "an empty string" if item == "" else f"{item!r}, not a string"
            raise data_error(path, number, f"{word} {i} in {key!r} is {found}")
    return tuple(value)


def _jsonl_sentences(path: Path, require_tags: bool) -> tuple[list[_Sentence], int]:
    """The sentences of a token JSON-lines file, and the number of lines read."""
    sentences: list[_Sentence] = []
    first: tuple[int, bool, bool] | None = None  # the first object's line, whether it has tags and a document
    first_record: dict[str, Any] = {}
    guids: dict[str, int] = {}
    number = 0
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise data_error(path, number, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(record, dict) or "tokens" not in record:
            found = f"keys {sorted(record)}" if isinstance(record, dict) else f"a {type(record).__name__}"
            raise data_error(path, number, 'expected a JSON object {"tokens": [...], "tags": [...]}, found ' + found)
        tokens = _strings(path, number, record, "tokens")
        has_tags, has_document = record.get("tags") is not None, "document" in record
        if first is None:
            first, first_record = (number, has_tags, has_document), record
        if not has_tags and (require_tags or first[1]):
            found = '"tags" is null' if "tags" in record else f'no "tags" (keys: {sorted(record)})'
            raise data_error(path, number, found + (f", but line {first[0]} has tags" if first[1] else ""))
        if has_tags and not first[1]:
            none = '"tags" is null' if "tags" in first_record else 'no "tags"'
            raise data_error(path, number, f"this line has tags but line {first[0]} has none ({none} there)")
        if has_document != first[2]:
            raise data_error(path, number, f"only one of this line and line {first[0]} has a \"document\"")
        tags = _strings(path, number, record, "tags") if has_tags else None
        if tags is not None and len(tags) != len(tokens):
            raise data_error(path, number, f"{len(tokens)} tokens but {len(tags)} tags")
        guid, document = record.get("id"), record.get("document")
        for key, value in (("id", guid), ("document", document)):
            if (key in record) and (isinstance(value, bool) or not isinstance(value, (str, int))):
                raise data_error(path, number, f"{key!r} must be a string or an integer, found {value!r}")
        guid = str(len(sentences)) if guid is None else str(guid)
        if guid in guids:
            raise data_error(path, number, f"id {guid!r} is also the id of line {guids[guid]}")
        guids[guid] = number
        sentences.append(_Sentence(number, tokens, tags, document, guid))
    return sentences, number


@dataclass
class _Tags:
    """What :func:`_checked_tags` found: the scheme, the tags as IOB2 (or as read, for plain tags), the schemes
    they fit, and for plain tags detected by "auto" the first that is not a chunk tag (its line and text)."""

    scheme: str
    tag_lists: list[tuple[str, ...] | None]
    fits: tuple[str, ...]
    plain: tuple[int, str] | None = None


def _checked_tags(sentences: list[_Sentence], scheme: str, line_of: Callable[[_Sentence, int], int],
                  path: Path) -> _Tags:
    """The scheme the sentences' tags are read in (checked, or detected for "auto"), and their tags as IOB2."""
    if scheme == "none" or sentences[0].tags is None:  # every sentence of a file has tags, or none has
        named = "none" if scheme == "auto" else scheme
        return _Tags(named, [sentence.tags for sentence in sentences], (named,))
    tag_lists = [sentence.tags or () for sentence in sentences]
    splits = {tag: _split_tag(tag) for tags in tag_lists for tag in set(tags)}

    def where(position: _Position) -> tuple[int, str]:
        return line_of(sentences[position[0]], position[1]), tag_lists[position[0]][position[1]]

    plain = next(((s, w) for s, tags in enumerate(tag_lists) for w, tag in enumerate(tags) if splits[tag] is None),
                 None)
    if plain is not None:
        if scheme == "auto":
            return _Tags("none", list(tag_lists), ("none",), where(plain))
        line, tag = where(plain)
        raise data_error(path, line, f"tag {tag!r} is not O or a B-, I-, E- or S- prefix and a type, as "
                                     f"{scheme.upper()} needs")
    split_lists = [[splits[tag] for tag in tags] for tags in tag_lists]
    first = _evidence(split_lists)
    scheme = _resolve_scheme(scheme, first, where, path)
    fitting = _fitting(first)
    fits = tuple(fitting) if len(fitting) > 1 else (scheme,)  # several only for O tags alone
    return _Tags(scheme, [_to_iob2(parts, scheme) for parts in split_lists], fits)


def read_token_file(path: str | Path, *, format: str = "conll", token_column: int = 0, tag_column: int = -1,
                    separator: str | None = None, scheme: str = "auto", require_tags: bool = True,
                    option: str = "--data.train_file") -> TokenFile:
    """Read a token task's file (see the module docstring for the formats and the scheme rules).

    ``format``: "conll" or "tokens" (JSON lines). ``token_column`` / ``tag_column``: CoNLL column indices
    (negative: from the end). ``separator``: None detects a tab or runs of spaces. ``scheme``: "auto", "iob1",
    "iob2", "bioes" or "none"; chunk tags come back as IOB2. ``require_tags=False`` reads a file without tags
    (a CoNLL file of one column, JSON lines without "tags") with tags None. ``option`` is named when the file
    is missing. Guids are the 0-based sentence index, or the JSON line's "id". Sentences of any length are read.

    Raises:
        DataError: one line naming the file and line: bad columns, JSON or UTF-8, an empty file, mixed schemes.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown token file format {format!r}; use one of {', '.join(FORMATS)}")
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    if separator == "":
        raise ValueError("the separator must not be empty (None detects a tab or spaces)")
    path = Path(path)
    if not path.is_file():
        found = "is a folder, not a file" if path.is_dir() else "file not found"
        raise data_error(path, None, f"{found} (set {option})")
    if format == "conll":
        sentences, lines = _conll_sentences(path, token_column, tag_column, separator, require_tags)
    else:
        sentences, lines = _jsonl_sentences(path, require_tags)
    if not sentences:
        only = "blank and -DOCSTART- lines" if format == "conll" else "blank lines"
        message = f"no sentences in the file (only {only})" if lines else "the file is empty"
        raise data_error(path, max(lines, 1), message)

    def line_of(sentence: _Sentence, word: int) -> int:
        return sentence.line + word if format == "conll" else sentence.line

    found = _checked_tags(sentences, scheme, line_of, path)
    tag_lists = found.tag_lists
    # Documents are numbered from 0 in the order they first appear (-DOCSTART- count or the JSON "document").
    numbers: dict[Any, int] = {}
    examples = [
        TokenExample(guid=sentence.guid if sentence.guid is not None else str(i), tokens=sentence.tokens,
                     tags=tags, document=None if sentence.document is None
                     else numbers.setdefault(sentence.document, len(numbers)), line=sentence.line)
        for i, (sentence, tags) in enumerate(zip(sentences, tag_lists, strict=True))
    ]
    return TokenFile(examples=examples, scheme=found.scheme, path=path, format=format, fits=found.fits,
                     plain=found.plain)


def tag_names(examples: Iterable[TokenExample]) -> list[str]:
    """The examples' tags, sorted, with "O" first (the tag -> id mapping is the same on every run)."""
    names = {tag for example in examples for tag in example.tags or ()}
    return sorted(names, key=lambda tag: (tag != "O", tag))


def check_tags(examples: Sequence[TokenExample], known: Sequence[str], path: str | Path, unknown: str = "error",
               *, format: str = "conll") -> list[TokenExample]:
    """Check an evaluation file's tags against the training file's (``known``).

    A tag the training file never had is an error naming it and its line (``format`` says how lines count: one
    word per line for "conll", one sentence for "tokens"), or with ``unknown="o"`` becomes "O".

    Raises:
        DataError: at the first unknown tag, when ``unknown`` is "error".
    """
    if unknown not in ("error", "o"):
        raise ValueError(f"unknown must be 'error' or 'o', got {unknown!r}")
    allowed = set(known)
    checked = []
    for example in examples:
        if example.tags is None or allowed.issuperset(example.tags):
            checked.append(example)
        elif unknown == "o":
            checked.append(replace(example, tags=tuple(tag if tag in allowed else "O" for tag in example.tags)))
        else:
            word = next(w for w, tag in enumerate(example.tags) if tag not in allowed)
            line = example.line + word if format == "conll" else example.line
            shown = ", ".join(sorted(allowed)[:12]) + (", ..." if len(allowed) > 12 else "")
            raise data_error(path, line, f"tag {example.tags[word]!r} is not a tag of the training file ({shown}); "
                                         "map unknown tags to O with --data.unknown_tags o")
    return checked


# CoNLL-2003 English, as in ../shared/data/conll2003: IOB2 copies preferred, the IOB1 release as a fallback.
_CONLL2003_FILES = {"train": ("train.txt", "eng.train"), "dev": ("valid.txt", "eng.testa"),
                    "test": ("test.txt", "eng.testb")}
_CONLL2003_SPLITS = {"train": "train", "dev": "dev", "valid": "dev", "testa": "dev", "test": "test", "testb": "test"}
_CONLL2003_COLUMNS = {"pos": 1, "chunk": 2, "ner": 3}


def default_conll2003_dir() -> Path:
    """Where CoNLL-2003 is looked for when no data dir is given: ``$HIRE_CONLL2003_DIR`` if set; else the first
    existing of ``<repo>/../shared/data/conll2003`` and ``./../shared/data/conll2003``; else the first (so that
    a "not found" error names it)."""
    return default_data_dir(ENV_VAR, "conll2003")


def read_conll2003(data_dir: str | Path | None, split: str, tag_column: str | int = "ner") -> TokenFile:
    """One split of CoNLL-2003 English ("train", "dev" = "valid"/"testa", "test" = "testb") from ``data_dir``
    (default :func:`default_conll2003_dir`): ``iob2/`` if there, else ``original_iob1/``, converted to IOB2.
    ``tag_column``: "ner", "chunk", "pos" or a column index (its scheme then detected).

    Raises:
        DataError: for an unknown split or tag column, or naming the paths looked for when the data is missing.
    """
    if split not in _CONLL2003_SPLITS:
        raise DataError(f"unknown CoNLL-2003 split {split!r}; use one of {', '.join(_CONLL2003_SPLITS)}")
    if isinstance(tag_column, str) and tag_column not in _CONLL2003_COLUMNS:
        raise DataError(f"unknown CoNLL-2003 tag column {tag_column!r}; use one of "
                        f"{', '.join(_CONLL2003_COLUMNS)} or a column index")
    root = Path(data_dir).expanduser() if data_dir is not None else default_conll2003_dir()
    names = _CONLL2003_FILES[_CONLL2003_SPLITS[split]]
    paths = (root / "iob2" / names[0], root / "original_iob1" / names[1])
    path = next((path for path in paths if path.is_file()), None)
    if path is None:
        missing = "there is no folder " + str(root) if not root.is_dir() else "neither file exists"
        raise MissingData(f"CoNLL-2003 {split} data not found: {paths[0]} or {paths[1]} ({missing}); set the data "
                          f"dir with {data_dir_option_name()} or {ENV_VAR}")
    if isinstance(tag_column, str):
        column = _CONLL2003_COLUMNS[tag_column]
        scheme = "none" if tag_column == "pos" else "iob2" if path == paths[0] else "iob1"
    else:
        column, scheme = tag_column, "auto"
    return read_token_file(path, tag_column=column, scheme=scheme, option=data_dir_option_name())
