"""``hire experiment report``: every table, figure and the HTML page of an experiment, from its records.

    experiments/<name>/
      experiment.yaml                 the experiment file, as it was when the report was made
      records/                        one JSON per finished cell (+ Figure 2's per-example weights)
      tables/<table>.md|csv|json      the paper-style table, its data, every statistic
      figures/<table>_seeds.png       each seed's score per head and task
      figures/figure2.png + figure2_tasks.csv, figure2_examples.csv
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
from hire.experiments.summary import runs_summary
from hire.experiments.tables import csv_text, markdown


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


def write_report(exp: Experiment, exp_dir: Path) -> dict[str, Any]:
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
    if fig2:
        png = figures.figure2_png(fig2)
        files[exp_dir / "figures" / "figure2.png"] = png
        pictures.insert(0, ("Figure 2: importance scores per task (left) and per example (right)", png))
        left, right = figures.figure2_csvs(fig2)
        files[exp_dir / "figures" / "figure2_tasks.csv"] = left.encode()
        if right:
            files[exp_dir / "figures" / "figure2_examples.csv"] = right.encode()
    summary = rounded(runs_summary(exp, records))
    files[exp_dir / "summary.json"] = json_bytes(summary)
    files[exp_dir / "report.md"] = report_markdown(exp, tables, summary, [p.relative_to(exp_dir) for p in files
                                                                       if p.suffix == ".png"]).encode()
    files[exp_dir / "report.html"] = html.page(exp.name, exp.description, tables, pictures, summary, exp.text,
                                               _cells_rows(exp, records)).encode()
    changed = [path for path, data in files.items() if write_if_changed(path, data)]
    return {"tables": tables, "files": sorted(files), "changed": changed, "summary": summary}


def report_markdown(exp: Experiment, tables: list[dict[str, Any]], summary: dict[str, Any],
                    pngs: list[Path]) -> str:
    """The tables and figures on one Markdown page (report.html has the same and more)."""
    total = summary["total"]
    head = [f"# Experiment {exp.name}", "", exp.description, "",
            f"{summary['with_records']} of {summary['cells']} cells recorded; training time "
            f"{total['train_seconds'] / 3600:.2f} h in all. Machines: "
            + ("; ".join(f"{name} ({m['cells']} cells, {', '.join(m['precisions'])})"
                         for name, m in summary["machines"].items()) or "none yet") + ".", ""]
    body = [markdown(t) for t in tables]
    pictures = [f"![{p.stem}]({p.as_posix()})" for p in sorted(pngs)]
    return "\n".join(head) + "\n" + "\n".join(body) + ("\n" + "\n\n".join(pictures) + "\n" if pictures else "")
