"""The committed results as objects for the findings templates of the documentation (docs/findings/*.md).

scripts/docs_pages.py renders each template with Jinja2; a template reads numbers only through these
classes, which read the files ``hire experiment report``, ``hire probe`` and ``hire reconstruct`` wrote
(``experiments/<name>/tables/*.json``, ``records/``, ``summary.json``, ``*.csv``, ``results.json``). So the
prose of the results pages and of the README never holds a number typed by hand::

    {% set t = E.table("table1") %}
    HIRE's median on CoLA is {{ t.cell("MiniLM+HIRE", "CoLA").median }}
    (paired {{ t.cell("MiniLM+HIRE", "CoLA").vs.ci }}, ahead in {{ t.cell("MiniLM+HIRE", "CoLA").vs.ahead }} seeds)

A number prints with one decimal (``28.3``); ``.s`` signs it (``+0.4``), ``.f2`` gives two decimals. Asking for a
table, row, task or run that is not there raises an error: a template never prints a blank.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any


class Num(float):
    """A float that prints as the results pages write it: ``28.3``; ``x.s``: ``+0.4``; ``x.f2``: ``0.14``."""

    def __str__(self) -> str:
        return _one(self)

    __format__ = float.__format__

    @property
    def s(self) -> str:
        text = f"{self:+.1f}"
        return "+0.0" if text == "-0.0" else text

    @property
    def f0(self) -> str:
        return f"{self:.0f}"

    @property
    def f2(self) -> str:
        return f"{self:.2f}"


def _one(x: float) -> str:
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def span(values: list[float], fmt: str = ".1f") -> str:
    """``3.3-5.7``: the range of some numbers (one number when they are all equal)."""
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low}-{high}"


def _num(x: float | None) -> Num | None:
    return None if x is None else Num(x)


class Paired:
    """A row's per-seed differences to its baseline (same seed, same data order), x100."""

    def __init__(self, data: dict[str, Any]):
        self.n: int = data["n"]
        self.mean, self.median = Num(data["mean"]), Num(data["median"])
        self.diffs = [Num(d) for d in data["differences"]]
        ci = data.get("ci95")
        self.lo, self.hi = (Num(ci[0]), Num(ci[1])) if ci else (None, None)
        self.p: str = data.get("wilcoxon") or "n/a"
        self.ahead = sum(d > 0 for d in data["differences"])
        self.behind = sum(d < 0 for d in data["differences"])

    @property
    def ci(self) -> str:
        """``+0.4 [-1.6, +2.4]``: the mean difference with its bootstrap 95% interval."""
        return self.mean.s + (f" [{self.lo.s}, {self.hi.s}]" if self.lo is not None else "")

    @property
    def signs(self) -> str:
        """The per-seed differences: ``-0.2, +3.0, -1.1``."""
        return ", ".join(d.s for d in self.diffs)

    @property
    def verdict(self) -> str:
        """``ahead`` or ``behind`` where the 95% interval excludes zero, else ``no difference shown``."""
        if self.lo is None:
            return "one pair: no interval"
        return "ahead" if self.lo > 0 else "behind" if self.hi < 0 else "no difference shown"


class Cell:
    """One row and task of a table (``Avg``: the row's mean over the tasks), x100."""

    def __init__(self, data: dict[str, Any], average: bool = False):
        self.n: int = data["n"]
        self.median = _num(data["of_medians"] if average else data["median"])
        self.mean, self.std = _num(data["mean"]), _num(data["std"])
        self.min, self.max = _num(data["min"]), _num(data["max"])
        self.scores = [Num(v) for _, v in sorted(data["scores"].items(), key=lambda kv: int(kv[0]))]
        self.vs = Paired(data["vs_baseline"]) if data.get("vs_baseline") else None

    @property
    def seeds(self) -> str:
        """Each seed's score in seed order: ``28.7 / 30.0 / 27.9``."""
        return " / ".join(map(str, self.scores))

    @property
    def range(self) -> str:
        return span(self.scores)


