"""Figures drawn from records: the paper's Figure 2, and the spread of seeds behind each table.

Figure 2 (paper §5): left, the importance scores (layer weights) averaged over each task's dev set, one
row per task in the paper's order; right, the scores of individual dev examples of one task. As in the
paper, each task's row comes from its best single model (``figure2.select: best``; or the median seed).
The numbers behind each figure are written as CSV beside it. Figures are drawn with matplotlib's object
API (no pyplot state; Agg), and PNGs carry no time stamp or software version
(``metadata={"Software": None}``), so the same records give the same bytes.
"""

from __future__ import annotations

import csv
import io
import textwrap
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from hire.experiments.aggregate import task_score
from hire.experiments.experiment import Experiment
from hire.experiments.layout import default_label
from hire.experiments.records import Records, read_examples
from hire.experiments.spec import format_value
from hire.figures import DPI, FIGURE_WIDTH, legend_below

VALUE_ONLY = ("ranker", "rank_loss")  # settings whose value names itself: ``hire (cross, pointwise)``


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG (Agg) at the site's column width (:mod:`hire.figures`), its legends inside the picture,
    with no software version or time stamp in it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.08, metadata={"Software": None})
    return buffer.getvalue()


def figure_label(row: dict[str, Any]) -> str:
    """A row's name in a figure: a label the experiment file gives, as it is; a label made from the options
    (``hire ranker=cross rank_loss=pointwise``) as the ``--model.head`` name with the row's settings in
    parentheses (``hire (cross, pointwise)``, ``last-layer (lr 5e-05)``)."""
    options = row.get("options") or {}
    if "model.head" not in options or row["label"] != default_label(options):
        return row["label"]
    settings = [f"{k.replace('_', ' ')} {format_value(v)}"
                for k, v in sorted((options.get("model.head_options") or {}).items())]
    for key, value in options.items():
        if key not in ("model.head", "model.head_options"):
            name = key.rpartition(".")[2]
            settings.append(format_value(value) if name in VALUE_ONLY else f"{name.replace('_', ' ')} "
                            f"{format_value(value)}")
    return f"{options['model.head']} ({', '.join(settings)})" if settings else str(options["model.head"])


