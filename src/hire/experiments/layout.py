"""Which cells go where: the rows and columns of each table, the baseline of each row, Figure 2.

    tables:
      table1:
        title: "Table 1: GLUE dev, median of 5 seeds"   # default: the table's name
        tasks: [CoLA, SST-2, MRPC, STS-B, RTE]           # columns, in order (default: every task)
        rows: [last-layer, hire]                         # a head name, or options with a label:
        #   - {model.head: hire, model.head_options: {fusion_layers: 0}, label: "0 layers"}
        where: {train.mixed_precision: bf16}             # only cells with these options
        baseline: {model.head: last-layer}               # default: the experiment's baseline
        metrics: {STS-B: pearson}                        # default: the task's score (mean of its metrics)
        note: free text printed under the table
    figure2:
      row: hire                    # which cells (a head name or options); default hire
      where: {}                    # as in tables
      tasks: [CoLA, SST-2]         # default: every task of that row, in the paper's order
      examples_task: SST-2         # the right panel's task (default SST-2, else the first task)
      examples: 100                # how many of its dev examples
      select: best                 # best: the seed with the best dev score (the paper's "best single
                                   # model"); median: the median seed

A row is one *context*: the cells' identifying options apart from task and seed. A row given by a head
name means that head with the base head options. Each row is compared, task by task and seed by seed,
with its baseline row: its own context with the baseline's options put in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hire.experiments.spec import (
    PAPER_TASK_ORDER,
    Cell,
    canonical,
    check_keys,
    check_option,
    check_options,
    fail,
    format_value,
)

TABLE_KEYS = ("title", "tasks", "rows", "where", "baseline", "metrics", "note")
FIGURE2_KEYS = ("row", "where", "tasks", "examples_task", "examples", "select")


@dataclass(frozen=True)
class Row:
    label: str
    context: dict[str, Any]  # the identifying options but task and seed
    partner: str | None = None  # the key of the baseline row it is compared with (None: it is one)

    @property
    def key(self) -> str:
        return canonical(self.context)


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    tasks: tuple[str, ...]
    rows: tuple[Row, ...]
    cells: dict[tuple[str, str], tuple[str, ...]]  # (row key, task) -> the cell ids of its seeds
    metrics: dict[str, str] = field(default_factory=dict)  # task -> metric ("score" where absent)
    baseline: dict[str, Any] | None = None
    note: str = ""


@dataclass(frozen=True)
class Figure2:
    label: str
    tasks: tuple[str, ...]
    cells: dict[str, tuple[str, ...]]  # task -> the cell ids of its seeds
    examples_task: str
    examples: int
    select: str


def order_tasks(tasks: set[str] | list[str]) -> list[str]:
    """GLUE tasks in the paper's order, then any others by name."""
    return [t for t in PAPER_TASK_ORDER if t in tasks] + sorted(t for t in tasks if t not in PAPER_TASK_ORDER)


def context(cell: Cell, identity: tuple[str, ...]) -> dict[str, Any]:
    return {k: cell.options[k] for k in identity if k not in ("data.task", "train.seed")}


def default_label(ctx: dict[str, Any]) -> str:
    """``hire fusion_layers=1 lr=0.0001``: the head, its options, then the other options."""
    parts = [str(ctx.get("model.head", ""))]
    parts += [f"{k}={format_value(v)}" for k, v in sorted(ctx.get("model.head_options", {}).items())]
    parts += [f"{k.rpartition('.')[2]}={format_value(v)}" for k, v in ctx.items()
              if k not in ("model.head", "model.head_options")]
    return " ".join(p for p in parts if p)


def _row_spec(path: Path, where: str, spec: Any) -> tuple[str | None, dict[str, Any]]:
    if isinstance(spec, str):
        return None, {"model.head": check_option(path, where, "model.head", spec)}
    spec = check_keys(spec, None, path, where)
    label = spec.get("label")
    return (str(label) if label is not None else None), check_options(
        path, where, {k: v for k, v in spec.items() if k != "label"})


