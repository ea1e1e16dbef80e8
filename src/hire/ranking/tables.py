"""Tables and figures of ``hire rank-probe``, drawn from ``results.json`` alone (the same bytes when redrawn).

In the study's layout: for each encoder and each (scorer, loss) block, a table with the feature sets as rows
(each hidden state, then first + last, the last four, all) and the poolings as columns, MAP x 100 on the headline
split (test where there is one, else dev), the table's best cell in bold and the cell chosen by dev MAP (whose run
file is written) marked with a dagger; a summary of every block's chosen cell beside BM25; each pooling's mean over
the Transformer layers; and a MAP-by-layer plot per pooling (one line per block, BM25 dashed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hire.figures import MARKERS, legend_below, new_axes, pct, save_png, slug, write_text
from hire.lab.pooling import POOLINGS
from hire.lab.results import ResultsFormat
from hire.probing.tables import encoder_lines, layer_means
from hire.reporting import csv_table, markdown_table

FORMAT = "hire-rank-probe/1"
GROWS = ("encoders", "labels", "scorers", "losses")
MEASURES = ("map", "mrr", "p@1")


RANK_RESULTS = ResultsFormat(
    "rank-probe", FORMAT, {"config": dict, "encoders": list, "data": dict, "results": dict, "machine": dict},
    lambda results: all(k in results["config"] for k in GROWS)
    and all(isinstance(r, dict) and isinstance(r.get("blocks"), dict) for r in results["results"].values()),
    "config or results")
load_results = RANK_RESULTS.load
read_results = RANK_RESULTS.read


def headline(results: dict[str, Any]) -> str:
    """The split the tables show: test where the data has one, else dev."""
    return "test" if "test" in results["data"].get("questions", {}) else "dev"


def block_name(block: dict[str, Any]) -> str:
    return block["scorer"] if block["loss"] == "none" else f"{block['scorer']}, {block['loss']} loss"


def grid(block: dict[str, Any], split: str, measure: str = "map") -> dict[str, dict[str, float]]:
    """``{row: {pooling: value}}`` of a block on ``split``, in table order."""
    table: dict[str, dict[str, float]] = {}
    for cell in block["rows"]:
        table.setdefault(cell["row"], {})[cell["pooling"]] = cell[split][measure]
    return table


def block_table(block: dict[str, Any], split: str) -> tuple[list[str], list[list[str]]]:
    """Header and Markdown rows: the table's best value in bold, the cell chosen by dev MAP with a dagger."""
    table = grid(block, split)
    top = max(v for cells in table.values() for v in cells.values())
    chosen = (block["best"]["row"], block["best"]["pooling"])
    tied = {(c["row"], c["pooling"]) for c in block["rows"] if split in c.get("all_tied", ())}
    rows = []
    for row, cells in table.items():
        values = []
        for p in POOLINGS:
            text = pct(cells[p]) + (f" {ALL_TIED}" if (row, p) in tied else "")
            text = f"**{text}**" if cells[p] == top else text
            values.append(f"{text} †" if (row, p) == chosen else text)
        rows.append([row, *values])
    return ["feature set", *POOLINGS], rows


ALL_TIED = "(all tied)"  # a cell whose scorer gave every candidate of every question one score
ALL_TIED_NOTE = (f"{ALL_TIED}: the scorer gave every candidate of each question the same score, so the ranking is "
                 "the tie rule's (passage-id order) and its score says nothing of the feature set.")


def tied_text(cell: dict[str, Any], split: str, text: str) -> str:
    """A cell's value on ``split``, marked where its scores were all tied there."""
    return f"{text} {ALL_TIED}" if split in cell.get("all_tied", ()) else text


def chosen_cell(block: dict[str, Any]) -> dict[str, Any]:
    """The block's cell chosen by dev MAP (the one whose run files are written)."""
    return next(c for c in block["rows"] if (c["row"], c["pooling"]) == (block["best"]["row"],
                                                                         block["best"]["pooling"]))


def summary_section(results: dict[str, Any]) -> str:
    """Every block's cell chosen by dev MAP, beside BM25: dev MAP and the headline split's MAP, MRR, P@1."""
    split = headline(results)
    header = ["system", "feature set", "pooling", "dev MAP", *[f"{split} {m.upper()}" for m in MEASURES], "fit s"]
    rows = []
    bm25 = results.get("bm25") or {}
    if "dev" in bm25:
        s = bm25["settings"]
        rows.append([f"BM25 (k1 {s['k1']}, b {s['b']}, {s['method']})", "", "", pct(bm25["dev"]["map"]),
                     *[pct(bm25[split][m]) for m in MEASURES], ""])
    for label, record in results["results"].items():
        for block in record["blocks"].values():
            cell = chosen_cell(block)
            rows.append([f"{label}: {block_name(block)}", cell["row"], cell["pooling"],
                         tied_text(cell, "dev", pct(cell["dev"]["map"])),
                         *[tied_text(cell, split, pct(cell[split][m])) for m in MEASURES], f"{block['seconds']:.1f}"])
    best = results.get("best")
    lines = ["## Summary: each block's cell chosen by dev MAP", "", *markdown_table(header, rows, align="lllr"), ""]
    if any(ALL_TIED in cell for row in rows for cell in row):
        lines += [ALL_TIED_NOTE, ""]
    if best:
        lines += [f"Best by dev MAP: {best['label']}, {best['scorer']} ({best['loss']}), feature set {best['row']}, "
                  f"{best['pooling']} pooling: {split} MAP {pct(best[split]['map'])}; run files "
                  f"{', '.join(best['runs'].values())} (qrels in qrels/).", ""]
    return "\n".join(lines)


