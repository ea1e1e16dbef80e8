"""``hire experiment report``: every table, figure and the HTML page of an experiment, from its records.

    experiments/<name>/
      experiment.yaml                 the experiment file, as it was when the report was made
      records/                        one JSON per finished cell (+ Figure 2's per-example weights)
      tables/<table>.md|csv|json      the paper-style table, its data, every statistic
      figures/<table>_seeds.png       each seed's score per head and task
      figures/figure2.png + figure2_tasks.csv, figure2_examples.csv
                                      (report.md counts the examples weighted uniformly / mostly on the last state)
      tables/layer_weights.md|csv     every run's mean importance score per hidden state (heads that weight)
      summary.json                    progress, machines, precisions, training time
      report.md, report.html          everything on one page (the HTML is self-contained)

Nothing here reads a run folder, and every file is a function of the records and the experiment file
alone: a second report writes the same bytes (files are only rewritten when their content changes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hire.experiments import figures, html
from hire.experiments.aggregate import aggregate_table, rounded
from hire.experiments.experiment import Experiment
from hire.experiments.records import Records, json_bytes, load_records, write_if_changed
from hire.experiments.summary import adopted_text, runs_summary
from hire.experiments.tables import WEIGHTS_NOTE, WEIGHTS_TITLE, csv_text, markdown
from hire.reporting import markdown_table


def _cells_rows(exp: Experiment, records: Records) -> list[list[str]]:
    rows = []
    for cell in exp.cells:
        r = records.by_cell.get(cell.id)
        if r is None:
            state = "changed config" if cell.id in records.stale else "not run"
            rows.append([cell.id, state, "", "", "", ""])
        else:
            minutes = f"{r['train_seconds'] / 60:.1f}" if r.get("train_seconds") is not None else ""
            rows.append([cell.id, f"{100 * r['score']:.2f}", str(r.get("best_step")), str(r.get("steps")), minutes,
                         str(r.get("mixed_precision"))])
    return rows


def layer_weights_rows(exp: Experiment, records: Records) -> list[tuple[str, float, list[float], int]]:
    """Per run of a head that weights the hidden states: (cell, dev score, the mean weight of each state over
    the first dev split, how many states share the smallest mean weight). With HIRE (eq. 3-4), two or more
    states tied there to 6 decimals means alpha = ReLU(w . u + b) was 0 for them on every example: their
    scores died, and s is flat over them."""
    rows = []
    for cell in exp.cells:
        r = records.by_cell.get(cell.id)
        weights = next(iter((r or {}).get("layer_weights", {}).values()), None)
        if r is not None and weights is not None:
            mean = weights["mean"]
            tied = sum(abs(w - min(mean)) < 5e-7 for w in mean)
            rows.append((cell.id, r["score"], mean, tied if tied > 1 else 0))
    return rows


def layer_weights_table(rows: list[tuple[str, float, list[float], int]]) -> tuple[list[str], list[list[str]]]:
    """The per-run layer weights as a header and text rows (for Markdown, CSV and HTML)."""
    width = max(len(mean) for _, _, mean, _ in rows)
    header = ["run", "score", *(f"h{i}" for i in range(width)), "flat states"]
    lines = [[cell, f"{100 * score:.2f}", *(f"{w:.4f}" for w in mean), *[""] * (width - len(mean)), str(tied)]
             for cell, score, mean, tied in rows]
    return header, lines


def layer_weights_files(header: list[str], lines: list[list[str]]) -> tuple[str, str]:
    """The per-run layer weights as Markdown (for report.md) and CSV."""
    md = [f"## {WEIGHTS_TITLE}", "", WEIGHTS_NOTE, "", *markdown_table(header, lines, align="lr")]
    return "\n".join(md) + "\n", "\n".join(",".join(x) for x in [header, *lines]) + "\n"


def write_experiment_report(exp: Experiment, exp_dir: Path) -> dict[str, Any]:
    """Write everything; returns the table data, the written paths and the summary."""
    exp_dir = Path(exp_dir)
    records = load_records(exp, exp_dir)
    files: dict[Path, bytes] = {exp_dir / "experiment.yaml": exp.text.encode()}
    pictures: list[tuple[str, bytes]] = []
    tables = []
    for table in exp.tables:
        data = rounded(aggregate_table(exp, table, records))
        tables.append(data)
        stem = exp_dir / "tables" / table.name
        files[stem.with_suffix(".md")] = markdown(data).encode()
        files[stem.with_suffix(".csv")] = csv_text(data).encode()
        files[stem.with_suffix(".json")] = json_bytes(data)
        png = figures.seeds_png(data)
        if png:
            files[exp_dir / "figures" / f"{table.name}_seeds.png"] = png
            pictures.append((f"{table.title}: seeds", png))
    fig2 = figures.figure2_data(exp, records, exp_dir)
    fig2_note = figures.examples_counts_text(fig2) if fig2 and fig2["examples"] else ""
    if fig2:
        png = figures.figure2_png(fig2)
        files[exp_dir / "figures" / "figure2.png"] = png
        caption = "Figure 2: importance scores per task (left) and per example (right)"
        pictures.insert(0, (f"{caption}. {fig2_note}" if fig2_note else caption, png))
        left, right = figures.figure2_csvs(fig2)
        files[exp_dir / "figures" / "figure2_tasks.csv"] = left.encode()
        if right:
            files[exp_dir / "figures" / "figure2_examples.csv"] = right.encode()
    weights = layer_weights_rows(exp, records)
    weights_md, weights_table = "", None
    if weights:
        weights_table = layer_weights_table(weights)
        weights_md, weights_csv = layer_weights_files(*weights_table)
        files[exp_dir / "tables" / "layer_weights.md"] = weights_md.encode()
        files[exp_dir / "tables" / "layer_weights.csv"] = weights_csv.encode()
    summary = rounded(runs_summary(exp, records))
    files[exp_dir / "summary.json"] = json_bytes(summary)
    files[exp_dir / "report.md"] = report_markdown(exp, tables, summary, [p.relative_to(exp_dir) for p in files
                                                                       if p.suffix == ".png"], weights_md,
                                                 fig2_note).encode()
    files[exp_dir / "report.html"] = html.page(exp.name, exp.description, tables, pictures, summary, exp.text,
                                               _cells_rows(exp, records), weights_table).encode()
    changed = [path for path, data in files.items() if write_if_changed(path, data)]
    return {"tables": tables, "files": sorted(files), "changed": changed, "summary": summary}


def report_markdown(exp: Experiment, tables: list[dict[str, Any]], summary: dict[str, Any],
                    pngs: list[Path], weights_md: str = "", figure2_note: str = "") -> str:
    """The tables and figures on one Markdown page (report.html has the same and more)."""
    total = summary["total"]
    head = [f"# Experiment {exp.name}", "", exp.description, "",
            f"{summary['with_records']} of {summary['cells']} cells recorded{adopted_text(summary)}; training time "
            f"{total['train_seconds'] / 3600:.2f} h in all. Machines: "
            + ("; ".join(f"{name} ({m['cells']} cells, {', '.join(m['precisions'])})"
                         for name, m in summary["machines"].items()) or "none yet") + ".", ""]
    body = [markdown(t) for t in tables] + ([weights_md] if weights_md else [])
    pictures = [f"![{p.stem}]({p.as_posix()})" + (f"\n\n{figure2_note}" if p.stem == "figure2" and figure2_note else "")
                for p in sorted(pngs)]
    return "\n".join(head) + "\n" + "\n".join(body) + ("\n" + "\n\n".join(pictures) + "\n" if pictures else "")
