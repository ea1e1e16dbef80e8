"""The experiment file: a grid of runs declared in YAML, validated, and expanded into cells.

    name: table1-minilm                  # default: the file's stem
    description: HIRE against the last-layer head, median of 5 seeds (paper Table 1)
    base:
      config: configs/cola-minilm.yaml   # a run configuration (``hire train --config``), optional
      options: {train.patience: 2}       # run options on top of it (``--train.patience 2``)
    seeds: [1, 2, 3, 4, 5]               # train.seed of every cell that does not set it itself
    grid:                                # axes, crossed: any run option -> a list of values
      data.task: [CoLA, RTE]
      model.head: [last-layer, hire]
    cells:                               # more cells: each entry a small grid of its own (lists cross)
      - {data.task: CoLA, model.head: hire, model.head_options: [{fusion_layers: 0}, {fusion_layers: 1}]}
    per_task:                            # options per task, under the cells' own values
      CoLA: {train.lr: 1.0e-4, train.epochs: 6}
    baseline: {model.head: last-layer}   # the row every other row is compared with (null: none)
    tables: {...}                        # see hire.experiments.layout
    figure2: {...}

A cell's options are, from weakest to strongest: the defaults, ``base.config``, ``base.options``,
``per_task`` of its task, and its own grid values. Every key is checked: an unknown key or option, a key
given twice, a value out of the range ``hire train`` accepts, an empty grid, is one error naming the file
and the key. Each cell as a whole is checked by the rules of ``hire train`` that need no file at hand
(:func:`check_cell`), so that no experiment command reports on cells that could never run. Cell ids are
readable and stable: task, head, the head options and the other options the cell's own grid sets
(``key=value``), then the seed, joined by ``__``, e.g. ``CoLA__hire__fusion_layers=1__seed3``. The
experiment's name and its cell ids name folders and files (``<runs_dir>/<name>/<cell-id>/``), so both must
be plain file names (:func:`name_problem`). Cells are ordered seed first, so a grid advanced in slices
completes whole seeds (paired comparisons) early.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_origin

from hire.checks import read_yaml
from hire.config import ConfigError, RunConfig, did_you_mean, option_fields
from hire.model.optiontypes import value_problem
from hire.options import by_name, parse_options
from hire.tasktype import named_task

TOP_KEYS = ("name", "description", "base", "seeds", "grid", "cells", "per_task", "baseline", "tables", "figure2")
# Set by the runner for every cell: the folder, and no test-set prediction (a cell is compared on its dev
# scores; `hire evaluate --model <run>/best --task T --split test` writes a cell's GLUE submission files).
RUNNER_OWNED = ("output_dir", "overwrite", "predict_test")
ALWAYS_IN_ID = ("data.task", "model.head", "train.seed")
# The paper's order (Table 1, Figure 2): single sentence, similarity and paraphrase, inference.
PAPER_TASK_ORDER = ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI")


class ExperimentError(ConfigError):
    """A bad experiment file; the message names the file and the key at fault."""


@dataclass(frozen=True)
class Cell:
    """One run of the grid: its id, every run option resolved, and the keys its own grid set."""

    id: str
    options: dict[str, Any]  # every run option but output_dir/overwrite, by dotted name
    declared: tuple[str, ...]  # the options its grid (or cells entry) set: what makes it this cell
    source: str  # "grid" or "cells[2]", for messages

    @property
    def task(self) -> str:
        return self.options["data.task"]

    @property
    def head(self) -> str:
        return self.options["model.head"]

    @property
    def seed(self) -> int:
        return self.options["train.seed"]


# -- run options -------------------------------------------------------------------------------------
def option_types() -> dict[str, Any]:
    """Every run option by its dotted name (``train.lr``), with its declared type."""
    return {name: tp for name, tp, _ in option_fields(RunConfig)}


@functools.cache
def _types() -> dict[str, Any]:
    """Every run option's type, its range included, as :class:`RunConfig` declares it."""
    return {name: tp for name, tp, _ in option_fields(RunConfig)}