def _matches(cell: Cell, wanted: dict[str, Any], base: dict[str, Any], identity: tuple[str, ...]) -> bool:
    if "model.head" in wanted and "model.head_options" not in wanted and "model.head_options" in identity:
        wanted = {**wanted, "model.head_options": base["model.head_options"]}  # the head as such
    return all(canonical(cell.options[k]) == canonical(v) for k, v in wanted.items())


def _one_context(path: Path, where: str, cells: list[Cell], identity: tuple[str, ...]) -> dict[str, Any]:
    contexts = {canonical(context(c, identity)): context(c, identity) for c in cells}
    if not contexts:
        fail(path, where, "no cell of the experiment matches it")
    if len(contexts) > 1:
        first, *others = contexts.values()
        differ = sorted({k for o in others for k in first if canonical(first[k]) != canonical(o[k])})
        fail(path, where, f"it matches cells that differ in {', '.join(differ)}; add them to the row or to where")
    return next(iter(contexts.values()))


def _select(path: Path, where: str, cells: list[Cell], spec: dict[str, Any], base: dict[str, Any],
            identity: tuple[str, ...]) -> tuple[list[Cell], list[str]]:
    """The cells of a table or figure (its ``where`` and ``tasks``), and those tasks in order."""
    wanted = check_options(path, f"{where}.where", spec.get("where"))
    chosen = [c for c in cells if _matches(c, wanted, base, identity)]
    present = order_tasks({c.task for c in chosen})
    tasks = present
    if spec.get("tasks") is not None:
        raw = spec["tasks"] if isinstance(spec["tasks"], list) else [spec["tasks"]]
        tasks = [check_option(path, f"{where}.tasks", "data.task", t) for t in raw]
        missing = [t for t in tasks if t not in present]
        if missing:
            fail(path, f"{where}.tasks", f"no cell of the experiment has task {', '.join(missing)}")
    return [c for c in chosen if c.task in tasks], tasks


