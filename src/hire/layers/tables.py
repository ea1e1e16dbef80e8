"""The reconstruction table and plot, drawn from ``results.json`` alone (the same file gives the same bytes).

``reconstruction.md`` / ``.csv``: one row per hidden state ``H_0 .. H_L`` (``L``: the deepest encoder), one
column per encoder, top-1 accuracy x 100; an encoder with fewer layers leaves its lower rows empty. For a
deepened encoder a ``*`` marks the output of a duplicated layer (a source layer that already ran), and the
CSV says which source layer made each state. ``reconstruction.png``: accuracy against relative depth
``j / l`` (or the layer index ``j``), one line per encoder, duplicated layers' outputs ringed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hire.figures import MARKERS, legend_below, new_axes, pct, save_png
from hire.reporting import csv_table, markdown_table

RESULTS, TABLE, PLOT = "results.json", "reconstruction", "reconstruction.png"
FORMAT = "hire-reconstruct/1"  # results.json's format


def duplicated_states(record: dict[str, Any]) -> list[bool]:
    """For each hidden state ``H_0 .. H_l``: whether a duplicated layer produced it."""
    deepen = record.get("deepen")
    flags = [False] * (record["num_layers"] + 1)
    if deepen:
        for position, again in enumerate(deepen["duplicate"]):
            flags[position + 1] = again
    return flags


def source_layers(record: dict[str, Any]) -> list[str]:
    """For each hidden state: ``embeddings``, or the (original) source layer of the layer that made it."""
    plan = record["deepen"]["plan"] if record.get("deepen") else list(range(record["num_layers"]))
    return ["embeddings", *[str(s) for s in plan]]


def _table(results: dict[str, Any]) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """Header, Markdown rows (``*`` on duplicated layers' outputs) and CSV rows (with source layers)."""
    encoders = results["encoders"]
    depth = max(e["num_layers"] for e in encoders)
    deepened = [e for e in encoders if e.get("deepen")]
    header = ["hidden state", *[e["label"] for e in encoders]]
    md, rows = [], []
    for j in range(depth + 1):
        name = "H_0 (embeddings)" if j == 0 else f"H_{j}"
        cells, marked = [], []
        for e in encoders:
            if j > e["num_layers"]:
                cells.append("")
                marked.append("")
                continue
            cells.append(pct(e["accuracy"][j]))
            marked.append(cells[-1] + ("*" if duplicated_states(e)[j] else ""))
        md.append([name, *marked])
        rows.append([str(j), *cells, *[source_layers(e)[j] if j <= e["num_layers"] else "" for e in deepened]])
    csv_header = ["hidden_state", *[e["label"] for e in encoders], *[f"{e['label']} source layer" for e in deepened]]
    return header, md, [csv_header, *rows]


def describe(results: dict[str, Any]) -> list[str]:
    """The data and, per encoder, its decoder and how it was made (for deepened ones)."""
    data = results["data"]
    lines = [f"Top-1 accuracy x 100 of recovering the (unmasked) input tokens from each hidden state, on "
             f"{data['examples']} examples of {data['name']} ({data['max_length']} tokens at most; padding "
             "and special tokens ([CLS], [SEP], [UNK] ...) left out).", ""]
    for e in results["encoders"]:
        made = f"; deepened: {e['deepen']['description']}" if e.get("deepen") else ""
        lines.append(f"- {e['label']}: {e['encoder']} ({e['model_type']}, {e['num_layers']} layers, "
                     f"{e['tokens']} tokens); decoder `{e['decoder']}` ({e['decoder_note']}){made}")
    if any(e.get("deepen") for e in results["encoders"]):
        lines += ["", "`*`: the output of a duplicated layer (a source layer that already ran below it)."]
    return lines


def plot(results: dict[str, Any], path: Path) -> None:
    """Accuracy against depth, one line per encoder; duplicated layers' outputs ringed (deterministic PNG)."""
    from matplotlib.lines import Line2D

    relative = results["x_axis"] == "relative"
    fig, ax = new_axes()
    ringed = False
    for i, e in enumerate(results["encoders"]):
        layers = e["num_layers"]
        xs = [j / layers if relative else j for j in range(layers + 1)]
        ys = [100 * a for a in e["accuracy"]]
        (line,) = ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], markersize=4, color=f"C{i % 10}",
                          label=f"{e['label']} ({e['decoder']})")
        dup = [j for j, d in enumerate(duplicated_states(e)) if d]
        if dup:
            ax.scatter([xs[j] for j in dup], [ys[j] for j in dup], s=70, facecolors="none",
                       edgecolors=line.get_color(), linewidths=1.2,
                       label=None if ringed else "output of a duplicated layer")
            ringed = True
    ax.set_xlabel("relative depth j / l (0 = embeddings, 1 = last layer)" if relative
                  else "hidden state j (0 = embeddings)")
    if not relative:
        ax.set_xticks(range(max(e["num_layers"] for e in results["encoders"]) + 1))
    ax.set_ylabel("input tokens recovered, top-1 %")
    ax.set_ylim(-2, 102)
    ax.set_title(f"Reconstruction of the input from each hidden state: {results['data']['name']}", fontsize=10)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    rings = [k for k, text in enumerate(labels) if text == "output of a duplicated layer"]
    lines = [k for k in range(len(labels)) if k not in rings]
    groups = [([handles[k] for k in lines], [labels[k] for k in lines])]
    if rings:  # the ring's entry last, in grey: it marks points of every colour
        groups.append(([Line2D([], [], linestyle="none", marker="o", markersize=9, markerfacecolor="none",
                               markeredgecolor="0.3")], ["output of a duplicated layer"]))
    legend_below(fig, groups, ncol=2)
    save_png(fig, path)


def write_reconstruct_report(results: dict[str, Any], out: str | Path) -> str:
    """``reconstruction.md``, ``.csv`` and ``.png`` under ``out``; returns the Markdown."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    header, md, csv_rows = _table(results)
    text = "\n".join(["# Input reconstruction per hidden state", "", *describe(results), "",
                      *markdown_table(header, md, align="lr"), "", f"![reconstruction per hidden state]({PLOT})", ""])
    (out / f"{TABLE}.md").write_text(text)
    (out / f"{TABLE}.csv").write_text(csv_table(csv_rows))
    plot(results, out / PLOT)
    return text


def load_results(out: str | Path) -> dict[str, Any]:
    """The results in ``out`` as ``hire reconstruct`` writes them; ValueError naming the file and what is wrong
    (and what writes it afresh) for a missing file or one that is not such results."""
    path = Path(out) / RESULTS
    again = "run the `hire reconstruct` command that made it again to write it afresh"
    from hire.reporting import read_json

    try:
        results, problem = read_json(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file; run `hire reconstruct` first") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: a folder, not a results file") from None
    if problem is not None:
        raise ValueError(f"{path}: {problem}; {again}")
    if not isinstance(results, dict):
        raise ValueError(f"{path}: a JSON {type(results).__name__}, not `hire reconstruct` results; {again}")
    if results.get("format") != FORMAT or not isinstance(results.get("encoders"), list) or not all(
            isinstance(e, dict) for e in results["encoders"]) or not isinstance(results.get("data"), dict):
        raise ValueError(f"{path}: not `hire reconstruct` results (format {results.get('format')!r}, or no "
                         f"data and encoders); {again}")
    return results
