"""CoNLL-U, the format of Universal Dependencies treebanks: a reader that checks what it reads.

A sentence is ``#`` comment lines (``# sent_id = ...``, ``# text = ...``), then one line per syntactic word with
ten tab-separated columns (ID, FORM, LEMMA, UPOS, XPOS, FEATS, HEAD, DEPREL, DEPS, MISC), then a blank line.
Two kinds of line are not words and are kept aside: multi-word tokens (ID ``4-5``: the surface form of words
4 and 5, such as *don't* for *do* + *n't*) and empty nodes (ID ``8.1``, of the enhanced graph only).

Every problem is a :class:`~hire.data.examples.DataError` whose one-line message names the file and line: a
wrong column count, an ID or HEAD that is not an integer, IDs out of sequence, a head out of range, a tree with
no root, two roots or a cycle, malformed FEATS, bytes that are not UTF-8, a file with no sentence. Hand-written:
the maintained CoNLL-U parsers (``conllu``, ``pyconll``) accept most of these without a word, so a silent
wrong tree would become a silent wrong label.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hire.data.examples import DataError
from hire.data.files import data_error, default_data_dir, iter_lines

__all__ = ["EmptyNode", "MultiwordToken", "Sentence", "SplitFiles", "Word", "default_ud_dir", "find_treebank",
           "read_conllu"]

UD_ENV = "HIRE_UD_DIR"
TREEBANK_HELP = ("UD treebank: a folder (<name>-ud-{train,dev,test}.conllu) or each split named, "
                 "train=PATH,dev=PATH,test=PATH (PATH a .conllu file or a treebank folder; a split named twice "
                 "combines its files), e.g. train=en_ewt,dev=en_ewt,test=en_pud to test on another treebank "
                 "(default: $HIRE_UD_DIR or ../shared/data/ud/en_ewt)")
SPLITS = ("train", "dev", "test")
_COLUMNS = 10
_FEATURE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\[\]-]*=[A-Za-z0-9_][A-Za-z0-9_,.+-]*")
_RANGE = re.compile(r"(\d+)-(\d+)")
_EMPTY = re.compile(r"(\d+)\.(\d+)")


@dataclass(frozen=True)
class Word:
    """One syntactic word: ``head`` 0 is the root; ``feats`` maps a feature to its value (``{"Tense": "Past"}``)."""

    id: int
    form: str
    lemma: str
    upos: str
    xpos: str
    feats: dict[str, str]
    head: int
    deprel: str
    misc: str = "_"


@dataclass(frozen=True)
class MultiwordToken:
    """A surface token spelling words ``first``..``last`` (``don't`` for ``do`` + ``n't``)."""

    first: int
    last: int
    form: str


@dataclass(frozen=True)
class EmptyNode:
    """An empty node of the enhanced graph (ID ``8.1``): after word ``after``; not part of the basic tree."""

    after: int
    index: int
    form: str


@dataclass
class Sentence:
    """A sentence: its words (``words[i].id == i + 1``), multi-word tokens and empty nodes kept aside, its
    ``# sent_id`` and ``# text`` (None where the file has none), and where it starts (``path``, ``line``)."""

    words: list[Word]
    sent_id: str | None = None
    text: str | None = None
    multiword: list[MultiwordToken] = field(default_factory=list)
    empty: list[EmptyNode] = field(default_factory=list)
    path: str = ""
    line: int = 0

    def tokens(self) -> list[tuple[str, int, int]]:
        """The surface tokens in order, each ``(form, first word id, last word id)``: a multi-word token
        stands for its words, every other word for itself."""
        starts = {m.first: m for m in self.multiword}
        out, i = [], 1
        while i <= len(self.words):
            if i in starts:
                m = starts[i]
                out.append((m.form, m.first, m.last))
                i = m.last + 1
            else:
                out.append((self.words[i - 1].form, i, i))
                i += 1
        return out

    def children(self) -> dict[int, list[int]]:
        """Word id (0: the virtual root) -> its dependents' ids, in order."""
        kids: dict[int, list[int]] = {i: [] for i in range(len(self.words) + 1)}
        for w in self.words:
            kids[w.head].append(w.id)
        return kids

    @property
    def root(self) -> Word:
        return next(w for w in self.words if w.head == 0)

    def depths(self) -> list[int]:
        """Each word's depth (the root 1, its dependents 2, ...), in word order; the tree is checked acyclic."""
        depth = [0] * (len(self.words) + 1)
        order = [0]
        kids = self.children()
        for node in order:  # breadth first from the virtual root
            for kid in kids[node]:
                depth[kid] = depth[node] + 1
                order.append(kid)
        return depth[1:]


