"""Checks of what options name, before anything runs: files, folders, saved models, encoders, heads.

Each raises :class:`ConfigError` with a message that starts with the option and its value
(``--output x.csv: the same file as --input, ...``). They read the file system but never change it.
:func:`writing` makes a failed write (a full disk) name its file.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A bad option or configuration file; the message starts with the option or file at fault."""


MARKER = ".hire-run"  # written into a run folder before anything else: what makes the folder a run


def is_run_folder(folder: Path | str) -> bool:
    """Whether ``folder`` is a run folder: it carries the marker that ``hire train`` writes first."""
    return (Path(folder).expanduser() / MARKER).is_file()


def read_yaml(path: str | Path, where: str, load: Callable[[str], Any] = yaml.safe_load) -> Any:
    """A YAML file's content, read with ``load``; :class:`ConfigError` (``where: ...``) for a file that is not
    UTF-8, not valid YAML (its line and column), or that gives one key twice in a mapping (YAML loaders keep
    the last value silently: a setting given twice is a mistake that must not pass unnoticed)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    try:
        _no_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader), where)
        return load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or " ".join(str(err).split())
        raise ConfigError(f"{where}: not valid YAML ({at}{problem})") from None


def _no_duplicate_keys(node: yaml.Node | None, where: str) -> None:
    """Walk a composed YAML document; a mapping that holds one scalar key twice is an error naming both lines."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in seen:
                    raise ConfigError(f"{where}: line {line}: the key {key.value!r} is given twice (first on line "
                                      f"{seen[key.value]}); keep one")
                seen[key.value] = line
            _no_duplicate_keys(value, where)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _no_duplicate_keys(item, where)


def check_text_columns(columns: list[str], label_column: str | None, option: str, label_option: str) -> None:
    """One or two distinct text columns, neither of them the label column."""
    if not 1 <= len(columns) <= 2:
        raise ConfigError(f"{option}: give one or two column names, not {len(columns)} ({','.join(columns)})")
    if len(set(columns)) < len(columns):
        raise ConfigError(f"{option}: the same column twice ({','.join(columns)})")
    if label_column in columns:
        raise ConfigError(f"{option}: {label_column!r} is also {label_option}; the model would read the answer")


# What a file mode is, in words (path_kind): the first test that holds names it.
_KINDS = ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def path_kind(path: str | Path) -> str | None:
    """What is at ``path``, in words for a message: ``"a file"``, ``"a folder"``, ``"a device"``, ``"a FIFO (named
    pipe)"``, ``"a socket"``, ``"a symbolic link loop"``, ``"a symbolic link to X, which does not exist"``, ...;
    None where nothing is there. Symbolic links are followed; a loop is told apart from a missing path (where
    ``Path.exists`` says False for both, and ``Path.resolve`` raises)."""
    path = Path(path).expanduser()
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symbolic link loop" if os.path.islink(path) else "a path through a symbolic link loop"
        if os.path.islink(path):
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
        if err.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG):
            return None
        return f"a path that cannot be read ({err.strerror or err})"
    return next((kind for is_kind, kind in _KINDS if is_kind(mode)), "not a file")


UNUSABLE = ("a symbolic link", "a path through", "a path that")  # what no command can read or write through


def real_path(path: str | Path) -> str:
    """``path`` with symbolic links, ``..`` and ``~`` resolved, as far as they resolve: ``os.path.realpath``, which
    (unlike ``Path.resolve`` in Python 3.11) returns a symbolic link loop as it is instead of raising."""
    return os.path.realpath(Path(path).expanduser())


def check_input_file(path: str | Path, option: str, what: str = "a file") -> Path:
    """An existing regular file: not a folder, a device (``/dev/null``), a FIFO or a symbolic link loop, each
    named as what it is (``a folder, not a file``; ``what`` says what the file should be: ``a YAML file``)."""
    file = Path(path).expanduser()
    kind = path_kind(file)
    if kind is None:
        raise ConfigError(f"{option} {path}: no such file")
    if kind != "a file":
        raise ConfigError(f"{option} {path}: {kind}, not {what}")
    return file


def _check_writable(target: Path, option: str, given: str | Path) -> None:
    """The nearest existing path at or above ``target`` is a folder this process may write in."""
    existing = target.absolute()
    while (kind := path_kind(existing)) is None and existing != existing.parent:
        existing = existing.parent
    if kind != "a folder":
        raise ConfigError(f"{option} {given}: {existing} is {kind or 'missing'}, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {given}: cannot write in {existing} (permission denied)")


def check_output_folder(path: str | Path, option: str) -> None:
    """A folder the command may create, or write in."""
    folder = Path(path).expanduser()
    if not str(path).strip():
        raise ConfigError(f"{option}: the path is empty")
    kind = path_kind(folder)
    if kind is not None and kind != "a folder":
        raise ConfigError(f"{option} {path}: {kind}, not a folder")
    _check_writable(folder, option, path)


OUTPUT_MARKER = ".hire-output"  # written into a lab command's output folder before its first file: {"command": ...}


def output_owner(folder: str | Path) -> str | None:
    """The ``hire`` command whose output ``folder`` is, as its marker says: ``train`` for a run folder (``.hire-run``),
    the command named in ``.hire-output`` for the others; None for a folder without a marker (or a missing one)."""
    folder = Path(folder).expanduser()
    if is_run_folder(folder):
        return "train"
    try:
        owner = json.loads((folder / OUTPUT_MARKER).read_text()).get("command")
    except (OSError, ValueError, AttributeError):
        return None
    return owner if isinstance(owner, str) else None


