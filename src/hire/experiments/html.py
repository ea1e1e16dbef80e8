"""One self-contained HTML page per experiment: tables, figures (embedded PNG), the experiment file,
the machines, precisions and training time. No scripts, no external files: it opens anywhere."""

from __future__ import annotations

import base64
import html
import re
from typing import Any

from hire.experiments import tables as md
from hire.experiments.summary import adopted_text

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: right; }
th:first-child, td:first-child { text-align: left; } th { background: #f3f3f3; }
tr.baseline td { background: #fafafa; } .note { color: #555; font-size: .9em; max-width: 60em; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: .85em; }
img { max-width: 100%; border: 1px solid #eee; } .warn { color: #a40; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def _cell(text: Any) -> str:
    """Escaped, with Markdown bold (the best median) as <b>."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", _e(text))


def table_html(header: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(f'<tr class="{(classes or [""] * len(rows))[i]}">' + "".join(f"<td>{_cell(c)}</td>" for c in r)
                   + "</tr>" for i, r in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _result_tables(data: dict[str, Any]) -> str:
    cols, seeds, rows = md.columns(data), md.typical_seeds(data), data["rows"]
    header = ["Model", *(h for h, _ in cols)]
    best = md.best_medians(data)
    classes = ["baseline" if r["baseline"] is None else "" for r in rows]
    medians = [[r["label"], *(md.median_cell(r, k, best[k], seeds) for _, k in cols)]
               for r in rows]
    spread = [[r["label"], *(md.spread_cell(r, k) for _, k in cols)] for r in rows]
    scores = "; ".join(f"{t}: {md.metric_text(t, m)}" for t, m in data["metrics"].items())
    parts = [f"<h3>{_e(data['title'])}</h3>",
             f'<p class="note">Median of n={seeds} seeds (x100); in brackets the difference to the baseline\'s '
             f"median. Scores: {_e(scores)}. {_e(md.precision_text(data.get('precisions', {})))} "
             f"{_e(data['note'])}</p>", table_html(header, medians, classes),
             "<p class=note>Mean ± standard deviation over seeds</p>", table_html(header, spread, classes)]
    compared = [r for r in rows if r["baseline"]]
    if compared:
        paired = [[f"{r['label']} − {r['baseline']}", *(md.paired_cell(r, k) for _, k in cols)] for r in compared]
        parts += ["<p class=note>Paired differences to the baseline (same seed = same data order): mean "
                  "[bootstrap 95% interval], Wilcoxon signed-rank p (n/a below 5 pairs); median (n pairs)</p>",
                  table_html(header, paired)]
    return "\n".join(parts)


def _image(title: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return f"<figure><img alt=\"{_e(title)}\" src=\"data:image/png;base64,{data}\"><figcaption class=note>" \
           f"{_e(title)}</figcaption></figure>"


def _time_rows(groups: dict[str, dict[str, Any]]) -> list[list[str]]:
    def minutes(s: float | None) -> str:
        return "–" if s is None else f"{s / 60:.1f}"

    return [[name, str(t["cells"]), minutes(t["train_seconds"]), minutes(t["mean_train_seconds"]),
             minutes(t["wall_seconds"]), ", ".join(t.get("precisions", []))] for name, t in groups.items()]


def page(exp_name: str, description: str, tables: list[dict[str, Any]], figures: list[tuple[str, bytes]],
         summary: dict[str, Any], yaml_text: str, cells: list[list[str]],
         layer_weights: tuple[list[str], list[list[str]]] | None = None) -> str:
    """The whole report page; ``layer_weights``: the per-run weights table (header, rows), if any."""

    s = summary
    time_header = ["", "cells", "train min (total)", "train min (mean)", "wall min (total)", "precisions"]
    warnings = []
    if s["records_with_changed_config"]:
        warnings.append(f"{len(s['records_with_changed_config'])} records were trained with another configuration "
                        f"than the file now declares and are left out: "
                        + ", ".join(f"{k} ({', '.join(v)})" for k, v in s["records_with_changed_config"].items()))
    if s["records_not_in_grid"]:
        warnings.append(f"{len(s['records_not_in_grid'])} records are of cells the file no longer declares "
                        f"(left out): {', '.join(s['records_not_in_grid'])}")
    body = [f"<h1>Experiment {_e(exp_name)}</h1>", f"<p>{_e(description)}</p>" if description else "",
            f"<p>{s['with_records']} of {s['cells']} cells finished and recorded{_e(adopted_text(s))}; "
            "total training time "
            f"{s['total']['train_seconds'] / 3600:.2f} h.</p>",
            *(f'<p class="warn">{_e(w)}</p>' for w in warnings),
            "<h2>Tables</h2>", *(_result_tables(t) for t in tables),
            "<h2>Figures</h2>", *(_image(title, png) for title, png in figures),
            *([f"<h2>{_e(md.WEIGHTS_TITLE)}</h2>", f"<p>{_e(md.WEIGHTS_NOTE)}</p>", table_html(*layer_weights)]
              if layer_weights else []),
            "<h2>Machines, precision and time</h2>",
            table_html(["machine", *time_header[1:]], _time_rows(s["machines"])),
            table_html(["precision", *time_header[1:-1]], [r[:-1] for r in _time_rows(s["precisions"])]),
            table_html(["task / head", *time_header[1:-1]], [r[:-1] for r in _time_rows(s["task_head"])]),
            "<h2>Cells</h2>",
            table_html(["cell", "score", "best step", "steps", "train min", "precision"], cells),
            "<h2>Experiment file</h2>", f"<pre>{_e(yaml_text)}</pre>"]
    return (f"<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>Experiment {_e(exp_name)}</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(b for b in body if b) + "\n</body></html>\n")