def default_ud_dir() -> Path:
    """The treebank read when none is given: ``$HIRE_UD_DIR`` if set; else the first existing of
    ``<repo>/../shared/data/ud/en_ewt`` and ``./../shared/data/ud/en_ewt``; else the first (so that a "not found"
    error names it)."""
    return default_data_dir(UD_ENV, "ud", "en_ewt")


def read_conllu(path: str | Path) -> list[Sentence]:
    """Every sentence of a CoNLL-U file, checked (see the module docstring); DataError naming file and line."""
    sentences = list(_sentences(Path(path)))
    if not sentences:
        raise data_error(path, None, "no sentence in this CoNLL-U file (it is empty or holds only comments)")
    return sentences


@dataclass(frozen=True)
class SplitFiles:
    """The CoNLL-U file(s) of one split: one treebank's, or several combined (read one after another)."""

    paths: tuple[Path, ...]

    def __str__(self) -> str:
        return " + ".join(str(p) for p in self.paths)

    @property
    def parent(self) -> str:
        """The folder(s) the files are in (for a report's "from ..." line)."""
        return " + ".join(dict.fromkeys(str(p.parent) for p in self.paths))

    def read(self) -> list[Sentence]:
        """Every sentence of every file, in order (:func:`read_conllu`: DataError naming file and line)."""
        return [x for p in self.paths for x in read_conllu(p)]


def _split_file(folder: Path, split: str, option: str, spec: str) -> Path | None:
    """The folder's ``<name>-ud-<split>.conllu`` (None where it has none); two of them are a DataError."""
    matches = sorted(folder.glob(f"*-ud-{split}.conllu"))
    if len(matches) > 1:
        raise DataError(f"{option} {spec}: {len(matches)} {split} files in {folder} "
                        f"({', '.join(p.name for p in matches)}); name the file: {option} {split}=FILE")
    return matches[0] if matches else None


