"""Tables and figures of a probe, drawn from ``results.json`` alone (byte-identical when redrawn).

For each task: a table per encoder (hidden states and concatenations as rows, poolings as columns,
scores x 100 on the task's headline split, the chosen cell in bold), written as Markdown and CSV; the
difference of every further encoder from the first (the study's §1.3, pre-trained vs fine-tuned); and
``layers.png``, the score against the hidden state, one colour per pooling and one line style per
encoder. Across tasks: each pooling's average over the Transformer layers ``1..l`` (the study's Table 1).

**Every "best" is chosen on dev** (:func:`selection_split`): where a task is scored on a held-out test split, the
cell (hidden state, pooling) with the highest *dev* score is the chosen one, and its test score is the one reported;
the cell with the highest test score is shown beside it only as a labelled oracle. Where the headline split is the
only labelled one (cross-validation, or GLUE's dev where test has no labels), the cell is chosen and scored on that
split, and the report says that the figure is optimistic. Ties go to the first cell in the probed order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hire.figures import MARKERS, legend_below, new_axes, pct, save_png, slug, write_text
from hire.lab.pooling import POOLINGS
from hire.reporting import csv_table, markdown_table

LINE_STYLES = ("-", "--", ":", "-.")  # one per encoder in a figure
_COLOURS = {"cls": "#1f77b4", "sep": "#ff7f0e", "mean": "#2ca02c", "max": "#d62728"}


def grid(record: dict[str, Any], headline: str) -> dict[str, dict[str, float]]:
    """``{row: {pooling: score}}`` on the headline split, in the order the rows were probed."""
    table: dict[str, dict[str, float]] = {}
    for r in record["rows"]:
        table.setdefault(r["row"], {})[r["pooling"]] = r["splits"][headline]["score"]
    return table


def selection_split(task: dict[str, Any]) -> str:
    """The split a task's best cell is chosen on: dev where the task is scored on test and has a labelled dev
    split; otherwise the headline split itself (``cv``, or ``dev`` where test has no labels)."""
    if task["headline"] not in ("dev", "cv") and "dev" in task["eval_splits"]:
        return "dev"
    return task["headline"]


def held_out(task: dict[str, Any]) -> bool:
    """Whether the reported score of a chosen cell is on a split the choice never saw."""
    return selection_split(task) != task["headline"]


def choose(select: dict[str, dict[str, float]], rows: list[str] | None = None) -> tuple[str, str]:
    """The cell ``(row, pooling)`` with the highest score in ``select`` (the selection split's table), among
    ``rows`` (default: every row); the first in the probed order on ties."""
    cells = [(row, p) for row in (rows if rows is not None else list(select)) for p in select[row]]
    return max(cells, key=lambda rp: select[rp[0]][rp[1]])


def score_table(table: dict[str, dict[str, float]], select: dict[str, dict[str, float]] | None = None,
                ) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """Header, Markdown rows (the cell chosen on ``select``, default ``table`` itself, in bold) and CSV rows (a
    ``best`` column names the chosen cell's pooling)."""
    best = choose(table if select is None else select)
    md, rows = [], []
    for row, cells in table.items():
        values = [pct(cells[p]) for p in POOLINGS]
        md.append([row, *[f"**{v}**" if (row, p) == best else v for p, v in zip(POOLINGS, values, strict=True)]])
        rows.append([row, *values, best[1] if row == best[0] else ""])
    return ["hidden state", *POOLINGS], md, rows


def difference(base: dict[str, dict[str, float]], other: dict[str, dict[str, float]]) -> list[list[str]]:
    """``other - base`` in points, for the rows both have."""
    return [[row, *[f"{100 * (other[row][p] - base[row][p]):+.2f}" for p in POOLINGS]]
            for row in base if row in other]


def layer_means(table: dict[str, dict[str, float]], num_hidden_states: int) -> dict[str, float]:
    """Each pooling's mean over the rows of the single Transformer layers 1..l of ``table`` (``0`` alone where
    there is no layer beyond the embeddings)."""
    layers = [str(i) for i in range(1, num_hidden_states)] or ["0"]
    return {p: sum(table[r][p] for r in layers) / len(layers) for p in POOLINGS}


def pooling_averages(record: dict[str, Any], headline: str) -> dict[str, float]:
    """Each pooling's mean over the single Transformer layers 1..l (the study's Table 1)."""
    return layer_means(grid(record, headline), record["num_hidden_states"])


def task_records(results: dict[str, Any], labels: list[str]) -> Iterator[tuple[str, dict[str, Any], str, Any]]:
    """``(task name, task, label, the encoder's result on the task)`` for every task of ``results`` in order and
    every encoder of ``labels`` probed on it, in ``labels``' order."""
    for name, task in results["tasks"].items():
        for label in labels:
            if label in task["results"]:
                yield name, task, label, task["results"][label]


def encoder_lines(results: dict[str, Any]) -> list[str]:
    """A report's list of its encoders: label, spec, kind and the start of the weights' sha256."""
    return [f"- {e['label']}: {e['encoder']} ({e['kind']}, weights sha256 {e['fingerprint'][:12]})"
            for e in results["encoders"]]


def metric_name(metrics: list[str]) -> str:
    return metrics[0] if len(metrics) == 1 else f"mean of {' and '.join(metrics)}"


def _describe(task: dict[str, Any], folds: int) -> str:
    if task["headline"] == "cv":
        split = f"{folds}-fold cross-validation"
    elif task["regression"]:
        split = f"{task['headline']} (trained on train, alpha chosen by leave-one-out on it)"
    elif task["headline"] == "test":
        split = "test (trained on train, regularisation chosen on dev)"
    else:
        split = f"{task['headline']} (trained on train, regularisation chosen on a held-out tenth of it)"
    examples = ", ".join(f"{s} {n}" for s, n in task["examples"].items())
    kind = "sentence pairs as (u, v, u*v, |u-v|)" if task["pair"] else "sentences"
    model = "ridge regression" if task["regression"] else "logistic regression"
    return f"{metric_name(task['metrics'])} x 100 on {split}; {model} on {kind}; examples: {examples}."


def encoder_style(i: int) -> dict[str, Any]:
    """The line style and marker of the ``i``-th encoder of a figure."""
    return {"linestyle": LINE_STYLES[i % len(LINE_STYLES)], "marker": MARKERS[i % len(MARKERS)]}


def encoder_handles(n: int) -> list[Any]:
    """Legend entries for ``n`` encoders' line styles and markers, in grey."""
    from matplotlib.lines import Line2D

    return [Line2D([], [], color="0.3", markersize=5, linewidth=1.4, **encoder_style(i)) for i in range(n)]


def short_encoder(label: str) -> str:
    """An encoder's name as a figure shows it: a Hugging Face name or ``random:<name>`` as it is; a run folder of a
    fine-tuned model (``runs/ft/x/CoLA__hire__head_lr=None__seed1``) as its task, head and seed
    (``fine-tuned on CoLA: hire, seed 1``)."""
    if "/" not in label or label.startswith("random:"):
        return label
    name = label.rstrip("/").rpartition("/")[2]
    parts = name.split("__")
    if len(parts) < 3 or not parts[-1].startswith("seed"):
        return name
    return f"fine-tuned on {parts[0]}: {parts[1]}, seed {parts[-1].removeprefix('seed')}"


def layers_figure(name: str, task: dict[str, Any], labels: list[str]) -> Any:
    """Score against hidden state, one colour per pooling, one line style and marker per encoder; the legend under
    the axes names the colours and the styles once each."""
    from matplotlib.lines import Line2D

    fig, ax = new_axes()
    for i, label in enumerate(labels):
        record = task["results"][label]
        table = grid(record, task["headline"])
        layers = list(range(record["num_hidden_states"]))
        for p in POOLINGS:
            ax.plot(layers, [100 * table[str(j)][p] for j in layers], markersize=4, linewidth=1.4,
                    color=_COLOURS[p], **encoder_style(i))
    ax.set_xticks(range(max(task["results"][label]["num_hidden_states"] for label in labels)))
    ax.set_xlabel("hidden state (0 = embeddings)")
    ax.set_ylabel(f"{task['headline']} score x 100")
    ax.set_title(f"{name}: {metric_name(task['metrics'])} by hidden state and pooling", fontsize=10)
    ax.grid(alpha=0.3)
    groups = [([Line2D([], [], color=_COLOURS[p], linewidth=3) for p in POOLINGS], [f"{p} pooling" for p in POOLINGS])]
    if len(labels) > 1:
        groups.append((encoder_handles(len(labels)), [short_encoder(x) for x in labels]))
    legend_below(fig, groups, ncol=len(POOLINGS))
    return fig


def plot_layers(path: Path, name: str, task: dict[str, Any], labels: list[str]) -> None:
    """:func:`layers_figure` as a deterministic PNG."""
    save_png(layers_figure(name, task, labels), path)


def best_line(table: dict[str, dict[str, float]], select: dict[str, dict[str, float]], task: dict[str, Any]) -> str:
    """The sentence under a table: the cell chosen on the selection split and its headline score, and where the
    two splits differ, the headline split's own best as a labelled oracle (never the reported result)."""
    split, headline = selection_split(task), task["headline"]
    row, p = choose(select)
    if not held_out(task):
        where = "cross-validation" if headline == "cv" else headline
        return (f"Best on {where}: hidden state {row}, {p} pooling: {pct(table[row][p])} (chosen and scored on the "
                f"same {where} scores: no held-out labelled split, so an optimistic figure).")
    line = (f"Chosen on {split}: hidden state {row}, {p} pooling ({split} {pct(select[row][p])}): "
            f"{headline} {pct(table[row][p])}.")
    o_row, o_p = choose(table)
    if (o_row, o_p) != (row, p):
        line += (f" Oracle (the {headline} maximum, chosen on {headline}; not a result): hidden state {o_row}, "
                 f"{o_p} pooling: {pct(table[o_row][o_p])}.")
    return line


def task_report(name: str, task: dict[str, Any], labels: list[str], folds: int, out: Path) -> str:
    """Write the task's tables and figure under ``out/<task>/``; return its Markdown section."""
    folder = out / slug(name)
    parts = [f"## {name}", "", _describe(task, folds), "", *[f"Note: {n}" for n in task.get("notes", [])],
             *([""] if task.get("notes") else [])]
    tables = {label: grid(task["results"][label], task["headline"]) for label in labels}
    split = selection_split(task)
    for label in labels:
        select = grid(task["results"][label], split)
        header, md, rows = score_table(tables[label], select)
        write_text(folder / f"table-{slug(label)}.csv", csv_table([[*header, "best"], *rows]))
        parts += [f"### {label}", "", *markdown_table(header, md, align="lr"), "",
                  best_line(tables[label], select, task), ""]
    for label in labels[1:]:
        diff = difference(tables[labels[0]], tables[label])
        header = ["hidden state", *POOLINGS]
        write_text(folder / f"difference-{slug(label)}.csv", csv_table([header, *diff]))
        parts += [f"### {label} minus {labels[0]} (points)", "", *markdown_table(header, diff, align="lr"), ""]
    plot_layers(folder / "layers.png", name, task, labels)
    parts += [f"![{name}: score by layer]({slug(name)}/layers.png)", ""]
    text = "\n".join(parts)
    write_text(folder / "table.md", text)
    return text


def averages_section(results: dict[str, Any], labels: list[str], out: Path) -> str:
    """The pooling averages over layers 1..l, per task and encoder, and their mean over tasks."""
    header, rows = ["task", "encoder", *POOLINGS], []
    per_label: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    for name, task, label, record in task_records(results, labels):
        avg = pooling_averages(record, task["headline"])
        per_label[label].append(avg)
        rows.append([name, label, *[pct(avg[p]) for p in POOLINGS]])
    if len(results["tasks"]) > 1:
        for label, avgs in per_label.items():
            if avgs:  # an encoder probed on fewer tasks than the grid says over how many it averages
                name = "mean" if len(avgs) == len(results["tasks"]) else f"mean of {len(avgs)} tasks"
                rows.append([name, label, *[pct(sum(a[p] for a in avgs) / len(avgs)) for p in POOLINGS]])
    write_text(out / "poolings.csv", csv_table([header, *rows]))
    text = "\n".join(["## Pooling averages over layers 1..l (the study's Table 1)", "",
                      *markdown_table(header, rows, align="lr"), ""])
    write_text(out / "poolings.md", text)
    return text


def _cell_text(table: dict[str, dict[str, float]], cell: tuple[str, str], name_row: bool = True) -> str:
    """``"32.34 (4, mean)"``: ``cell``'s score in ``table`` and where it is."""
    row, pooling = cell
    where = f"{row.replace('(', '').replace(')', '')}, {pooling}" if name_row else pooling
    return f"{pct(table[row][pooling])} ({where})"


def state_curve(task: dict[str, Any], record: dict[str, Any]) -> list[tuple[float, str]]:
    """Per single hidden state (0 = embeddings, in order): its headline score under the pooling chosen for it on
    the selection split, and that pooling."""
    table, select = grid(record, task["headline"]), grid(record, selection_split(task))
    out = []
    for row in (r for r in table if r.isdigit()):
        _, pooling = choose(select, [row])
        out.append((table[row][pooling], pooling))
    return out


def which_layer_section(results: dict[str, Any], labels: list[str], out: Path) -> str:
    """Which layer to use: per task and encoder, the last layer (its pooling), the best single hidden state and
    the best concatenation, each chosen on the selection split (dev where the task has a test split) and scored on
    the headline split; beside them, where the two differ, the single state that test alone would pick (an
    oracle, labelled as such)."""
    header = ["task", "encoder", "chosen on", "scored on", "last layer", "best single state", "best concatenation",
              "test-best single state (oracle)"]
    rows = []
    for name, task, label, record in task_records(results, labels):
        table, select = grid(record, task["headline"]), grid(record, selection_split(task))
        states = [row for row in table if row.isdigit()]
        concatenations = [row for row in table if not row.isdigit()]
        chosen = choose(select, states)
        oracle = choose(table, states)
        rows.append([name, label, selection_split(task), task["headline"],
                     _cell_text(table, choose(select, states[-1:]), name_row=False), _cell_text(table, chosen),
                     _cell_text(table, choose(select, concatenations)) if concatenations else "-",
                     _cell_text(table, oracle) if held_out(task) and oracle != chosen else "-"])
    write_text(out / "which_layer.csv", csv_table([header, *rows]))
    text = "\n".join(["## Which layer? The last layer against the best single state and concatenation", "",
                      "Scores x 100 on each task's headline split (\"scored on\"), with the hidden state (0 = "
                      "embeddings) and pooling that gave them. Every cell is chosen on the split named under "
                      "\"chosen on\": dev where the task has a labelled test split, so the test score is held out. "
                      "Where a task has no labelled test (cross-validation, or GLUE's dev), the cell is chosen and "
                      "scored on the same split: an optimistic figure. The last column is the single state that the "
                      "test scores themselves would pick, an oracle shown only where it differs from the dev "
                      "choice; it is not a result.", "", *markdown_table(header, rows, align="lr"), ""])
    write_text(out / "which_layer.md", text)
    return text


def timing_section(results: dict[str, Any], labels: list[str]) -> str:
    header = ["task", "encoder", "sentences", "features", "encode s", "fit s", "feature sets"]
    rows, encode, fit = [], 0.0, 0.0
    for name, _, label, r in task_records(results, labels):
        encode, fit = encode + r["seconds"]["encode"], fit + r["seconds"]["fit"]
        cached = "cached" if all(r["cached"].values()) else "encoded"
        rows.append([name, label, str(r["sentences"]), cached, f"{r['seconds']['encode']:.1f}",
                     f"{r['seconds']['fit']:.1f}", str(len({(x['row'], x['pooling']) for x in r['rows']}))])
    total = (f"In all {(encode + fit) / 60:.1f} min: {encode / 60:.1f} encoding, {fit / 60:.1f} fitting "
             "(encoding only where no features were cached).")
    m = results["machine"]
    where = (f"{m['device']}, {m['cpu_count']} CPUs ({m['processor']}), {m['torch_threads']} torch threads, "
             f"{m.get('fit_threads', 1)} BLAS thread(s) fitting, "
             f"precision {m['precision']}, features stored as {m['cache_dtype']}; torch {m['torch']}, "
             f"scikit-learn {m['sklearn']}")
    return "\n".join(["## Time", "", where, "", *markdown_table(header, rows, align="lr"), "", total, ""])


def write_probe_report(results: dict[str, Any], out: str | Path) -> str:
    """Every table and figure of ``results`` under ``out``; returns the Markdown report (also report.md)."""
    out = Path(out)
    labels = [e["label"] for e in results["encoders"]]
    folds = results["config"]["probe"]["folds"]
    sections = ["# Layer-wise probe", "", *encoder_lines(results), ""]
    sections += [task_report(name, task, [x for x in labels if x in task["results"]], folds, out)
                 for name, task in results["tasks"].items()]
    sections += [which_layer_section(results, labels, out), averages_section(results, labels, out),
                 timing_section(results, labels)]
    text = "\n".join(sections)
    write_text(out / "report.md", text)
    return text