def pooling_averages(record: dict[str, Any], split: str) -> tuple[list[str], list[list[str]]]:
    """Each block's mean MAP per pooling over the Transformer layers 1..l (the study's pooling comparison)."""
    rows = [[block_name(block), *map(pct, layer_means(grid(block, split), record["num_hidden_states"]).values())]
            for block in record["blocks"].values()]
    return ["block", *POOLINGS], rows


def plot_pooling(path: Path, label: str, record: dict[str, Any], pooling: str, split: str,
                 bm25: float | None) -> None:
    """MAP against the hidden state for one pooling, one line per block, BM25 dashed (deterministic PNG)."""
    fig, ax = new_axes()
    layers = list(range(record["num_hidden_states"]))
    for b, block in enumerate(record["blocks"].values()):
        table = grid(block, split)
        ax.plot(layers, [100 * table[str(j)][pooling] for j in layers], marker=MARKERS[b % len(MARKERS)],
                markersize=4, linewidth=1.4, label=block_name(block))
    finish_map_axes(fig, ax, path, bm25, layers, split, f"{label}: {split} MAP by hidden state, {pooling} pooling")


def finish_map_axes(fig: Any, ax: Any, path: Path, bm25: float | None, layers: list[int], split: str,
                    title: str, ncol: int = 3) -> None:
    """BM25 dashed, the axes named, the legend, and the PNG written: the end of every MAP-by-layer figure."""
    if bm25 is not None:
        ax.axhline(100 * bm25, color="black", linestyle="--", linewidth=1, label="BM25")
    ax.set_xticks(layers)
    ax.set_xlabel("hidden state (0 = embeddings)")
    ax.set_ylabel(f"{split} MAP x 100")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    legend_below(fig, [(handles, labels)], ncol=ncol)
    save_png(fig, path)


def compared_blocks(results: dict[str, Any]) -> list[str]:
    """The blocks the encoders are compared on: cosine (nothing trained) and the block of the overall best cell by
    dev MAP, where every encoder has them."""
    keys = ["cosine/none"]
    best = results.get("best")
    if best:
        keys.append(f"{best['scorer']}/{best['loss']}")
    records = [r for r in results["results"].values() if r["blocks"]]
    return [k for k in dict.fromkeys(keys) if all(k in r["blocks"] for r in records)]


def plot_encoders(path: Path, results: dict[str, Any], pooling: str, split: str) -> None:
    """MAP against the hidden state for one pooling, one colour per encoder (a pre-trained encoder against a
    fine-tuned one), one line style per compared block, BM25 dashed (deterministic PNG)."""
    fig, ax = new_axes()
    styles, records = ("-", ":", "-."), {k: r for k, r in results["results"].items() if r["blocks"]}
    for c, (label, record) in enumerate(records.items()):
        for key, style in zip(compared_blocks(results), styles, strict=False):
            table, states = grid(record["blocks"][key], split), range(record["num_hidden_states"])
            ax.plot(states, [100 * table[str(j)][pooling] for j in states], marker=MARKERS[c % len(MARKERS)],
                    markersize=4, linewidth=1.4, color=f"C{c}", linestyle=style,
                    label=f"{label}: {block_name(record['blocks'][key])}")
    layers = list(range(max(r["num_hidden_states"] for r in records.values())))
    finish_map_axes(fig, ax, path, (results.get("bm25") or {}).get(split, {}).get("map"), layers, split,
                    f"Encoders compared: {split} MAP by hidden state, {pooling} pooling",
                    ncol=len(compared_blocks(results)))


def encoders_section(results: dict[str, Any], out: Path) -> str:
    """With two encoders or more (a pre-trained one and a fine-tuned one): their MAP-by-layer lines in one figure
    per pooling; empty with one encoder."""
    if sum(bool(r["blocks"]) for r in results["results"].values()) < 2 or not compared_blocks(results):
        return ""
    split = headline(results)
    names = " and ".join(block_name(next(r for r in results["results"].values() if r["blocks"])["blocks"][k])
                         for k in compared_blocks(results))
    parts = ["## Encoders compared", "", f"{split} MAP by hidden state of every encoder, for {names}.", ""]
    for pooling in POOLINGS:
        name = f"figures/encoders-{pooling}.png"
        plot_encoders(out / name, results, pooling, split)
        parts.append(f"![Encoders compared: MAP by layer, {pooling} pooling]({name})")
    return "\n".join([*parts, ""])