def _baseline_keys(baseline: dict[str, Any], base: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    compare = {**baseline}
    if "model.head" in compare and "model.head_options" in keys and "model.head_options" not in compare:
        compare["model.head_options"] = base["model.head_options"]
    return compare


def resolve_table(path: Path, name: str, spec: Any, cells: list[Cell], base: dict[str, Any],
                  identity: tuple[str, ...], baseline: dict[str, Any] | None) -> Table:
    where = f"tables.{name}"
    spec = check_keys(spec, TABLE_KEYS, path, where)
    chosen, tasks = _select(path, where, cells, spec, base, identity)
    if not chosen:
        fail(path, where, "no cell of the experiment goes in this table")
    rows: dict[str, Row] = {}
    if spec.get("rows"):
        for i, item in enumerate(spec["rows"]):
            label, wanted = _row_spec(path, f"{where}.rows[{i}]", item)
            ctx = _one_context(path, f"{where}.rows[{i}]", [c for c in chosen if _matches(c, wanted, base, identity)],
                               identity)
            rows[canonical(ctx)] = Row(label or default_label(ctx), ctx)
    else:
        for c in chosen:
            ctx = context(c, identity)
            rows.setdefault(canonical(ctx), Row(default_label(ctx), ctx))
    if "baseline" in spec:
        baseline = check_options(path, f"{where}.baseline", spec["baseline"]) if spec["baseline"] else None
    if baseline:
        rows = _with_partners(path, where, rows, chosen, baseline, base, identity)
    table_cells: dict[tuple[str, str], list[str]] = {}
    for c in chosen:
        table_cells.setdefault((canonical(context(c, identity)), c.task), []).append(c.id)
    from hire.metrics import METRIC_NAMES  # SciPy and scikit-learn: only where a table names a metric

    metrics = check_keys(spec.get("metrics"), tasks, path, f"{where}.metrics")
    for task, metric in metrics.items():
        if metric not in (*METRIC_NAMES, "score"):
            fail(path, f"{where}.metrics.{task}", f"unknown metric {metric!r}; valid: score, {', '.join(METRIC_NAMES)}")
    return Table(name, str(spec.get("title") or name), tuple(tasks), tuple(rows.values()),
                 {k: tuple(v) for k, v in table_cells.items()}, dict(metrics), baseline, str(spec.get("note") or ""))


def _with_partners(path: Path, where: str, rows: dict[str, Row], chosen: list[Cell], baseline: dict[str, Any],
                   base: dict[str, Any], identity: tuple[str, ...]) -> dict[str, Row]:
    """Each row with its baseline row (its context with the baseline's options put in), in the order
    given; a baseline row the table does not list goes first."""
    keys = [k for k in identity if k not in ("data.task", "train.seed")]
    compare = _baseline_keys(baseline, base, keys)
    for k in compare:
        if k not in keys:
            fail(path, f"{where}.baseline", f"{k} is not an option the experiment's grids set, so it tells no "
                 f"rows apart; options that do: {', '.join(keys)}")
    contexts = {canonical(context(c, identity)) for c in chosen}
    missing: dict[str, Row] = {}
    out: dict[str, Row] = {}
    for key, row in rows.items():
        partner = {**row.context, **compare}
        pkey = canonical(partner)
        if pkey == key:
            out[key] = row
            continue
        if pkey not in contexts:
            fail(path, f"{where}.baseline", f"row {row.label!r} has no baseline row ({default_label(partner)}) "
                 "among the table's cells")
        if pkey not in rows:
            missing.setdefault(pkey, Row(default_label(partner), partner))
        out[key] = Row(row.label, row.context, pkey)
    return {**missing, **out}


def resolve_figure2(path: Path, raw: dict[str, Any], cells: list[Cell], base: dict[str, Any],
                    identity: tuple[str, ...]) -> Figure2 | None:
    """Figure 2's cells; left out quietly when the file has no ``figure2`` and no plain hire row."""
    explicit = "figure2" in raw
    if explicit and raw["figure2"] is None:
        return None
    spec = check_keys(raw.get("figure2"), FIGURE2_KEYS, path, "figure2")
    try:
        label, wanted = _row_spec(path, "figure2.row", spec.get("row", "hire"))
        wanted = {**wanted, **check_options(path, "figure2.where", spec.get("where"))}  # e.g. the head's options
        chosen, tasks = _select(path, "figure2", [c for c in cells if _matches(c, wanted, base, identity)], spec,
                                base, identity)
        by_task = {t: [c for c in chosen if c.task == t] for t in tasks}
        ctx = {t: _one_context(path, f"figure2 (task {t})", cs, identity) for t, cs in by_task.items()}
    except ValueError:
        if explicit:
            raise
        return None
    if not tasks:
        if explicit:
            fail(path, "figure2", "no cell of the experiment matches its row and where")
        return None
    examples_task = spec.get("examples_task") or ("SST-2" if "SST-2" in tasks else tasks[0])
    examples_task = check_option(path, "figure2.examples_task", "data.task", examples_task)
    if examples_task not in tasks:
        fail(path, "figure2.examples_task", f"{examples_task} is not among the figure's tasks ({', '.join(tasks)})")
    select = spec.get("select", "best")
    if select not in ("best", "median"):
        fail(path, "figure2.select", f"expected best or median, not {select!r}")
    examples = spec.get("examples", 100)
    if not isinstance(examples, int) or isinstance(examples, bool) or examples < 1:
        fail(path, "figure2.examples", f"expected a positive number of examples, not {examples!r}")
    return Figure2(label or default_label(next(iter(ctx.values()))), tuple(tasks),
                   {t: tuple(c.id for c in cs) for t, cs in by_task.items()}, examples_task, examples, select)