class Table:
    """``experiments/<name>/tables/<table>.json``: rows by label, tasks as columns."""

    def __init__(self, path: Path):
        self.data = json.loads(path.read_text())
        self.name: str = self.data["table"]
        self.title: str = self.data["title"]
        self.tasks: list[str] = self.data["tasks"]
        self.rows = {r["label"]: r for r in self.data["rows"]}

    def row(self, label: str) -> dict[str, Any]:
        if label not in self.rows:
            raise KeyError(f"table {self.name}: no row {label!r} (rows: {', '.join(self.rows)})")
        return self.rows[label]

    def cell(self, label: str, task: str) -> Cell:
        row = self.row(label)
        if task == "Avg":
            return Cell(row["average"], average=True)
        if task not in row["tasks"]:
            raise KeyError(f"table {self.name}: no task {task!r} (tasks: {', '.join(row['tasks'])})")
        return Cell(row["tasks"][task])

    def column(self, task: str) -> list[Num]:
        """Every row's median on ``task``."""
        return [c.median for c in (self.cell(label, task) for label in self.rows) if c.median is not None]

    def diffs(self, a: str, b: str, task: str) -> Diffs:
        """Row ``a`` minus row ``b`` on ``task``, seed by seed."""
        return Diffs(self.cell(a, task), self.cell(b, task))


class Diffs:
    """Seed-by-seed differences between two rows of a table (``a`` minus ``b``), for pairs other than a row and
    its declared baseline."""

    def __init__(self, a: Cell, b: Cell):
        self.diffs = [Num(x - y) for x, y in zip(a.scores, b.scores, strict=True)]
        self.ahead = sum(d > 0 for d in self.diffs)
        self.behind = sum(d < 0 for d in self.diffs)
        self.n = len(self.diffs)

    @property
    def signs(self) -> str:
        return ", ".join(d.s for d in self.diffs)

    @property
    def range(self) -> str:
        """``-2.8 to -1.3``: the smallest and largest difference."""
        low, high = min(self.diffs), max(self.diffs)
        return low.s if low.s == high.s else f"{low.s} to {high.s}"