def encoder_section(label: str, record: dict[str, Any], results: dict[str, Any], out: Path) -> str:
    """One encoder's tables (Markdown here, every cell's dev and test metrics in ``tables/<encoder>.csv``), its
    pooling averages and its MAP-by-layer figures."""
    split = headline(results)
    parts = [f"## {label}", "", f"MAP x 100 on {split}; rows: feature sets (hidden states, 0 = embeddings, and "
             "concatenations); columns: poolings. Bold: the table's best; †: chosen by dev MAP.", ""]
    csv = [["block", "scorer", "loss", "feature set", "layers", "pooling", "best epoch",
            *[f"{s} {m}" for s in ("dev", "test") if s in results["data"]["questions"] for m in MEASURES]]]
    for block in record["blocks"].values():
        header, rows = block_table(block, split)
        parts += [f"### {block_name(block)}", "", *markdown_table(header, rows, align="lr"), ""]
        if any(split in c.get("all_tied", ()) for c in block["rows"]):
            parts += [ALL_TIED_NOTE, ""]
        for c in block["rows"]:
            csv.append([block_name(block), block["scorer"], block["loss"], c["row"],
                        "+".join(map(str, c["layers"])), c["pooling"], str(c.get("best_epoch", "")),
                        *[f"{c[s][m]:.6f}" for s in ("dev", "test") if s in c for m in MEASURES]])
    write_text(out / "tables" / f"{slug(label)}.csv", csv_table(csv))
    header, rows = pooling_averages(record, split)
    parts += ["### Pooling averages over layers 1..l", "", *markdown_table(header, rows, align="lr"), ""]
    bm25 = (results.get("bm25") or {}).get(split, {}).get("map")
    for pooling in POOLINGS:
        name = f"figures/{slug(label)}-{pooling}.png"
        plot_pooling(out / name, label, record, pooling, split, bm25)
        parts.append(f"![{label}: MAP by layer, {pooling} pooling]({name})")
    return "\n".join([*parts, ""])


def cut_lines(results: dict[str, Any]) -> list[str]:
    """One sentence on the texts longer than ``--max_length`` tokens, whose features read only their first tokens,
    by encoder (nothing for a results file written before they were counted)."""
    limit, said = results["config"]["max_length"], []
    for label, record in results["results"].items():
        cut = record.get("encode", {}).get("cut")
        if cut is not None:
            parts = [f"{n} of {total} {split} {side}" for split, sides in cut.items()
                     for side, (n, total) in sides.items() if n]
            said.append(f"{label}: {', '.join(parts) if parts else 'none'}")
    if not said:
        return []
    return [f"Texts longer than --max_length {limit} tokens, cut short (their features read the first {limit} "
            f"tokens): {'; '.join(said)}.", ""]


def timing_section(results: dict[str, Any]) -> str:
    header, rows = ["encoder", "texts encoded", "encode s", "block", "fit s"], []
    encode = fit = 0.0
    for label, record in results["results"].items():
        enc = record.get("encode", {})
        cached = "cached" if enc and all(enc["cached"].values()) else f"{enc.get('seconds', 0.0):.1f}"
        encode += enc.get("seconds", 0.0)
        for i, block in enumerate(record["blocks"].values()):
            fit += block["seconds"]
            rows.append([label if i == 0 else "", str(enc.get("texts", "")) if i == 0 else "",
                         cached if i == 0 else "", block_name(block), f"{block['seconds']:.1f}"])
    m = results["machine"]
    where = (f"{m.get('device', 'cpu')}; {m.get('cpu_count')} CPUs ({m.get('cpu')}), {m.get('torch_threads')} torch "
             f"threads; torch {m.get('torch')}")
    total = f"In all {(encode + fit) / 60:.1f} min: {encode / 60:.1f} encoding, {fit / 60:.1f} fitting."
    return "\n".join(["## Time", "", where, "", *markdown_table(header, rows, align="llrlr"), "", total, ""])


def write_rank_report(results: dict[str, Any], out: str | Path) -> str:
    """Every table and figure of ``results`` under ``out``; returns the Markdown report (also ``report.md``)."""
    out = Path(out)
    data = results["data"]
    counts = ", ".join(f"{s} {data['questions'][s]} questions / {data['candidates'][s]} candidates"
                       for s in data["questions"])
    dropped = "; ".join(f"{s}: {', '.join(f'{n} {why}' for why, n in d.items() if n)}"
                        for s, d in data.get("dropped", {}).items() if any(d.values()))
    parts = ["# Answer ranking with a frozen encoder: layer x pooling x interaction", "",
             f"Data: {data['task']} (questions kept: {data['keep']}): {counts}."
             + (f" Dropped questions: {dropped}." if dropped else ""), "",
             "Questions and passages encoded apart; learned scorers trained on standardised features with early "
             "stopping on dev MAP. MAP, MRR and P@1 by trec_eval's definitions, over questions with a relevant "
             "candidate.", "", *encoder_lines(results), "", *cut_lines(results), summary_section(results)]
    parts += [encoder_section(label, record, results, out) for label, record in results["results"].items()
              if record["blocks"]]
    compared = encoders_section(results, out)
    parts += [compared] if compared else []
    parts.append(timing_section(results))
    text = "\n".join(parts)
    write_text(out / "report.md", text)
    return text