def find_treebank(spec: str | Path, option: str = "--treebank", need: tuple[str, ...] = SPLITS,
                  command: str = "this command") -> dict[str, SplitFiles]:
    """The CoNLL-U files of each split that ``spec`` names, by split (``train``, ``dev``, ``test``, as found).

    ``spec`` is a treebank folder, whose files go by UD's names (``<name>-ud-train.conllu``, ``-dev``, ``-test``;
    any subset: PUD releases a test file alone), or split assignments separated by commas, each
    ``SPLIT=PATH`` with PATH a CoNLL-U file or a treebank folder (its file of that split); a split named more than
    once combines its files (train on two treebanks). So ``train=en_ewt,dev=en_ewt,test=en_pud`` trains on one
    treebank and tests on another. The splits of ``need`` that are missing are a DataError of one line naming the
    option, what was found, and how to name the rest.
    """
    text = str(spec)
    items = [item.strip() for item in text.split(",") if item.strip()]
    named = bool(items) and all(re.match(r"^(train|dev|test)=", item) for item in items)
    if not named and any(re.match(r"^\w+=", item) for item in items):
        bad = next(item for item in items if not re.match(r"^(train|dev|test)=", item))
        raise DataError(f"{option} {text}: {bad!r} is not SPLIT=PATH with SPLIT one of train, dev, test")
    found: dict[str, list[Path]] = {}
    if named:
        for item in items:
            split, _, where = item.partition("=")
            if not where.strip():
                raise DataError(f"{option} {text}: {split}= names no file or folder")
            path = Path(where.strip()).expanduser()
            if path.is_dir():
                file = _split_file(path, split, option, text)
                if file is None:
                    raise DataError(f"{option} {text}: {path} holds no *-ud-{split}.conllu for {split}=")
                path = file
            elif not path.is_file():
                raise DataError(f"{option} {text}: {split}={path}: no such file or folder")
            if path in found.get(split, []):
                raise DataError(f"{option} {text}: {path} is named twice for {split}")
            found.setdefault(split, []).append(path)
    else:
        folder = Path(text).expanduser()
        if not folder.is_dir():
            what = "a file, not a folder" if folder.exists() else "no such folder"
            raise DataError(f"{option} {folder}: {what} (a UD treebank folder holds <name>-ud-train.conllu, "
                            "-dev.conllu and/or -test.conllu; or name each split: train=PATH,dev=PATH,test=PATH)")
        for split in SPLITS:
            file = _split_file(folder, split, option, text)
            if file is not None:
                found[split] = [file]
        if not found:
            raise DataError(f"{option} {folder}: no CoNLL-U file (expected <name>-ud-train.conllu, "
                            "<name>-ud-dev.conllu and/or <name>-ud-test.conllu, as UD releases them)")
    missing = [s for s in need if s not in found]
    if missing:
        has = ", ".join(found) or "no split"
        example = ",".join(f"{s}={'FILE_OR_FOLDER' if s in missing else str(found[s][0])}" for s in need)
        raise DataError(f"{option} {text}: {command} needs the {' and '.join(missing)} split(s) as well, and this "
                        f"holds {has}; name each split's file or treebank folder, e.g. {option} {example}")
    return {s: SplitFiles(tuple(found[s])) for s in SPLITS if s in found}


def parse_feats(text: str) -> dict[str, str] | None:
    """``Name=Value|Name=Value`` (or ``_``) as a dict; None where malformed (a part without ``=``, a name twice)."""
    if text == "_":
        return {}
    feats = {}
    for part in text.split("|"):
        if not _FEATURE.fullmatch(part):
            return None
        name, value = part.split("=", 1)
        if name in feats:
            return None
        feats[name] = value
    return feats


def _sentences(path: Path) -> Iterator[Sentence]:
    """The sentences of each block of non-blank lines (blank lines end a sentence). A line of spaces or tabs
    alone also ends one; where the block after it goes on with a sentence (its first line is a word line that
    is not word 1), the error names that line, not the word after it."""
    spaces = 0  # the last line of whitespace alone before this block (0: none)
    for blank, block in itertools.groupby(iter_lines(path), key=lambda numbered: not numbered[1].strip()):
        lines = list(block)
        if blank:
            spaces = next((number for number, line in reversed(lines) if line), 0)
            continue
        ident = lines[0][1].split("\t", 1)[0]
        if spaces and not ident.startswith("#") and not re.fullmatch(r"1|1-\d+|0\.\d+", ident):
            raise data_error(path, spaces, f"a line of whitespace alone, which ends a sentence, but line "
                                           f"{lines[0][0]} goes on with word {ident!r}; remove the whitespace (a "
                                           "line between words must hold a word)")
        spaces = 0
        yield from _sentence(path, lines)


