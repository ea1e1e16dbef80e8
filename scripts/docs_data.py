"""The committed results as objects for the findings templates of the documentation (docs/findings/*.md).

scripts/docs_pages.py renders each template with Jinja2; a template reads numbers only through these
classes, which read the files ``hire experiment report``, ``hire probe``, ``hire rank-probe`` and ``hire
reconstruct`` wrote (``experiments/<name>/tables/*.json``, ``records/``, ``summary.json``, ``*.csv``,
``results.json``). So the prose of the results pages and of the README never holds a number typed by hand::

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

import yaml


class Num(float):
    """A float that prints as the results pages write it: ``28.3``; ``x.s``: ``+0.4``; ``x.f2``: ``0.14``."""

    def __str__(self) -> str:
        return _one(self)

    __format__ = float.__format__

    def __sub__(self, other: float) -> Num:  # a difference of two results prints as they do
        return Num(float(self) - float(other))

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


VERDICT_RULE = ("a difference counts as shown only where its bootstrap 95% interval (of the mean paired difference) "
                "excludes zero")


def verdict(lo: float | None, hi: float | None) -> str:
    """The one rule every page (and the README) states a verdict by: ``ahead`` where the 95% interval of the mean
    paired difference is above zero, ``behind`` where it is below, else ``no difference shown``; with one pair (no
    interval) ``one pair: no interval``."""
    if lo is None or hi is None:
        return "one pair: no interval"
    return "ahead" if lo > 0 else "behind" if hi < 0 else "no difference shown"


def answer(verdicts: list[str]) -> str:
    """A yes/no answer to "does it help?" from several :func:`verdict` words: ``yes`` where every one is ahead,
    ``no`` where none is, ``not clearly`` where some are and some are not."""
    ahead = sum(v == "ahead" for v in verdicts)
    return "yes" if verdicts and ahead == len(verdicts) else "no" if not ahead else "not clearly"


ENCODERS = {"all-MiniLM-L6-v2": "MiniLM", "all-mpnet-base-v2": "MPNet"}
OPTION_ORDER = ("model.encoder", "model.freeze_encoder", "model.ranker", "train.rank_loss", "train.lr",
                "train.head_lr", "model.head_options", "train.mixed_precision")


def encoder_name(encoder: str) -> str:
    """``MiniLM`` for all-MiniLM-L6-v2, ``MPNet`` for all-mpnet-base-v2, else the name (a path's last part)."""
    return ENCODERS.get(encoder, str(encoder).rstrip("/").rsplit("/", 1)[-1])


def rate(value: float) -> str:
    """``1e-3``, ``5e-5``, ``2e-4``: a learning rate as the pages write it."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def setting(key: str, value: Any, resolved: dict[str, Any] | None = None) -> str:
    """One option of a row in words, for the parentheses of :func:`head_name`: ``frozen``, ``head lr 1e-3``,
    ``cross``, ``pointwise``, ``fusion layers 0``; '' for a default that needs no words."""
    if key == "model.freeze_encoder":
        return "frozen" if value else "fine-tuned"
    if key in ("model.ranker", "train.rank_loss"):
        return str(value)
    if key == "train.lr":
        return f"lr {rate(value)}"
    if key == "train.head_lr":
        lr = value if value is not None else (resolved or {}).get("train.lr")
        return f"head lr {rate(lr)}" if lr is not None else "head lr as the encoder's"
    if key == "train.mixed_precision":
        return "fp32" if value in ("no", None) else str(value)
    if key == "model.head_options":
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted((value or {}).items()))
    return f"{key.rsplit('.', 1)[-1].replace('_', ' ')} {value}"


def head_name(head: str, settings: list[str] | tuple[str, ...] = (), encoder: str | None = None) -> str:
    """The one naming of heads and variants in every table: the ``--model.head`` name, a variant's settings in
    parentheses, and the encoder only where a table compares encoders: ``hire``, ``hire (head lr 1e-4)``,
    ``hire (frozen)``, ``hire (cross, pointwise)``, ``MiniLM: hire``."""
    words = [s for s in settings if s]
    return (f"{encoder_name(encoder)}: " if encoder else "") + head + (f" ({', '.join(words)})" if words else "")


def row_names(rows: list[dict[str, Any]], resolve: Any = None) -> list[str]:
    """:func:`head_name` of each row of a table from the options that select it (``model.head`` and the options that
    tell the rows apart): an option that varies names the variant, unless another one already splits the rows the
    same way (``model.freeze_encoder`` and the ``train.head_lr`` that goes with it: only ``frozen``). ``resolve``
    gives a row's full options (a record's), for a value the row leaves to the default (head lr: the lr)."""
    keys = sorted({k for r in rows for k in r if k != "model.head"},
                  key=lambda k: (OPTION_ORDER.index(k) if k in OPTION_ORDER else len(OPTION_ORDER), k))
    kept: list[str] = []
    partitions: list[list[str]] = []
    for key in keys:
        values = [json.dumps(r.get(key), sort_keys=True) for r in rows]
        if len(set(values)) < 2:
            continue
        partition = [str(sorted(i for i, v in enumerate(values) if v == value)) for value in values]
        if partition in partitions:
            continue
        kept.append(key)
        partitions.append(partition)
    names = []
    for r in rows:
        resolved = resolve(r) if resolve else None
        encoder = r.get("model.encoder") if "model.encoder" in kept else None
        names.append(head_name(str(r.get("model.head")), [setting(k, r.get(k), resolved) for k in kept
                                                          if k != "model.encoder"], encoder))
    return names


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
        return verdict(self.lo, self.hi)


class Cell:
    """One row and task of a table (``Avg``: the row's mean over the tasks), x100."""

    def __init__(self, data: dict[str, Any], average: bool = False):
        self.n: int = data["n"]
        self.median = _num(data["of_medians"] if average else data["median"])
        self.mean, self.std = _num(data["mean"]), _num(data["std"])
        self.min, self.max = _num(data["min"]), _num(data["max"])
        self.scores = [Num(v) for _, v in sorted(data["scores"].items(), key=lambda kv: int(kv[0]))]
        self.vs = Paired(data["vs_baseline"]) if (data.get("vs_baseline") or {}).get("n") else None  # n=0: no pair yet

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
        self.names = dict(zip(self.rows, row_names([r["options"] for r in self.data["rows"]]), strict=True))

    def named(self, label: str) -> str:
        """The row's name in every table of the site (:func:`head_name`), not the label the experiment file gave."""
        return self.names[self.row(label)["label"]]

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
        for table in self.tables.values():  # a row's default (head lr None: the lr) read from one of its records
            table.names = dict(zip(table.rows, row_names([r["options"] for r in table.data["rows"]], self._resolve),
                                   strict=True))

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        """The full options (``train.lr`` ...) of the first record that these options select, from its config ({}
        where none does)."""
        for r in self.records.values():
            if all(r["options"].get(k) == v for k, v in options.items()):
                config = r.get("config") or {}
                return {f"{part}.{k}": v for part, values in config.items() if isinstance(values, dict)
                        for k, v in values.items()}
        return {}

    @property
    def declared_seeds(self) -> int:
        """How many seeds the experiment file (its copy, ``experiment.yaml``) declares per cell (0 where unknown)."""
        path = self.dir / "experiment.yaml"
        seeds = (yaml.safe_load(path.read_text()) or {}).get("seeds") if path.is_file() else None
        return len(seeds) if isinstance(seeds, list) else 0

    @property
    def planned(self) -> int:
        """How many cells the experiment file declares (``summary.json``'s count of the spec's cells)."""
        return int(self.summary["cells"])

    @property
    def done(self) -> int:
        """How many cells have a record in ``records/``."""
        return len(self.records)

    @property
    def finished(self) -> bool:
        """Every declared cell has its record: the grid is done and its page states results, not progress."""
        return self.done >= self.planned

    @property
    def progress(self) -> str:
        """``53 of 60 cells``."""
        return f"{self.done} of {self.planned} cells"

    def table(self, name: str) -> Table:
        if name not in self.tables:
            raise KeyError(f"{self.name}: no table {name!r} (tables: {', '.join(self.tables)})")
        return self.tables[name]

    def runs(self, cells: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """The records of the cells ``cells`` names without its seed (``CoLA__hire__fusion_layers=0``) and whose
        task, head or options have these values (``task="CoLA", head="hire"``, or a run option with ``__`` for
        its dots: ``train__seed=1``), in seed order."""
        found = self._find(cells, match)
        if not found:
            raise KeyError(f"{self.name}: no record of {cells or 'any cell'} with {match}")
        return found

    def _find(self, cells: str | None, match: dict[str, Any]) -> list[dict[str, Any]]:
        def fits(r: dict[str, Any]) -> bool:
            return (cells is None or r["cell"].rsplit("__seed", 1)[0] == cells) and all(
                (r.get(k) if k in ("task", "head") else r["options"].get(k.replace("__", "."))) == v
                for k, v in match.items())
        return sorted((r for r in self.records.values() if fits(r)), key=lambda r: (r["cell"].rsplit("__seed", 1)[0],
                                                                                   r["options"].get("train.seed", 0)))

    def scores(self, split: str = "dev", metric: str = "score", **match: Any) -> list[Num]:
        """A metric x100 of the matching records (as :meth:`runs`) on a split: ``dev`` (the split that chose the
        checkpoint) or a held-out one (``test``)."""
        return [Num(100 * RunPairs.score(r, split, metric)) for r in self.runs(**match)]

    def paired(self, base: dict[str, Any], **match: Any) -> RunPairs:
        """The matching records (as :meth:`runs`), each with the record whose options are its own with ``base``'s
        values (``{"model.head": "last-layer"}``: the same loss and seed, the last layer's head); records with no
        such partner yet, or none matching at all, give fewer pairs (or none) rather than an error."""
        by_options = {json.dumps(r["options"], sort_keys=True): r for r in self.records.values()}
        pairs = []
        for r in self._find(None, match):
            b = by_options.get(json.dumps({**r["options"], **base}, sort_keys=True))
            if b is not None and b is not r:
                pairs.append((r, b))
        return RunPairs(pairs)

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

    def layer_weights(self, cell: str) -> list[Num]:
        """A run's mean weight of every hidden state over the dev examples, state 0 (the embeddings) first."""
        row = self._weights(cell)
        states = sorted((int(h[1:]), v) for h, v in row.items() if h[:1] == "h" and h[1:].isdigit() and v)
        return [Num(float(v)) for _, v in states]

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


class RunPairs:
    """Records paired seed by seed with their baseline's (:meth:`Experiment.paired`): differences x100 of a metric
    on a split (``dev``: the split that chose the checkpoint; ``test``: the held-out split, scored once)."""

    def __init__(self, pairs: list[tuple[dict[str, Any], dict[str, Any]]]):
        self.pairs = pairs
        self.n = len(pairs)
        self.seeds = [r["options"].get("train.seed") for r, _ in pairs]

    @staticmethod
    def score(record: dict[str, Any], split: str, metric: str) -> float:
        scores = record["dev"] if split in record.get("dev", {}) else record["held_out"]
        return float(scores[split][metric])

    def diffs(self, split: str = "dev", metric: str = "map") -> list[Num]:
        return [Num(100 * (self.score(r, split, metric) - self.score(b, split, metric))) for r, b in self.pairs]

    def signs(self, split: str = "dev", metric: str = "map") -> str:
        """``+1.3, -0.6``: the differences, seed by seed."""
        return ", ".join(d.s for d in self.diffs(split, metric))

    def ahead(self, split: str = "dev", metric: str = "map") -> int:
        return sum(d > 0 for d in self.diffs(split, metric))

    def behind(self, split: str = "dev", metric: str = "map") -> int:
        return sum(d < 0 for d in self.diffs(split, metric))

    def median(self, split: str = "dev", metric: str = "map") -> Num:
        values = sorted(self.diffs(split, metric))
        mid = len(values) // 2
        return Num(values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2)

    def minutes(self, baseline: bool = False) -> str:
        """The range of training minutes of the rows' records (``baseline``: of their partners')."""
        return span([(b if baseline else r)["train_seconds"] / 60 for r, b in self.pairs], ".0f")


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

    def dev_choice(self) -> dict[str, Any]:
        """How the dev choice differs from the test maximum over this probe's (task, encoder) tables with a held-out
        test split: ``tables``, ``moved`` (tables where the two cells differ), the ``median`` and ``max`` test points
        between them (0 where none moved)."""
        from hire.probing import tables

        gaps, count = [], 0
        for task in self.results["tasks"].values():
            if not tables.held_out(task):
                continue
            for record in task["results"].values():
                count += 1
                test, dev = tables.grid(record, task["headline"]), tables.grid(record, tables.selection_split(task))
                (r, p), (o, q) = tables.choose(dev), tables.choose(test)
                if (r, p) != (o, q):
                    gaps.append(100 * (test[o][q] - test[r][p]))
        gaps.sort()
        return {"tables": count, "moved": len(gaps), "median": _one(gaps[len(gaps) // 2]) if gaps else "0",
                "max": _one(gaps[-1]) if gaps else "0"}

    def oracle(self, task: str, encoder: str) -> str:
        """The single state that the headline split alone would pick (an oracle, never a result), where it differs
        from the dev choice; else the dev choice."""
        value = self._row(task, encoder)["test-best single state (oracle)"]
        return self.best(task, encoder) if value == "-" else value

    def concat(self, task: str, encoder: str) -> str:
        return self._row(task, encoder)["best concatenation"]

    def state(self, task: str, encoder: str) -> int:
        """The best single hidden state's index (0 = embeddings): ``18.43 (2, mean)`` -> 2."""
        return int(self.best(task, encoder).split("(")[1].split(",")[0])

    def curve(self, task: str, encoder: str) -> list[float]:
        """Each single hidden state's headline score (x 100) under the pooling chosen for it on dev (on the scored
        split where the task has no other: :func:`hire.probing.tables.state_curve`)."""
        from hire.probing.tables import state_curve

        record = self.results["tasks"].get(task, {}).get("results", {}).get(encoder)
        if record is None:
            raise KeyError(f"{self.name}: no probe of {encoder} on {task}")
        return [100 * score for score, _ in state_curve(self.results["tasks"][task], record)]

    def near(self, task: str, encoder: str, points: float = 1.0) -> list[int]:
        """The single hidden states that score within ``points`` of the state chosen on dev, or above it (scores x
        100 on the headline split): the chosen state is always among them."""
        scores = self.curve(task, encoder)
        chosen = scores[self.state(task, encoder)]
        return [i for i, s in enumerate(scores) if s >= chosen - points - 1e-9]

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


RANK_FORMAT = "hire-rank-probe/1"  # hire.ranking.tables.FORMAT (not imported: that module loads torch)


class RankCell:
    """One cell of a ``hire rank-probe`` block (a feature set under one pooling), or BM25: MAP, MRR and P@1 x100.

    ``dev`` is the dev MAP (what chooses cells); ``map``, ``mrr`` and ``p1`` are on the headline split (test where
    the data has one, else dev)."""

    def __init__(self, data: dict[str, Any], split: str, block: str = "BM25"):
        self.block, self.row, self.pooling = block, str(data.get("row", "")), str(data.get("pooling", ""))
        self.dev = Num(100 * data["dev"]["map"])
        self.map, self.mrr, self.p1 = (Num(100 * data[split][m]) for m in ("map", "mrr", "p@1"))

    @property
    def where(self) -> str:
        """``last 4 (3-6), mean``: the feature set and pooling."""
        return f"{self.row}, {self.pooling}"


class RankBlock:
    """One (scorer, loss) block of a rank probe: every feature set x pooling, the cell dev MAP chose, its time."""

    def __init__(self, key: str, data: dict[str, Any], split: str):
        self.key, self.scorer, self.loss = key, str(data["scorer"]), str(data["loss"])
        self.name = self.scorer if self.loss == "none" else f"{self.scorer}, {self.loss} loss"
        self.learned = self.scorer != "cosine"
        self.seconds = Num(data["seconds"])
        self.cells = {(str(c["row"]), str(c["pooling"])): RankCell(c, split, self.name) for c in data["rows"]}
        self.rows = list(dict.fromkeys(r for r, _ in self.cells))
        self.poolings = list(dict.fromkeys(p for _, p in self.cells))
        self.chosen = self.cell(data["best"]["row"], data["best"]["pooling"])

    def cell(self, row: str | int, pooling: str) -> RankCell:
        """The cell of feature set ``row`` (``6``, ``first+last (1+6)``) under ``pooling``."""
        if (str(row), pooling) not in self.cells:
            raise KeyError(f"block {self.name}: no cell {row!r} x {pooling!r} (feature sets: {', '.join(self.rows)}; "
                           f"poolings: {', '.join(self.poolings)})")
        return self.cells[str(row), pooling]

    @property
    def states(self) -> list[str]:
        """The single hidden states among the feature sets (``0`` = embeddings ... ``l``), in order."""
        return [r for r in self.rows if r.isdigit()]

    @property
    def top(self) -> RankCell:
        """The cell with the best headline MAP (the table's bold one)."""
        return max(self.cells.values(), key=lambda c: c.map)

    def top_state(self, pooling: str | None = None, skip: str | None = None) -> RankCell:
        """The single hidden state (under ``pooling``, or any; other than ``skip``) with the best headline MAP."""
        return max((c for (r, p), c in self.cells.items() if r.isdigit() and r != skip and pooling in (None, p)),
                   key=lambda c: c.map)

    def pooling_mean(self, pooling: str) -> Num:
        """The headline MAP of ``pooling`` averaged over the Transformer layers 1..l (the study's comparison)."""
        layers = self.states[1:] or self.states
        return Num(sum(self.cell(r, pooling).map for r in layers) / len(layers))

    @property
    def best_pooling(self) -> str:
        return max(self.poolings, key=self.pooling_mean)


class Versus:
    """Cell against cell, block by block (headline MAP): how often the first is ahead."""

    def __init__(self, pairs: list[tuple[RankCell, RankCell]]):
        self.pairs = pairs
        self.n = len(pairs)
        self.ahead = sum(a.map > b.map for a, b in pairs)

    @property
    def listing(self) -> str:
        """``bilinear, hinge loss 67.5 against 59.9; ...`` (the second cell's feature set named where it varies)."""
        named = len({b.row for _, b in self.pairs}) > 1
        return "; ".join(f"{a.block} {a.map} against {b.map}" + (f" ({b.row})" if named else "")
                         for a, b in self.pairs)


class RankProbe:
    """``hire rank-probe``'s output folder, read from its ``results.json`` alone: BM25, every (scorer, loss) block
    of every encoder, the cells dev MAP chose, the data's question counts, the machine and the seconds."""

    def __init__(self, directory: Path):
        self.dir, self.name = directory, directory.name
        path = directory / "results.json"
        self.results = json.loads(path.read_text())
        missing = [k for k in ("config", "data", "bm25", "results", "machine", "best", "seconds")
                   if k not in self.results]
        if self.results.get("format") != RANK_FORMAT or missing:
            raise ValueError(f"{path}: not a finished `hire rank-probe` record (format "
                             f"{self.results.get('format')!r}; missing: {', '.join(missing) or 'nothing'})")
        data = self.results["data"]
        self.split = "test" if "test" in data["questions"] else "dev"
        self.keep: str = data["keep"]
        self.encoders = list(self.results["results"])
        self._blocks = {label: {key: RankBlock(key, b, self.split) for key, b in record["blocks"].items()}
                        for label, record in self.results["results"].items()}
        self.bm25 = RankCell(self.results["bm25"], self.split)
        best = self.results["best"]
        self.best = self.block(f"{best['scorer']}/{best['loss']}", best["label"]).cell(best["row"], best["pooling"])

    def questions(self, split: str) -> int:
        """How many questions of ``split`` count (those ``keep`` kept)."""
        return int(self.results["data"]["questions"][split])

    def candidates(self, split: str) -> int:
        return int(self.results["data"]["candidates"][split])

    def dropped(self, split: str) -> str:
        """``170 no positive, 4 no negative``: the questions of ``split`` left out, and why."""
        found = self.results["data"].get("dropped", {}).get(split, {})
        return ", ".join(f"{n} {why}" for why, n in found.items() if n) or "none"

    def _label(self, encoder: str | None) -> str:
        if encoder is None:
            if len(self.encoders) != 1:
                raise KeyError(f"{self.name}: name the encoder (encoders: {', '.join(self.encoders)})")
            return self.encoders[0]
        if encoder not in self._blocks:
            raise KeyError(f"{self.name}: no encoder {encoder!r} (encoders: {', '.join(self.encoders)})")
        return encoder

    def blocks(self, encoder: str | None = None) -> list[RankBlock]:
        """Every (scorer, loss) block of the encoder (the only one when ``encoder`` is None), in the record's order."""
        return list(self._blocks[self._label(encoder)].values())

    def block(self, key: str, encoder: str | None = None) -> RankBlock:
        """A block by key: ``cosine/none``, ``logistic/hinge``, ``mlp/pointwise`` ..."""
        blocks = self._blocks[self._label(encoder)]
        if key not in blocks:
            raise KeyError(f"{self.name}: no block {key!r} (blocks: {', '.join(blocks)})")
        return blocks[key]

    def learned(self, encoder: str | None = None) -> list[RankBlock]:
        """The blocks of trained scorers (every one but cosine)."""
        return [b for b in self.blocks(encoder) if b.learned]

    def versus(self, a: str, b: str | None = None, pooling: str = "mean", learned: bool = True,
               encoder: str | None = None) -> Versus:
        """Feature set ``a`` against ``b`` (None: each block's best single hidden state) under ``pooling``, in every
        learned block (``learned=False``: every block)."""
        blocks = self.learned(encoder) if learned else self.blocks(encoder)
        return Versus([(blk.cell(a, pooling), blk.cell(b, pooling) if b is not None else blk.top_state(pooling))
                       for blk in blocks])

    def top_states(self, pooling: str | None = "mean", learned: bool = True,
                   encoder: str | None = None) -> list[RankCell]:
        """Each learned block's (or every block's) best single hidden state under ``pooling``, in block order."""
        return [b.top_state(pooling) for b in (self.learned(encoder) if learned else self.blocks(encoder))]

    def loss_wins(self, loss: str = "pointwise", over: str = "hinge", encoder: str | None = None) -> list[str]:
        """The scorers whose cell chosen with ``loss`` has a better headline MAP than the one chosen with ``over``."""
        blocks = {(b.scorer, b.loss): b for b in self.learned(encoder)}
        return [scorer for (scorer, lo), b in blocks.items() if lo == loss and (scorer, over) in blocks
                and b.chosen.map > blocks[scorer, over].chosen.map]

    def strongest(self, scorers: str, chosen: bool = True, encoder: str | None = None) -> RankCell:
        """Of the blocks of ``scorers`` (comma-separated: ``logistic,mlp``), the cell with the best headline MAP among
        the cells dev MAP chose (``chosen=False``: among every cell of those blocks)."""
        names = scorers.split(",")
        found = [b.chosen if chosen else b.top for b in self.blocks(encoder) if b.scorer in names]
        if not found:
            raise KeyError(f"{self.name}: no block of {scorers!r}")
        return max(found, key=lambda c: c.map)

    def by_dev(self, encoder: str | None = None) -> RankCell:
        """Of the encoder's learned blocks' chosen cells, the one with the best dev MAP: dev MAP alone picks it,
        with no look at the headline split (as ``results.json``'s ``best`` does over every encoder)."""
        return max((b.chosen for b in self.learned(encoder)), key=lambda c: c.dev)

    def shortfall(self, encoder: str | None = None) -> str:
        """``0.0-9.8``: how far each block's chosen cell falls below the block's best headline MAP, smallest to
        largest (what choosing by dev MAP costs on the headline split)."""
        return span([b.top.map - b.chosen.map for b in self.blocks(encoder)])

    def row(self, prefix: str) -> str:
        """The feature set whose label starts with ``prefix``: ``first+last`` -> ``first+last (1+6)``; ``last``: the
        last hidden state."""
        rows = self.blocks(self.encoders[0])[0].rows
        if prefix == "last":
            return [r for r in rows if r.isdigit()][-1]
        found = [r for r in rows if r.startswith(prefix)]
        if len(found) != 1:
            raise KeyError(f"{self.name}: {len(found)} feature sets start with {prefix!r} (feature sets: "
                           f"{', '.join(rows)})")
        return found[0]

    @property
    def bm25_settings(self) -> str:
        """``Lucene's BM25, k1 1.5, b 0.75, stop words en, no stemming``."""
        s = self.results["bm25"]["settings"]
        stem = f"stemmer {s['stemmer']}" if s.get("stemmer") else "no stemming"
        stop = f"stop words {s['stopwords']}" if s.get("stopwords") else "no stop words"
        return f"{s['method']} BM25, k1 {s['k1']}, b {s['b']}, {stop}, {stem}"

    @property
    def seconds(self) -> dict[str, Num]:
        """``encode``, ``fit`` and ``all``, in seconds."""
        s = self.results["seconds"]
        return {"encode": Num(s["encode"]), "fit": Num(s["fit"]), "all": Num(s["encode"] + s["fit"])}

    @property
    def minutes(self) -> dict[str, str]:
        return {k: _one(v / 60) for k, v in self.seconds.items()}

    def texts(self, encoder: str | None = None) -> int:
        """How many questions and passages the encoder encoded."""
        return int(self.results["results"][self._label(encoder)]["encode"]["texts"])

    @property
    def cells(self) -> int:
        """How many cells (feature set x pooling x block, over every encoder) the record holds."""
        return sum(len(b.cells) for blocks in self._blocks.values() for b in blocks.values())

    @property
    def machine(self) -> str:
        """``AMD EPYC, 2 CPUs, 1 torch thread, cpu, bf16 encoding, torch 2.13.0+cpu``."""
        m, c = self.results["machine"], self.results["config"]
        threads = m.get("torch_threads")
        return (f"{m.get('cpu') or m.get('device')}, {m.get('cpu_count')} CPUs, {threads} torch "
                f"thread{'' if threads == 1 else 's'}, device {m.get('device')}, {c.get('mixed_precision')} encoding, "
                f"features cached as {c.get('cache_dtype')}, torch {m.get('torch')}")

    @property
    def command(self) -> str:
        """The ``hire rank-probe`` command that made this folder: its encoders, data and question set (every other
        option as ``results.json``'s config records it, the command's defaults here)."""
        c = self.results["config"]
        labels = f"--labels '{','.join(c['labels'])}' " if c.get("labels") else ""
        return (f"hire rank-probe --encoders {','.join(c['encoders'])} {labels}--task {c['task']} --keep {c['keep']} "
                f"--output_dir experiments/{self.name}")


class CommandReport:
    """A folder whose ``report.md`` a repository command wrote from the folder's own files: ``hire probe-tokens``
    (``results.json`` with ``command: probe-tokens``) or ``scripts/table7.py report`` (``tables/table7.json``).
    ``data`` is that JSON, for the findings' fields; ``redraw`` is the command that makes the report again."""

    def __init__(self, directory: Path, data_file: str, redraw: str):
        self.dir, self.name = directory, directory.name
        self.data = json.loads((directory / data_file).read_text())
        self.redraw = redraw

    @property
    def report(self) -> str:
        return (self.dir / "report.md").read_text()

    def token_best(self, task: str, encoder: str) -> str:
        """probe-tokens: ``93.1 (layer 3)``, the test accuracy x 100 of ``encoder``'s layer chosen on dev accuracy
        on ``task`` (:func:`hire.probing.tokens.summarise`)."""
        s = self._token_summary(task, encoder)
        return f"{100 * s['best']:.1f} (layer {s['best_layer']})"

    def token_last(self, task: str, encoder: str) -> str:
        cell = self.data["tasks"][task]["results"][encoder]
        return f"{100 * cell['layers'][-1]['task']['test']['accuracy']:.1f}"

    def _token_summary(self, task: str, encoder: str) -> dict[str, Any]:
        from hire.probing.tokens import summarise

        return summarise(self.data["tasks"][task]["results"][encoder]["layers"])

    def token_selectivity(self, task: str, encoder: str) -> str:
        """probe-tokens: the selectivity (task minus control-task test accuracy) x 100 of the layer chosen on dev
        accuracy (the layer ``token_best`` names)."""
        cell = self.data["tasks"][task]["results"][encoder]
        layer = cell["layers"][self._token_summary(task, encoder)["best_layer"]]
        return f"{100 * (layer['task']['test']['accuracy'] - layer['control']['test']['accuracy']):.1f}"

    def token_words(self, task: str, split: str = "train") -> str:
        """probe-tokens: the number of words of ``task``'s ``split``, with thousands separators."""
        return f"{self.data['tasks'][task]['words'][split]:,}"

    def token_majority(self, task: str) -> str:
        majority = self.data["tasks"][task]["majority"]
        value = majority.get("test", majority)
        return f"{100 * (value['accuracy'] if isinstance(value, dict) else value):.1f}"

    def table7_median(self, kind: str, row: str | None = None, split: str = "dev") -> float:
        """table7: the median over seeds of a row's entity F1 x 100; with no ``row``, the best median of ``kind``."""
        medians = [r[split]["median"] for r in self.data["rows"]
                   if r["kind"] == kind and (row is None or r["row"] == row)]
        if not medians:
            raise KeyError(f"table7: no row {kind!r} {row!r}")
        return max(medians)

    def table7_best_epochs(self, row: str) -> str:
        """table7: a frozen row's best epochs by seed, ``4, 3, 4`` (of the epochs each ran)."""
        r = self._table7_row("frozen features", row)
        return ", ".join(str(e) for e in r["best_epochs"])

    def table7_best_was_last(self) -> str:
        """table7: in how many of the frozen rows' runs (every row and seed) the best epoch was the last one run,
        ``17 of 35``."""
        runs = [(b, n) for r in self.data["rows"] if r["kind"] == "frozen features"
                for b, n in zip(r["best_epochs"], r["epochs_run"], strict=True)]
        return f"{sum(b == n for b, n in runs)} of {len(runs)}"

    def table7_last_epoch_move(self) -> str:
        """table7: the largest change of dev F1 x 100 between a run's last two epochs, over the frozen rows' runs."""
        return f"{max(r['largest_last_epoch_move'] for r in self.data['rows'] if r['kind'] == 'frozen features'):.1f}"

    def _table7_row(self, kind: str, row: str) -> dict[str, Any]:
        for r in self.data["rows"]:
            if r["kind"] == kind and r["row"] == row:
                return r
        raise KeyError(f"table7: no row {kind!r} {row!r}")

    def table7(self, kind: str, row: str, split: str = "dev") -> str:
        """table7: ``86.3 [85.9, 86.8]`` (median [min, max] over seeds) of a row's entity F1 x 100."""
        try:
            s = self._table7_row(kind, row)[split]
        except KeyError:
            return "not yet measured"
        return f"{s['median']:.1f}" if s["n"] == 1 else f"{s['median']:.1f} [{s['min']:.1f}, {s['max']:.1f}]"


def load(directory: Path) -> Experiment | Probe | Reconstruct | RankProbe | CommandReport:
    """Whichever of the four an ``experiments/<name>/`` folder holds: ``summary.json`` (an experiment grid), or the
    ``format`` of its ``results.json``. ValueError naming the folder for anything else, such as a command still
    running there (a page is made from finished records only)."""
    if (directory / "summary.json").is_file():
        return Experiment(directory)
    path = directory / "results.json"
    try:
        found = json.loads(path.read_text()).get("format") if path.is_file() else None
    except (json.JSONDecodeError, AttributeError):
        found = "not a JSON object"
    if found == "hire-probe/1" and (directory / "which_layer.csv").is_file():
        return Probe(directory)
    if found == RANK_FORMAT:
        return RankProbe(directory)
    if found == "hire-reconstruct/1":
        return Reconstruct(directory)
    if path.is_file() and json.loads(path.read_text()).get("command") == "probe-tokens":
        return CommandReport(directory, "results.json", f"hire probe-tokens-report experiments/{directory.name}")
    if (directory / "tables" / "table7.json").is_file():
        return CommandReport(directory, "tables/table7.json", "python scripts/table7.py report")
    what = "a `hire probe` record without which_layer.csv" if found == "hire-probe/1" else \
        f"no results.json of a known format ({found})" if path.is_file() else "neither summary.json nor results.json"
    raise ValueError(f"{directory}: {what}; a results page is made from a finished `hire experiment report`, "
                     "`hire probe`, `hire rank-probe` or `hire reconstruct` folder (is a command still running there?)")


def hire_against_last_layer(experiments: dict[str, Any]) -> list[dict[str, Any]]:
    """Every paired comparison of a HIRE row with a last-layer baseline in every experiment's tables (a cell shared
    by two experiments counted once, where it first appears): experiment, table, encoder, row label, task, the
    two cells (``last``, ``hire``), and the ``verdict``: the pair's (:attr:`Paired.verdict`), except while the
    experiment is still running and HIRE has fewer seeds than the table's fullest row (``measuring``): then no
    verdict yet, since an interval over two or three of five planned seeds would claim what the rest may undo."""
    found, seen = [], set()
    for name, exp in experiments.items():
        if not isinstance(exp, Experiment):
            continue
        unfinished = not exp.finished
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
                    planned = max(exp.declared_seeds, *(table.cell(other, task).n for other in table.rows))
                    measuring = unfinished and hire.vs.n < planned
                    verdict = (f"no verdict: {hire.vs.n} of {planned} seeds done" if measuring
                               else hire.vs.verdict)
                    found.append({"experiment": name, "table": table.name, "encoder": encoders, "row": label,
                                  "name": table.named(label),
                                  "task": task, "hire": hire, "last": last, "measuring": measuring,
                                  "verdict": verdict})
    return found