def check_own_folder(path: str | Path, option: str, command: str, writes: Sequence[str] = (),
                     own: Callable[[Path], bool] | None = None, hint: str = "choose a new or empty folder") -> None:
    """The one rule of every command's output folder: no command writes over a file it did not create.

    ``path`` is fine when it is new or empty, when its marker names ``command`` (:data:`OUTPUT_MARKER`, written
    by :func:`hire.runs.mark_output_folder` before the first file), or when ``own`` recognises it as ``command``'s
    from before markers existed (its ``results.json``). Anything else is refused in one line that names the file
    that would be replaced (the first of ``writes``, the names ``command`` writes at the folder's top, that is
    there), else a file the command did not write; ``hint`` says what to do. Read only: nothing is written.
    """
    check_output_folder(path, option)
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return
    present = sorted(p.name for p in folder.iterdir() if p.name not in (".lock", OUTPUT_MARKER))
    owner = output_owner(folder)
    if owner == command or (owner is None and (not present or (own is not None and own(folder)))):
        return
    clash = next((name for name in writes if (folder / name).exists()), None)
    if owner is not None:
        what = f"holds the output of `hire {owner}`" + (f" ({clash}), which `hire {command}` would replace" if clash
                                                         else ", not of this command")
    elif clash is not None:
        what = f"holds {clash}, which `hire {command}` would replace and did not write"
    else:
        what = f"holds files that `hire {command}` did not write ({', '.join(present[:3])})"
    raise ConfigError(f"{option} {path}: {what}; {hint}")


def own_file(path: str | Path, recognise: Callable[[str], bool]) -> bool:
    """Whether an existing file was written by the command that ``recognise`` knows (given its first line, read as
    UTF-8); False for a file that cannot be read so."""
    try:
        with Path(path).expanduser().open(encoding="utf-8") as f:
            return recognise(f.readline())
    except (OSError, UnicodeDecodeError):
        return False


def check_own_file(path: str | Path, option: str, command: str, recognise: Callable[[str], bool],
                   hint: str = "choose another path") -> None:
    """An output file is written only where there is none, or over one that ``command`` wrote (``recognise`` knows
    its first line: :func:`own_file`); a device or pipe (``/dev/stdout``) is written to, never replaced."""
    file = Path(path).expanduser()
    if file.is_file() and file.stat().st_size and not own_file(file, recognise):
        raise ConfigError(f"{option} {path}: a file that `hire {command}` did not write, which it would replace; "
                          f"{hint}")


def check_output_file(path: str | Path, option: str, inputs: Mapping[str, str | Path] | None = None) -> Path:
    """A file the command may write, and none of its ``inputs`` (option -> path): it would be replaced."""
    file = Path(path).expanduser()
    kind = path_kind(file)
    if kind == "a folder":
        raise ConfigError(f"{option} {path}: a folder; give a file name")
    if kind is not None and kind.startswith(UNUSABLE):
        raise ConfigError(f"{option} {path}: {kind}")
    for input_option, input_path in (inputs or {}).items():
        if real_path(file) == real_path(input_path):
            raise ConfigError(f"{option} {path}: the same file as {input_option}, which it would replace; "
                              "choose another path")
    if file.exists() and not os.access(file, os.W_OK):
        raise ConfigError(f"{option} {path}: the file is not writable (permission denied)")
    _check_writable(file.parent, option, path)
    return file


def check_saved_model(path: str | Path, option: str) -> Path:
    """A folder written by ``HireModel.save_pretrained``."""
    folder = Path(path).expanduser()
    kind = path_kind(folder)
    if kind is None:
        raise ConfigError(f"{option} {path}: no such folder")
    if kind.startswith(UNUSABLE):
        raise ConfigError(f"{option} {path}: {kind}")
    if not (folder / "config.json").is_file():
        hint = f"; its best model is {Path(path) / 'best'}" if (folder / "best" / "config.json").is_file() else ""
        raise ConfigError(f"{option} {path}: not a saved hire model (no config.json){hint}")
    return folder


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Name ``path`` in an OSError that does not (a full disk is reported at the write, without a name)."""
    try:
        yield
    except OSError as err:
        if err.filename is None and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a temporary name beside ``path`` to write; on success it replaces ``path`` in one rename, so a
    reader (or a crash) sees the old file or the new one, never half of one. On failure it is removed, and an
    OSError that names no file (a full disk) names ``path``.
    A path that exists but is no regular file (``/dev/stdout``, a pipe) is written in place."""
    if path.exists() and not path.is_file():
        with writing(path):
            yield path
        return
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with writing(path):
            yield tmp
            with tmp.open("rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def report_dir_problem(out: Path, key: str) -> str | None:
    """Why a check's or benchmark's ``OUT`` folder cannot take its report: a file, or a folder of other files
    (another report's, an experiment's); a folder the same script wrote before (its ``results.json`` has ``key``)
    is fine. None where it can."""
    if out.exists() and not out.is_dir():
        return f"OUT {out} is a file, not a folder"
    if out.is_dir() and any(out.iterdir()):
        try:
            own = key in json.loads((out / "results.json").read_text())
        except (OSError, ValueError):
            own = False
        if not own:
            return f"OUT {out} holds files this script did not write; choose a new folder (nothing was written)"
    return None