def range_problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the run option ``key`` by the rule ``hire train`` applies
    (:meth:`hire.config.RunConfig.validate`: finite numbers, each option's range), or None."""
    return value_problem(value, _types()[key]) if key in _types() else None


# -- names of folders and files ----------------------------------------------------------------------
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+,-]*")
MAX_NAME = 200  # file names are limited to 255 bytes; a record adds ``.layer_weights.json.gz`` to a cell id


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the name of one folder or file of the experiment (None: it can): it must be
    letters, digits and ``. _ - + = ,``, start with a letter or digit, hold no ``..`` and no path separator
    (a name like ``../../x`` would put runs and records outside ``--runs_dir`` and ``--experiments_dir``)."""
    if not _SAFE_NAME.fullmatch(name) or ".." in name:
        return ("it names a folder: use letters, digits and . _ - + = , only, starting with a letter or digit "
                "(no path separator, no '..')")
    if len(name) > MAX_NAME:
        return f"{len(name)} characters; at most {MAX_NAME} (it names a folder)"
    return None


def default_options() -> dict[str, Any]:
    defaults = RunConfig()
    return {name: defaults.get(name) for name in option_types() if name not in RUNNER_OWNED}


def cell_differences(saved: Any, options: dict[str, Any]) -> list[str]:
    """Options in which a run folder's ``config.yaml`` (nested or flat) differs from a cell's options.
    An option the saved file lacks counts as its default (an option added to the library later); a file that
    does not read as a configuration (not a mapping: ``None`` for a file that is not YAML) differs in every
    option."""
    if not isinstance(saved, dict):
        return sorted(options)
    try:
        resolved = parse_options(saved)
    except ConfigError:
        return sorted(options)
    # A run from a saved model (init_from) records the loaded model's encoder, head and its options, which
    # ``hire train`` takes from the model where the cell leaves them out (and refuses where they contradict it).
    fixed = FIXED_BY_INIT_FROM if options.get("model.init_from") else ()
    return sorted(k for k in options if k not in fixed and resolved.get(k) != options[k])


FIXED_BY_INIT_FROM = ("model.encoder", "model.head", "model.head_options", "model.classifier_dropout")


PRECISION = "train.mixed_precision"


def record_differences(record: dict[str, Any], options: dict[str, Any]) -> list[str]:
    """Options in which a record's run differs from a cell's. As :func:`cell_differences` of the record's
    configuration, except that a precision setting of ``auto`` counts as what it resolved to on the record's
    machine (the record's ``mixed_precision``): the setting is only ever resolved and handed to Accelerate,
    so a run set to ``auto`` that resolved to bf16 trained exactly as one set to ``bf16``. (Not the other way:
    a cell set to ``auto`` is a machine-dependent choice that a record set to ``bf16`` does not answer.)"""
    differ = cell_differences(record.get("config", {}), options)
    if PRECISION in differ and resolved_precision(record) == options.get(PRECISION):
        differ.remove(PRECISION)
    return differ


def resolved_precision(record: dict[str, Any]) -> str | None:
    """What a record's ``auto`` precision setting resolved to (None: it was set to something else, or the
    record does not say)."""
    try:
        setting = parse_options(record.get("config", {})).get(PRECISION)
    except ConfigError:
        return None
    return record.get("mixed_precision") if setting == "auto" else None


def fail(path: Path | str, where: str, message: str) -> typing.NoReturn:
    raise ExperimentError(f"{path}: {where}: {message}" if where else f"{path}: {message}")


def check_keys(mapping: Any, allowed: typing.Iterable[str] | None, path: Path, where: str) -> dict[str, Any]:
    """``mapping`` must be a mapping whose keys are all in ``allowed`` (None: any key); returns it
    (``{}`` for null)."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        fail(path, where, f"expected a mapping, not {type(mapping).__name__} {mapping!r}")
    if allowed is None:
        return mapping
    allowed = list(allowed)
    for key in mapping:
        if key not in allowed:
            hint = did_you_mean(str(key), allowed) or f"; valid keys: {', '.join(allowed)}"
            fail(path, where, f"unknown key {key!r}{hint}")
    return mapping


_PARSED: dict[tuple[str, str], Any] = {}


def _parsed(key: str, value: Any) -> Any:
    """One option's value (or, for ``data``, the data section from a mapping of ``data.*`` options) parsed by
    ``hire train``'s parser, remembered by its repr (a parse takes milliseconds, and grids repeat their values); a
    copy, so that no caller changes the remembered one."""
    if (key, repr(value)) not in _PARSED:
        _PARSED[key, repr(value)] = parse_options(value if key == "data" else {key: value}).get(key)
    return copy.deepcopy(_PARSED[key, repr(value)])


