"""The GLUE tasks: their specs and a reader for the official TSV files.

The files are read exactly as the official GLUE download script leaves them
(``<data dir>/<TASK>/{train,dev,test}.tsv``; MNLI with matched/mismatched dev and test files,
the diagnostic set as ``diagnostic/diagnostic.tsv``). Their formats differ per task: CoLA's
train/dev files have no header, MRPC's train/dev begin with a UTF-8 byte-order mark, STS-B has ten
columns, and test files carry an index column but no labels. Fields are split on tabs only (no
quote handling: GLUE sentences contain unbalanced quote characters).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from hire.data.examples import DataError, Example, MissingData
from hire.data.files import data_error, default_data_dir, iter_lines

__all__ = ["GLUE_TASKS", "TaskSpec", "data_dir_option", "default_glue_dir", "get_task", "read_glue_split",
           "task_text_columns"]

ENV_VAR = "HIRE_GLUE_DIR"
# The option that sets the data dir in the command that reads (named when the data is missing): the run
# configuration's by default, which :func:`hire.tasktype.load_task` reads; see :func:`data_dir_option`.
_DATA_DIR_OPTION: ContextVar[str] = ContextVar("glue_data_dir_option", default="--data.data_dir")


@contextmanager
def data_dir_option(option: str) -> Iterator[None]:
    """Within the block, a missing GLUE file's message names ``option`` as the way to set the data dir: for a
    command whose option is not the run configuration's ``--data.data_dir`` (``hire evaluate --data_dir``)
    and that reads GLUE through a layer that does not pass it on (:func:`hire.tasktype.load_task`)."""
    token = _DATA_DIR_OPTION.set(option)
    try:
        yield
    finally:
        _DATA_DIR_OPTION.reset(token)


def data_dir_option_name() -> str:
    """The option that sets the data dir in the running command (:func:`data_dir_option`), for the messages of
    every named data set's reader (GLUE, CoNLL-2003, WikiQA)."""
    return _DATA_DIR_OPTION.get()


@dataclass(frozen=True)
class TaskSpec:
    """What the library needs to know about one GLUE task.

    ``labels`` are spelled as in the training files, in a fixed order (label id = position);
    ``None`` means regression (STS-B). ``splits`` maps split name to file name inside ``folder``;
    ``submission_files`` maps each test split to its GLUE leaderboard file name.
    """

    name: str
    folder: str
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    # Dicts are unhashable: keep them out of the hash so a spec can still key a dict.
    splits: dict[str, str] = field(hash=False)
    submission_files: dict[str, str] = field(hash=False)
    dev_splits: tuple[str, ...]
    test_splits: tuple[str, ...]

    @property
    def is_regression(self) -> bool:
        """True for a task with a real-valued target (STS-B)."""
        return self.labels is None


@dataclass(frozen=True)
class _Layout:
    """Where a split's fields are: column names (headed files) or 0-based indices (CoLA train/dev)."""

    text_a: str | int
    text_b: str | int | None
    label: str | int | None
    guid: str | None
    num_columns: int | None = None  # set only for header-less files


_STANDARD_SPLITS = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
_BINARY = ("0", "1")
_NLI3 = ("contradiction", "entailment", "neutral")
_NLI2 = ("entailment", "not_entailment")


def _spec(name: str, labels: tuple[str, ...] | None, metrics: tuple[str, ...]) -> TaskSpec:
    return TaskSpec(
        name=name,
        folder=name,
        labels=labels,
        metrics=metrics,
        splits=dict(_STANDARD_SPLITS),
        submission_files={"test": f"{name}.tsv"},
        dev_splits=("dev",),
        test_splits=("test",),
    )