def _choose(exp: Experiment, ids: tuple[str, ...], records: Records, select: str) -> str | None:
    """The best seed's cell (ties: the lowest seed), or the median seed's (lower middle for even n)."""
    done = sorted((c for c in ids if c in records.by_cell), key=lambda c: exp.cell(c).seed)
    if not done:
        return None
    ranked = sorted(done, key=lambda c: -task_score(records.by_cell[c]))  # stable: lowest seed first on ties
    return ranked[0] if select == "best" else ranked[len(ranked) // 2]


def figure2_data(exp: Experiment, records: Records, exp_dir: Path) -> dict[str, Any] | None:
    """The mean layer weights per task and the per-example ones, from the chosen cells' records."""
    f = exp.figure2
    if f is None:
        return None
    tasks = []
    for task in f.tasks:
        cid = _choose(exp, f.cells[task], records, f.select)
        weights = records.by_cell[cid].get("layer_weights") if cid else None
        if cid and weights:
            split = next(iter(weights))
            tasks.append({"task": task, "cell": cid, "seed": exp.cell(cid).seed, "split": split,
                          "score": task_score(records.by_cell[cid]), "weights": weights[split]["mean"]})
    if not tasks:
        return None
    width = len(tasks[0]["weights"])
    tasks = [t for t in tasks if len(t["weights"]) == width]  # one encoder depth per figure
    chosen = next((t["cell"] for t in tasks if t["task"] == f.examples_task), None)
    examples = read_examples(exp_dir, chosen) if chosen else None
    examples = examples if examples and len(examples["weights"][0]) == width else None
    return {"label": f.label, "select": f.select, "tasks": tasks, "examples_task": f.examples_task,
            "examples": examples, "examples_cell": chosen if examples else None,
            "examples_counts": examples_counts(examples["weights"]) if examples else None}


UNIFORM_TOLERANCE = 0.001


def examples_counts(weights: list[list[float]]) -> dict[str, int]:
    """What the right panel of Figure 2 shows, counted: of the examples, how many give every hidden state the
    same weight (each within ``UNIFORM_TOLERANCE`` of 1/n: the head does not choose between the states for
    them) and how many give the last hidden state more than half of it."""
    uniform = sum(max(abs(w - 1 / len(row)) for w in row) < UNIFORM_TOLERANCE for row in weights)
    return {"examples": len(weights), "uniform": uniform, "last_over_half": sum(row[-1] > 0.5 for row in weights)}


def examples_counts_text(data: dict[str, Any]) -> str:
    """The counts of ``examples_counts`` as a sentence (for report.md and the figure's caption in the HTML)."""
    c = data["examples_counts"]
    return (f"Figure 2, right ({data['examples_cell']}): of the first {c['examples']} {data['examples_task']} dev "
            f"examples, {c['uniform']} give every hidden state the same weight (each within {UNIFORM_TOLERANCE} of "
            f"1/{len(data['tasks'][0]['weights'])}) and {c['last_over_half']} give the last one more than half.")


def figure2_csvs(data: dict[str, Any]) -> tuple[str, str | None]:
    """The numbers behind Figure 2: per task (left) and per example (right)."""
    width = len(data["tasks"][0]["weights"])
    states = [f"h{i}" for i in range(width)]
    left = io.StringIO()
    w = csv.writer(left, lineterminator="\n")
    w.writerow(["task", "cell", "seed", "split", "score", *states])
    for t in data["tasks"]:
        w.writerow([t["task"], t["cell"], t["seed"], t["split"], f"{t['score']:.4f}",
                    *(f"{x:.6f}" for x in t["weights"])])
    if not data["examples"]:
        return left.getvalue(), None
    right = io.StringIO()
    w = csv.writer(right, lineterminator="\n")
    w.writerow(["example", "guid", "label", *states])
    ex = data["examples"]
    for i, (guid, label, weights) in enumerate(zip(ex["guids"], ex["labels"], ex["weights"], strict=True)):
        w.writerow([i, guid, label, *(f"{x:.6f}" for x in weights)])
    return left.getvalue(), right.getvalue()


def _heatmap(fig: Figure, ax: Any, matrix: list[list[float]], annotate: bool) -> None:
    """A heatmap scaled to its own range (layer weights are often close to uniform), values printed."""
    image = ax.imshow(matrix, cmap="Blues", aspect="auto", interpolation="nearest")
    width = len(matrix[0])
    ax.set_xticks(range(width), [str(i) for i in range(width)])
    ax.set_xlabel("hidden state (0 = embeddings)")
    if annotate:
        low, high = min(map(min, matrix)), max(map(max, matrix))
        for i, r in enumerate(matrix):
            for j, v in enumerate(r):
                dark = high > low and (v - low) / (high - low) > 0.6
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white" if dark else "black")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)


def figure2_png(data: dict[str, Any]) -> bytes:
    """The mean importance scores per task above, and (where recorded) the first dev examples' below: one column
    wide, so that the printed values stay legible on the site."""
    tasks, examples = data["tasks"], data["examples"]
    top = 1.1 + 0.42 * len(tasks)
    heights = [top, 3.4] if examples else [top]
    fig = Figure(figsize=(FIGURE_WIDTH, sum(heights) + 0.3), layout="constrained")
    axes = fig.subplots(len(heights), 1, squeeze=False, height_ratios=heights)
    left = axes[0][0]
    _heatmap(fig, left, [t["weights"] for t in tasks], annotate=len(tasks[0]["weights"]) <= 13)
    left.set_yticks(range(len(tasks)), [t["task"] for t in tasks])
    left.set_title(f"{data['label']}: mean importance score per task ({data['select']} seed)", fontsize=10)
    if examples:
        right = axes[1][0]
        _heatmap(fig, right, examples["weights"], annotate=False)
        right.set_ylabel("dev example")
        right.set_title(f"{data['examples_task']}: first {len(examples['weights'])} dev examples", fontsize=10)
    return png_bytes(fig)


def seeds_png(data: dict[str, Any]) -> bytes | None:
    """One panel per task: each row (a head, or a head with its settings) on the y axis, its seeds' dev scores as
    dots and their median as a bar; the row names written once, at the left of each line of panels."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    tasks, rows = data["tasks"], data["rows"]
    if not any(r["tasks"][t]["n"] for r in rows for t in tasks):
        return None
    ncols = min(4, len(tasks))
    nrows = -(-len(tasks) // ncols)
    names = [textwrap.fill(figure_label(r), width=34) for r in rows]
    lines = sum(name.count("\n") + 1 for name in names)
    fig = Figure(figsize=(FIGURE_WIDTH, nrows * (0.8 + 0.2 * lines + 0.06 * len(rows)) + 0.9),
                 layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for index, task in enumerate(tasks):
        ax = axes[index // ncols][index % ncols]
        for y, row in enumerate(rows):
            cell = row["tasks"][task]
            values = list(cell["scores"].values())
            offsets = [(k - (len(values) - 1) / 2) * 0.08 for k in range(len(values))]
            ax.scatter(values, [y + o for o in offsets], s=16, color="tab:blue", zorder=3)
            if cell["median"] is not None:
                ax.vlines(cell["median"], y - 0.32, y + 0.32, color="tab:red", linewidth=2, zorder=2)
        ax.set_yticks(range(len(rows)), names, fontsize=9)
        ax.set_ylim(len(rows) - 0.5, -0.5)  # the table's first row on top
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.tick_params(axis="x", labelsize=9)
        if len(tasks) > 1:  # one task: the figure's title names it
            ax.set_title(task, fontsize=10)
        if not any(row["tasks"][task]["n"] for row in rows):  # an empty panel says so, with no made-up x scale
            ax.set_xticks([])
            ax.text(0.5, 0.5, "no runs yet", transform=ax.transAxes, ha="center", va="center", color="gray")
        ax.grid(axis="x", alpha=0.3)
        if index // ncols == nrows - 1 or index + ncols >= len(tasks):
            ax.set_xlabel("dev score x100", fontsize=9)
    for index in range(len(tasks), nrows * ncols):
        axes[index // ncols][index % ncols].axis("off")
    fig.suptitle(textwrap.fill(data["title"], width=90), fontsize=11)
    legend_below(fig, [([Line2D([], [], linestyle="none", marker="o", color="tab:blue", markersize=5),
                         Line2D([], [], linestyle="none", marker="|", color="tab:red", markersize=12,
                                markeredgewidth=2)], ["one seed", "median of the seeds"])], ncol=2)
    return png_bytes(fig)