def check_option(path: Path, where: str, key: str, value: Any) -> Any:
    """Validate one run option and convert its value to the declared type (task names canonical)."""
    types = option_types()
    if key in RUNNER_OWNED:
        fail(path, where, f"{key} is set by the experiment runner (runs_dir/name/cell-id); remove it")
    if key not in types:
        fail(path, where, f"unknown run option {key!r}{did_you_mean(key, types) or '; `hire train --help` lists them'}")
    try:
        value = _parsed(key, value)
    except ConfigError as err:
        fail(path, where, str(err).removeprefix(f"--{key}: "))
    problem = range_problem(key, value)
    if problem is not None:
        fail(path, where, problem)
    if key == "data.task" and value != "custom":
        try:
            value = named_task(value)[0]
        except ValueError as err:
            fail(path, where, str(err))
    if key == "model.head":
        from hire.model.heads import head_names

        if value not in head_names():
            fail(path, where, f"unknown head {value!r}; the heads are: {', '.join(head_names())}")
    return value


def check_options(path: Path, where: str, mapping: Any) -> dict[str, Any]:
    """A mapping of run options (dotted or nested by section), each validated."""
    mapping = check_keys(mapping, None, path, where)
    return {k: check_option(path, f"{where}.{k}", k, v) for k, v in by_name(mapping).items()}


# -- the base configuration --------------------------------------------------------------------------
def find_file(path: Path, name: str) -> Path | None:
    """A path as written in an experiment file: absolute, or relative to the file's folder, to the
    current folder, or to a folder above the file (``configs/x.yaml`` from ``configs/experiments/``)."""
    candidate = Path(name)
    if candidate.is_absolute():
        return candidate if candidate.is_file() else None
    for folder in (path.parent, Path.cwd(), *path.resolve().parents):
        if (folder / candidate).is_file():
            return folder / candidate
    return None


def resolve_base(path: Path, base: Any) -> dict[str, Any]:
    """Defaults <- ``base.config`` <- ``base.options``, every option validated."""
    base = check_keys(base, ("config", "options"), path, "base")
    options = default_options()
    if base.get("config"):
        found = find_file(path, str(base["config"]))
        if found is None:
            fail(path, "base.config", f"no such file {base['config']!r} (looked beside the experiment file, "
                 "in the current folder and the folders above the file)")
        values = read_yaml(found, f"{path}: base.config ({found})") or {}
        options.update(check_options(path, f"base.config ({found})", values))
    options.update(check_options(path, "base.options", base.get("options")))
    return options


# -- cells -------------------------------------------------------------------------------------------
def axis_values(path: Path, where: str, key: str, values: Any) -> list[Any]:
    """An axis: a list of values (a scalar is one value; a list-typed option needs a list of lists)."""
    tp = option_types().get(key)
    one_list_value = get_origin(tp) is list and isinstance(values, list) and not any(
        isinstance(v, list) for v in values)
    values = values if isinstance(values, list) and not one_list_value else [values]
    if not values:
        fail(path, where, f"{key}: an axis needs at least one value")
    return [check_option(path, f"{where}.{key}", key, v) for v in values]


def expand(path: Path, where: str, axes: Any, seeds: list[int] | None) -> list[dict[str, Any]]:
    """The declared options of every cell of one grid, seed-major (whole seeds complete first)."""
    axes = check_keys(axes, None, path, where)
    if not axes:  # it would be one cell of the base options alone: say so rather than run that
        fail(path, where, "empty: give at least one axis (e.g. model.head: [hire, last-layer]), or remove it"
             if where == "grid" else "empty: give the options that make its cells (e.g. model.head: hire), or "
             "remove it")
    columns = {k: axis_values(path, where, k, v) for k, v in by_name(axes).items()}
    if "train.seed" not in columns and seeds:
        columns["train.seed"] = list(seeds)
    keys = sorted(columns, key=lambda k: k != "train.seed")
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(columns[k] for k in keys))]