class Experiment:
    """``experiments/<name>/`` as ``hire experiment report`` left it: tables, records, layer weights, summary."""

    def __init__(self, directory: Path):
        self.dir, self.name = directory, directory.name
        self.summary = json.loads((directory / "summary.json").read_text())
        self.records = {r["cell"]: r for r in (json.loads(p.read_text()) for p in
                                                sorted((directory / "records").glob("*.json")))
                        if isinstance(r, dict) and "cell" in r}
        self.tables = {p.stem: Table(p) for p in sorted((directory / "tables").glob("*.json"))}
        weights = directory / "tables" / "layer_weights.csv"
        self.weights = {r["run"]: r for r in csv.DictReader(weights.open())} if weights.is_file() else {}

    def table(self, name: str) -> Table:
        if name not in self.tables:
            raise KeyError(f"{self.name}: no table {name!r} (tables: {', '.join(self.tables)})")
        return self.tables[name]

    def runs(self, cells: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """The records of the cells ``cells`` names without its seed (``CoLA__hire__fusion_layers=0``) and whose
        task, head or options have these values (``task="CoLA", head="hire"``, or a run option with ``__`` for
        its dots: ``train__seed=1``), in seed order."""
        def fits(r: dict[str, Any]) -> bool:
            return (cells is None or r["cell"].rsplit("__seed", 1)[0] == cells) and all(
                (r.get(k) if k in ("task", "head") else r["options"].get(k.replace("__", "."))) == v
                for k, v in match.items())
        found = sorted((r for r in self.records.values() if fits(r)), key=lambda r: (r["cell"].rsplit("__seed", 1)[0],
                                                                                    r["options"].get("train.seed", 0)))
        if not found:
            raise KeyError(f"{self.name}: no record of {cells or 'any cell'} with {match}")
        return found

    def minutes(self, cells: str | None = None, **match: Any) -> str:
        """The range of training minutes of the matching records: ``12.6-17.5``."""
        return span([r["train_seconds"] / 60 for r in self.runs(cells, **match) if r.get("train_seconds") is not None])

    def on_gpu(self, cells: str | None = None, **match: Any) -> int:
        """How many of the matching runs (as :meth:`runs`) trained on a GPU."""
        return sum(bool(r.get("machine", {}).get("gpu")) for r in self.runs(cells, **match))

    @property
    def hours(self) -> str:
        """The training time of every recorded cell, in hours: ``23.5``."""
        return _one(self.summary["total"]["train_seconds"] / 3600)

    def weight(self, cell: str, state: int) -> Num:
        """A run's mean importance score of hidden state ``state`` over the dev examples."""
        return Num(float(self._weights(cell)[f"h{state}"]))

    def top(self, cell: str, k: int = 2) -> str:
        """A run's ``k`` hidden states with the largest mean weight: ``h7 0.42, h6 0.22``."""
        row = self._weights(cell)
        states = sorted((float(v), int(h[1:])) for h, v in row.items() if h.startswith("h") and v)[::-1][:k]
        return ", ".join(f"h{i} {w:.2f}" for w, i in states)

    def flat(self, cell: str) -> int:
        """How many of a run's hidden states share the smallest mean weight (their scores died); 0: none."""
        return int(self._weights(cell)["flat states"])

    def flats(self, cells: str | None = None, **match: Any) -> list[int]:
        """``flat`` of every matching run (as :meth:`runs`) that has layer weights, in seed order."""
        return [self.flat(r["cell"]) for r in self.runs(cells, **match) if r["cell"] in self.weights]

    def _weights(self, cell: str) -> dict[str, str]:
        if cell not in self.weights:
            raise KeyError(f"{self.name}: no layer weights for {cell!r}")
        return self.weights[cell]


class Probe:
    """``hire probe``'s output folder: ``which_layer.csv`` (last layer, best state, best concatenation)."""

    def __init__(self, directory: Path):
        self.dir, self.name = directory, directory.name
        self.results = json.loads((directory / "results.json").read_text())
        self.which = {(r["task"], r["encoder"]): r for r in csv.DictReader((directory / "which_layer.csv").open())}
        self.poolings = {(r["task"], r["encoder"]): r for r in csv.DictReader((directory / "poolings.csv").open())}

    def _row(self, task: str, encoder: str) -> dict[str, str]:
        if (task, encoder) not in self.which:
            raise KeyError(f"{self.name}: no probe of {encoder} on {task}")
        return self.which[task, encoder]

    def last(self, task: str, encoder: str) -> str:
        """``8.56 (max)``: the last layer's best pooling."""
        return self._row(task, encoder)["last layer"]

    def best(self, task: str, encoder: str) -> str:
        """``18.43 (2, mean)``: the best single hidden state and its pooling."""
        return self._row(task, encoder)["best single state"]

    def concat(self, task: str, encoder: str) -> str:
        return self._row(task, encoder)["best concatenation"]

    def score(self, text: str) -> Num:
        """The number of a ``which`` entry: ``8.56 (max)`` -> 8.56."""
        return Num(float(text.split()[0]))

    def pooling(self, task: str, encoder: str, pooling: str) -> Num:
        return Num(float(self.poolings[task, encoder][pooling]))

    @property
    def minutes(self) -> dict[str, str]:
        seconds = self.results["seconds"]
        return {k: _one(v / 60) for k, v in {**seconds, "all": sum(seconds.values())}.items()}


class Reconstruct:
    """``hire reconstruct``'s output folder: top-1 accuracy (x100) of every encoder's every hidden state."""

    def __init__(self, directory: Path):
        self.dir, self.name = directory, directory.name
        self.results = json.loads((directory / "results.json").read_text())
        self.encoders = {e["label"]: e for e in self.results["encoders"]}

    def acc(self, label: str, state: int) -> Num:
        """Hidden state ``state`` (0 = embeddings; -1 = the last) of the encoder labelled ``label``."""
        return Num(100 * self.encoders[label]["accuracy"][state])

    @property
    def examples(self) -> int:
        return int(self.results["data"]["examples"])


def load(directory: Path) -> Experiment | Probe | Reconstruct:
    """Whichever of the three an ``experiments/<name>/`` folder holds."""
    if (directory / "summary.json").is_file():
        return Experiment(directory)
    if (directory / "which_layer.csv").is_file():
        return Probe(directory)
    return Reconstruct(directory)


def hire_against_last_layer(experiments: dict[str, Any]) -> list[dict[str, Any]]:
    """Every paired comparison of a HIRE row with a last-layer baseline in every experiment's tables (a cell shared
    by two experiments counted once, where it first appears): experiment, table, encoder, row label, task, the
    two cells (``last``, ``hire``)."""
    found, seen = [], set()
    for name, exp in experiments.items():
        if not isinstance(exp, Experiment):
            continue
        encoders = ", ".join(sorted({str(r.get("encoder")) for r in exp.records.values()}))
        for table in exp.tables.values():
            for label, row in table.rows.items():
                base = table.rows.get(row["baseline"] or "")
                if row["options"].get("model.head") != "hire" or not base or \
                        base["options"].get("model.head") != "last-layer":
                    continue
                for task in table.tasks:
                    hire, last = table.cell(label, task), table.cell(base["label"], task)
                    key = (task, tuple(hire.scores), tuple(last.scores))
                    if hire.vs is None or key in seen:
                        continue
                    seen.add(key)
                    found.append({"experiment": name, "table": table.name, "encoder": encoders, "row": label,
                                  "task": task, "hire": hire, "last": last})
    return found