GLUE_TASKS: dict[str, TaskSpec] = {
    "CoLA": _spec("CoLA", _BINARY, ("mcc",)),
    "SST-2": _spec("SST-2", _BINARY, ("accuracy",)),
    "MRPC": _spec("MRPC", _BINARY, ("accuracy", "f1")),
    "STS-B": _spec("STS-B", None, ("pearson", "spearman")),
    "QQP": _spec("QQP", _BINARY, ("accuracy", "f1")),
    "MNLI": TaskSpec(
        name="MNLI",
        folder="MNLI",
        labels=_NLI3,
        metrics=("accuracy",),  # reported separately on each dev split
        splits={
            "train": "train.tsv",
            "dev_matched": "dev_matched.tsv",
            "dev_mismatched": "dev_mismatched.tsv",
            "test_matched": "test_matched.tsv",
            "test_mismatched": "test_mismatched.tsv",
        },
        submission_files={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"},
        dev_splits=("dev_matched", "dev_mismatched"),
        test_splits=("test_matched", "test_mismatched"),
    ),
    "QNLI": _spec("QNLI", _NLI2, ("accuracy",)),
    "RTE": _spec("RTE", _NLI2, ("accuracy",)),
    "WNLI": _spec("WNLI", _BINARY, ("accuracy",)),
    # The diagnostic set is scored with MNLI-style labels (R3 = MCC), but ships unlabeled.
    "AX": TaskSpec(
        name="AX",
        folder="diagnostic",
        labels=_NLI3,
        metrics=("mcc",),
        splits={"test": "diagnostic.tsv"},
        submission_files={"test": "AX.tsv"},
        dev_splits=(),
        test_splits=("test",),
    ),
}

def _layouts(text_a: str, text_b: str | None, label: str | None, guid: str | None,
             test_guid: str = "index") -> tuple[_Layout, _Layout]:
    """A task's labelled and test layouts: the same text columns, the test split without labels."""
    return _Layout(text_a, text_b, label, guid), _Layout(text_a, text_b, None, test_guid)


# (labelled splits, test splits) per task.
_LAYOUTS: dict[str, tuple[_Layout, _Layout]] = {
    "CoLA": (_Layout(3, None, 1, None, num_columns=4), _Layout("sentence", None, None, "index")),
    "SST-2": _layouts("sentence", None, "label", None),
    "MRPC": _layouts("#1 String", "#2 String", "Quality", None),
    "STS-B": _layouts("sentence1", "sentence2", "score", "index"),
    "QQP": _layouts("question1", "question2", "is_duplicate", "id", test_guid="id"),
    "MNLI": _layouts("sentence1", "sentence2", "gold_label", "index"),
    "QNLI": _layouts("question", "sentence", "label", "index"),
    "RTE": _layouts("sentence1", "sentence2", "label", "index"),
    "WNLI": _layouts("sentence1", "sentence2", "label", "index"),
    "AX": _layouts("sentence1", "sentence2", None, "index"),  # the labelled layout unused: AX has no labels
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_\s]", "", name).lower()


_ALIASES: dict[str, str] = {}
for _task in GLUE_TASKS.values():
    _ALIASES[_normalize(_task.name)] = _task.name
    _ALIASES[_normalize(_task.folder)] = _task.name  # "diagnostic" -> AX


def get_task(name: str) -> TaskSpec:
    """Look up a GLUE task by name, ignoring case, '-' and '_' ("sst2", "STS_B", "diagnostic").

    Raises:
        DataError: for an unknown name, listing the valid tasks.
    """
    canonical = _ALIASES.get(_normalize(name))
    if canonical is None:
        raise DataError(f"unknown GLUE task {name!r}; valid tasks: {', '.join(GLUE_TASKS)}")
    return GLUE_TASKS[canonical]


def task_text_columns(task: str | TaskSpec) -> tuple[str, ...]:
    """The text columns of a task's test files: one for single sentences (CoLA, SST-2), two for pairs."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    layout = _LAYOUTS[spec.name][1]
    return tuple(str(column) for column in (layout.text_a, layout.text_b) if column is not None)


def default_glue_dir() -> Path:
    """Where the GLUE data is looked for when no data dir is given.

    ``$HIRE_GLUE_DIR`` if set; else the first existing of ``<repo>/../shared/data/glue`` and
    ``./../shared/data/glue``; else the repo-relative path (so a "not found" error names it).
    """
    return default_data_dir(ENV_VAR, "glue")


def _parse_label(spec: TaskSpec, path: Path, number: int, value: str) -> str | float:
    if spec.labels is not None:
        if value not in spec.labels:
            raise data_error(
                path, number, f"label {value!r} is not one of {list(spec.labels)} for task {spec.name}"
            )
        return value
    try:
        score = float(value)
    except ValueError:
        raise data_error(path, number, f"similarity score {value!r} is not a number") from None
    if not (math.isfinite(score) and 0.0 <= score <= 5.0):
        raise data_error(path, number, f"similarity score {value!r} is outside the range [0, 5]")
    return score


def read_glue_split(task: str | TaskSpec, split: str, data_dir: str | Path | None = None, *,
                    option: str | None = None) -> list[Example]:
    """Read one split of a GLUE task from ``<data_dir>/<folder>/<file>``.

    ``guid`` is the file's index/id column where it has one (all test files do), else the 0-based
    row number. Labels are strings as spelled (validated against ``spec.labels``), floats for
    STS-B, ``None`` on test splits. ``data_dir`` defaults to :func:`default_glue_dir`. ``option``: the
    calling command's option for the data dir, named when the file is missing (default: the one set by
    :func:`data_dir_option`, else ``--data.data_dir``).

    Raises:
        DataError: naming the file and 1-based line, for a missing file, an unknown split, an empty
            file, a wrong number of columns, a bad label or score, an empty sentence, or bad UTF-8.
            No row is ever skipped.
    """
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    if split not in spec.splits:
        valid = ", ".join(spec.splits)
        raise DataError(f"unknown split {split!r} for GLUE task {spec.name}; valid splits: {valid}")
    root = Path(data_dir).expanduser() if data_dir is not None else default_glue_dir()
    folder = root / spec.folder
    path = folder / spec.splits[split]
    if not path.is_file():
        missing = f"there is no folder {folder}" if not folder.is_dir() else "the file does not exist"
        raise MissingData(
            f"GLUE data for {spec.name} split {split!r} not found: {path} ({missing}); "
            f"set the data dir with {option or _DATA_DIR_OPTION.get()} or {ENV_VAR}"
        )
    if spec.name not in _LAYOUTS:
        raise DataError(f"task {spec.name!r} is not a GLUE task this reader knows: {', '.join(GLUE_TASKS)}")
    is_test = split in spec.test_splits
    layout = _LAYOUTS[spec.name][1 if is_test else 0]
    lines = iter_lines(path)

    # Resolve the layout to column indices, from the header line if the file has one.
    if layout.num_columns is not None:
        num_columns = layout.num_columns
        index = {name: name for name in (layout.text_a, layout.text_b, layout.label) if name is not None}
    else:
        first = next(lines, None)
        if first is None or first[1] == "":
            raise data_error(path, 1, "the file is empty (expected a header line)")
        header = first[1].split("\t")
        num_columns = len(header)
        wanted = [layout.text_a, layout.text_b, layout.label, layout.guid]
        missing_cols = [name for name in wanted if name is not None and name not in header]
        if missing_cols:
            raise data_error(
                path, 1, f"the header lacks column(s) {missing_cols} for {spec.name} {split}; found {header}"
            )
        index = {name: header.index(name) for name in wanted if name is not None}

    examples: list[Example] = []
    last_line = 0 if layout.num_columns is not None else 1
    for number, line in lines:
        last_line = number
        if line == "":
            raise data_error(path, number, "the line is empty (blank lines are not allowed)")
        fields = line.split("\t")
        if len(fields) != num_columns:
            raise data_error(
                path,
                number,
                f"expected {num_columns} tab-separated columns, found {len(fields)} "
                "(a stray tab or a line break inside a field?)",
            )
        texts = []
        for column in (layout.text_a, layout.text_b):
            if column is None:
                continue
            text = fields[index[column]]
            if not text.strip():
                where = f"column {column + 1}" if isinstance(column, int) else f"column {column!r}"
                raise data_error(path, number, f"the text in {where} is empty")
            texts.append(text)
        label = None
        if not is_test and layout.label is not None:
            label = _parse_label(spec, path, number, fields[index[layout.label]])
        guid = str(len(examples))
        if layout.guid is not None:
            guid = fields[index[layout.guid]].strip()
            if not guid:
                raise data_error(path, number, f"the {layout.guid} column is empty")
        text_b = texts[1] if len(texts) > 1 else None
        examples.append(Example(guid=guid, text_a=texts[0], text_b=text_b, label=label))
    if not examples:
        if last_line == 0:
            raise data_error(path, 1, "the file is empty")
        raise data_error(path, last_line + 1, "the file has a header but no data rows")
    return examples