def _sentence(path: Path, block: list[tuple[int, str]]) -> Iterator[Sentence]:
    """The sentence of a block of non-blank lines (comments first, then word, multi-word and empty-node lines);
    nothing for a block of comments alone."""
    if all(line.startswith("#") for _, line in block):
        return
    sent = Sentence([], path=str(path), line=block[0][0])
    lines: list[int] = []  # the line of each word
    for number, line in block:
        if line.startswith("#"):
            if lines:
                raise data_error(path, number, "a comment line among a sentence's word lines (comments come "
                                               "before the words; a blank line ends a sentence)")
            key, sep, value = line[1:].partition("=")
            if sep and key.strip() in ("sent_id", "text"):
                setattr(sent, key.strip(), value.strip())
            continue
        cols = line.split("\t")
        if len(cols) != _COLUMNS:
            raise data_error(path, number, f"{len(cols)} tab-separated columns, CoNLL-U has {_COLUMNS} (ID, FORM, "
                                           "LEMMA, UPOS, XPOS, FEATS, HEAD, DEPREL, DEPS, MISC)")
        _add_line(sent, lines, cols, path, number)
    if not sent.words:
        raise data_error(path, block[0][0], "a sentence with no word line")
    for m in sent.multiword:
        if m.last > len(sent.words):
            raise data_error(path, block[-1][0], f"multi-word token {m.first}-{m.last} runs past the last word "
                                                 f"({len(sent.words)})")
    _check_tree(sent, lines, path)
    yield sent


def _add_line(sent: Sentence, lines: list[int], cols: list[str], path: Path, number: int) -> None:
    ident, form = cols[0], cols[1]
    next_id = len(sent.words) + 1
    if (span := _RANGE.fullmatch(ident)) is not None:
        first, last = int(span.group(1)), int(span.group(2))
        if first != next_id or last <= first:
            raise data_error(path, number, f"multi-word token {ident}: expected a range {next_id}-N (N > {next_id})"
                                           " starting at the next word")
        sent.multiword.append(MultiwordToken(first, last, form))
        return
    if (empty := _EMPTY.fullmatch(ident)) is not None:
        sent.empty.append(EmptyNode(int(empty.group(1)), int(empty.group(2)), form))
        return
    if not (ident.isascii() and ident.isdigit()):  # "²" is a digit to str.isdigit but not to int()
        raise data_error(path, number, f"ID {ident!r} is not an integer (nor a range 4-5 or an empty node 8.1)")
    if int(ident) != next_id:
        raise data_error(path, number, f"word ID {ident} out of sequence (expected {next_id})")
    head = cols[6]
    if not (head.isascii() and head.isdigit()):
        raise data_error(path, number, f"HEAD {head!r} is not an integer (0 for the root)")
    feats = parse_feats(cols[5])
    if feats is None:
        raise data_error(path, number, f"malformed FEATS {cols[5]!r} (expected _ or Name=Value pairs joined by |, "
                                       "each name once)")
    if not cols[7] or cols[7] == "_":
        raise data_error(path, number, "no DEPREL")
    sent.words.append(Word(next_id, form, cols[2], cols[3], cols[4], feats, int(head), cols[7], cols[9]))
    lines.append(number)


def _check_tree(sent: Sentence, lines: list[int], path: Path) -> None:
    """Heads in range, exactly one root, and every word reaching it (no cycle)."""
    n = len(sent.words)
    for w, number in zip(sent.words, lines, strict=True):
        if w.head > n:
            raise data_error(path, number, f"HEAD {w.head} of word {w.id} is out of range (the sentence has {n} "
                                           "words)")
        if w.head == w.id:
            raise data_error(path, number, f"word {w.id} is its own head")
    roots = [i for i, w in enumerate(sent.words) if w.head == 0]
    if not roots:
        raise data_error(path, lines[0], "a sentence with no root (no word has HEAD 0)")
    if len(roots) > 1:
        raise data_error(path, lines[roots[1]], f"a second root (words {sent.words[roots[0]].id} and "
                                                f"{sent.words[roots[1]].id} both have HEAD 0)")
    reaches = [False] * (n + 1)
    reaches[0] = True
    for w in sent.words:
        trail, node = [], w.id
        while not reaches[node] and node not in trail:
            trail.append(node)
            node = sent.words[node - 1].head
        if not reaches[node]:
            raise data_error(path, lines[node - 1], f"the heads form a cycle through words "
                                                    f"{', '.join(map(str, sorted(trail[trail.index(node):])))}")
        for t in trail:
            reaches[t] = True