def _short_names(keys: typing.Iterable[str]) -> dict[str, str]:
    """The last part of each dotted key, unless two keys share it (then the whole key)."""
    keys = list(keys)
    last = [k.rpartition(".")[2] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last, strict=True)}


def format_value(value: Any) -> str:
    """A value as it reads in a cell id or a row label."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ",".join(f"{k}={format_value(v)}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return "+".join(map(str, value))
    if isinstance(value, str) and ("/" in value or "\\" in value):
        return Path(value).name or value  # an encoder path: its folder name
    return str(value)


def cell_id(options: dict[str, Any], declared: typing.Iterable[str]) -> str:
    """``TASK__HEAD[__option=value...]__seedN``: readable, and a function of the cell alone."""
    parts = [options["data.task"], options["model.head"]]
    if "model.head_options" in declared:
        parts += [f"{k}={format_value(v)}" for k, v in sorted(options["model.head_options"].items())]
    others = sorted(k for k in declared if k not in (*ALWAYS_IN_ID, "model.head_options"))
    short = _short_names(others)
    parts += [f"{short[k]}={format_value(options[k])}" for k in others]
    parts.append(f"seed{options['train.seed']}")
    return "__".join(re.sub(r"[^A-Za-z0-9._=+,-]", "-", p) for p in parts if p != "")


def check_cell(path: Path, where: str, options: dict[str, Any]) -> None:
    """A cell's options as a whole, by the rules of ``hire train`` (:meth:`hire.config.RunConfig.validate`)
    that need no file at hand, so that ``status`` and ``report`` work where the data is not: the head takes
    its options (their types and ranges), a GLUE task takes none of the custom task's options, and a custom
    task names its training and dev files and distinct text columns. (Each value's type and range is checked
    where the file gives it: :func:`check_option`.) Whether the files, the encoder and the output folder are
    there, ``hire train`` checks when the cell runs."""
    from hire.checks import check_text_columns
    from hire.config import check_head

    try:
        check_head(options["model.head"], options["model.head_options"])
        data_options = sorted((k, v) for k, v in options.items() if k.startswith("data."))
        data = _parsed("data", dict(data_options))  # the cells of a task share their data options
        if data.task != "custom":
            dataclasses.replace(data, data_dir=None).validate()  # a GLUE task: no file read without data_dir
        else:
            for name, what in (("train_file", "a training file"), ("dev_file", "a labelled dev file")):
                if not getattr(data, name):
                    raise ConfigError(f"data.{name}: data.task custom needs {what}")
            check_text_columns(data.text_columns, data.label_column, "data.text_columns", "data.label_column")
    except ConfigError as err:
        fail(path, where, str(err).removeprefix("--model.head_options: ").removeprefix("--"))


def make_cells(path: Path, base: dict[str, Any], grids: list[tuple[str, list[dict[str, Any]]]],
               per_task: dict[str, dict[str, Any]]) -> list[Cell]:
    """Resolve every declared cell (base <- per_task <- its own values); ids must be unique."""
    cells: dict[str, Cell] = {}
    for source, declared_cells in grids:
        for declared in declared_cells:
            task = declared.get("data.task", base["data.task"])
            options = {**base, **per_task.get(task, {}), **declared}
            check_cell(path, source, options)
            cell = Cell(cell_id(options, declared), options, tuple(declared), source)
            problem = name_problem(cell.id)
            if problem is not None:
                fail(path, source, f"the cell id {cell.id!r} cannot be used: {problem}; change the values that "
                     "make it")
            if cell.id in cells:
                other = cells[cell.id]
                same = "the same cell" if other.options == options else "another cell with the same id"
                fail(path, source, f"cell {cell.id} is {same} as one of {other.source}; remove one, or "
                     "add the option that tells them apart to both")
            cells[cell.id] = cell
    return list(cells.values())


def identity_keys(cells: list[Cell]) -> tuple[str, ...]:
    """The options that tell cells apart: task, head, seed and every option some grid declares."""
    keys = set(ALWAYS_IN_ID).union(*(c.declared for c in cells))
    first = ("model.head", "model.head_options")
    return tuple([k for k in first if k in keys] + sorted(k for k in keys if k not in first))


def canonical(value: Any) -> str:
    """A hashable, order-independent key for option values (dicts, lists)."""
    return json.dumps(value, sort_keys=True)
