"""Load an experiment file (schema: :mod:`hire.experiments.spec` and :mod:`hire.experiments.layout`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hire.checks import read_yaml
from hire.experiments.layout import Figure2, Table, context, order_tasks, resolve_figure2, resolve_table
from hire.experiments.spec import (
    TOP_KEYS,
    Cell,
    check_keys,
    check_option,
    check_options,
    expand,
    fail,
    identity_keys,
    make_cells,
    name_problem,
    resolve_base,
)


@dataclass(frozen=True)
class Experiment:
    path: Path
    text: str  # the file as written: copied beside the results
    name: str
    description: str
    base: dict[str, Any]  # defaults <- base.config <- base.options
    cells: tuple[Cell, ...]
    identity: tuple[str, ...]  # the options that tell cells apart
    baseline: dict[str, Any] | None
    tables: tuple[Table, ...]
    figure2: Figure2 | None

    def cell(self, cell_id: str) -> Cell:
        return next(c for c in self.cells if c.id == cell_id)

    def context(self, cell: Cell) -> dict[str, Any]:
        return context(cell, self.identity)

    @property
    def tasks(self) -> list[str]:
        return order_tasks({c.task for c in self.cells})


def _seeds(path: Path, value: Any) -> list[int] | None:
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    return [check_option(path, "seeds", "train.seed", v) for v in values]


def _per_task(path: Path, value: Any) -> dict[str, dict[str, Any]]:
    per_task = check_keys(value, None, path, "per_task")
    out = {}
    for task, options in per_task.items():
        name = check_option(path, f"per_task.{task}", "data.task", task)
        out[name] = check_options(path, f"per_task.{task}", options)
        if "data.task" in out[name]:
            fail(path, f"per_task.{task}", "data.task cannot be set per task")
    return out


def _name(path: Path, value: Any) -> str:
    """The experiment's name (default: the file's stem): it names its folders, so it must be a plain name."""
    name = path.stem if value is None or value == "" else value
    if not isinstance(name, str | int) or isinstance(name, bool):
        fail(path, "name", f"expected a name, not {type(name).__name__} {name!r}")
    problem = name_problem(str(name))
    if problem is not None:
        where = "name" if value not in (None, "") else "name (the file's stem: the file sets no name)"
        fail(path, where, f"{str(name)!r} cannot be used: {problem}")
    return str(name)


def load_experiment(path: str | Path) -> Experiment:
    """Read, validate and expand an experiment file; any mistake is one error naming file and key."""
    path = Path(path)
    if not path.is_file():
        fail(path, "", "no such experiment file" if not path.is_dir() else "a folder, not an experiment file")
    # The text as read (copied beside the results) and its content; a key given twice is an error.
    text, raw = read_yaml(path, str(path), lambda text: (text, yaml.safe_load(text)))
    raw = check_keys(raw, TOP_KEYS, path, "top level")
    name = _name(path, raw.get("name"))
    base = resolve_base(path, raw.get("base"))
    seeds = _seeds(path, raw.get("seeds"))
    grids = []
    if raw.get("grid") is not None:
        grids.append(("grid", expand(path, "grid", raw["grid"], seeds)))
    cells_spec = raw.get("cells")
    if cells_spec is not None and not isinstance(cells_spec, list):
        fail(path, "cells", f"expected a list of option mappings, not {type(cells_spec).__name__} {cells_spec!r}")
    grids += [(f"cells[{i}]", expand(path, f"cells[{i}]", spec, seeds)) for i, spec in enumerate(cells_spec or [])]
    if not grids:
        fail(path, "", "declares no cells: give grid (axes to cross, e.g. model.head: [hire, last-layer]) "
             "and/or cells")
    per_task = _per_task(path, raw.get("per_task"))
    cells = sorted(make_cells(path, base, grids, per_task), key=lambda c: c.seed)  # whole seeds first
    unused = sorted(set(per_task) - {c.task for c in cells})
    if unused:
        fail(path, f"per_task.{unused[0]}", "no cell of the experiment has this task")
    identity = identity_keys(cells)
    baseline = check_options(path, "baseline", raw.get("baseline")) or None
    tables_spec = check_keys(raw.get("tables"), None, path, "tables") or {"all": {}}
    tables = tuple(resolve_table(path, str(name), spec, cells, base, identity, baseline)
                   for name, spec in tables_spec.items())
    return Experiment(path, text, name, str(raw.get("description") or "").strip(),
                      base, tuple(cells), identity, baseline, tables,
                      resolve_figure2(path, raw, cells, base, identity))
