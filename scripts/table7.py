"""BERT's Table 7 (CoNLL-2003 NER, feature-based against fine-tuned) on our encoders: records, tables, figure.

Two steps, so that the committed tables are made from committed files only:

    # 1. each seed's `hire features` results -> one record per (row, seed) under <experiment>/records/
    python scripts/table7.py collect runs/table7-minilm/features/seed* --out experiments/table7-minilm
    # 2. the tables, the figure and the report, from the records alone (and the fine-tuned experiment's records)
    python scripts/table7.py report experiments/table7-minilm --finetuned experiments/ner-minilm

A feature row's record is its run folder's ``metrics.json`` (dev and test entity F1, the best epoch, the training
time and the machine), ``config.json`` (encoder, tagger settings) and ``epochs.jsonl`` (the dev curve). Fine-tuned
rows are the cells of a ``hire experiment`` on ``data.task conll2003`` (their ``dev`` and ``held_out`` test).
Every table cell is the median over seeds with the range beside it; fine-tuned heads are also compared with the
fine-tuned last layer seed by seed (:func:`hire.experiments.stats.paired`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hire.experiments.stats import paired, summarize
from hire.featurebased import ROWS
from hire.featurebased.rows import PAPER_DEV_F1
from hire.model.sharing import markdown_table

PAPER_FINE_TUNED_DEV_F1 = 96.4  # BERT-base fine-tuned, Table 7
FINE_TUNED_HEADS = ("last-layer", "scalar-mix", "concat-last-4", "hire")


def fail(message: str) -> None:
    print(f"table7: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        fail(f"{path}: {err}")


def collect(seed_dirs: list[Path], out: Path) -> int:
    """One record per finished (row, seed); rows still training are left for a later collect."""
    for folder in seed_dirs:  # checked before anything is written
        if not folder.is_dir():
            fail(f"{folder}: no such folder (a `hire features --output_dir` folder)")
        if not any((folder / row / "metrics.json").is_file() for row in ROWS):
            fail(f"{folder}: no finished row (no <row>/metrics.json); is `hire features` still running there?")
    records = out / "records"
    records.mkdir(parents=True, exist_ok=True)
    written = 0
    for folder in seed_dirs:
        for row in ROWS:
            run = folder / row
            if not (run / "metrics.json").is_file():
                continue
            config = read_json(run / "config.json")
            epochs = [json.loads(line) for line in (run / "epochs.jsonl").read_text().splitlines() if line.strip()]
            record = {"kind": "features", "row": row, "seed": config["settings"]["seed"], "config": config,
                      "metrics": read_json(run / "metrics.json"),
                      "curve": [{"epoch": e["epoch"], "train_loss": e["train_loss"], "dev_f1": e["dev"]["f1"]}
                                for e in epochs]}
            path = records / f"features__{row}__seed{record['seed']}.json"
            text = json.dumps(record, indent=1, sort_keys=True) + "\n"
            if not path.is_file() or path.read_text() != text:
                path.write_text(text)
                written += 1
    print(f"{written} record(s) written or changed under {records}")
    return 0


def feature_scores(exp: Path) -> dict[str, dict[int, dict[str, float]]]:
    """row -> seed -> {dev, test, seconds, epoch}, from the records."""
    rows: dict[str, dict[int, dict[str, float]]] = {}
    for path in sorted((exp / "records").glob("features__*.json")):
        r = read_json(path)
        m = r["metrics"]
        dev_curve = [100 * e["dev_f1"] for e in r.get("curve", [])]
        rows.setdefault(r["row"], {})[r["seed"]] = {
            "dev": 100 * m["dev"]["f1"], "test": 100 * m["test"]["f1"], "seconds": m["train_seconds"],
            "epoch": m["best_epoch"], "epochs_run": m.get("epochs_run", len(dev_curve)),
            "last_move": abs(dev_curve[-1] - dev_curve[-2]) if len(dev_curve) > 1 else 0.0}
    return rows


def fine_tuned_scores(exp: Path | None) -> dict[str, dict[int, dict[str, float]]]:
    """head -> seed -> {dev, test, seconds}, from a `hire experiment` on conll2003 (its records)."""
    heads: dict[str, dict[int, dict[str, float]]] = {}
    if exp is None:
        return heads
    for path in sorted((exp / "records").glob("*.json")):
        r = read_json(path)
        if r.get("task") not in ("CoNLL-2003", "conll2003"):
            continue
        dev = next(iter(r["dev"].values()))
        held = next(iter(r.get("held_out", {}).values()), {})
        heads.setdefault(r["head"], {})[r["options"]["train.seed"]] = {
            "dev": 100 * dev["f1"], "test": 100 * held["f1"] if held else float("nan"),
            "seconds": r.get("train_seconds") or float("nan")}
    return heads


def spread(values: list[float]) -> str:
    s = summarize([v for v in values if v == v])
    if not s["n"]:
        return "–"
    return f"{s['median']:.1f}" if s["n"] == 1 else f"{s['median']:.1f} [{s['min']:.1f}, {s['max']:.1f}]"


def table(features: dict, fine: dict) -> tuple[list[str], list[list[str]], list[dict[str, Any]]]:
    header = ["row", "seeds", "dev F1", "test F1", "train s (median)", "BERT-base dev F1 (paper)"]
    lines, data = [], []
    for kind, rows, paper in (("frozen features", features, PAPER_DEV_F1), ("fine-tuned", fine, {})):
        for name in (ROWS if kind == "frozen features" else FINE_TUNED_HEADS):
            seeds = rows.get(name, {})
            if not seeds:
                continue
            dev, test = [v["dev"] for v in seeds.values()], [v["test"] for v in seeds.values()]
            seconds = summarize([v["seconds"] for v in seeds.values()])["median"]
            ref = paper.get(name) if kind == "frozen features" else (
                PAPER_FINE_TUNED_DEV_F1 if name == "last-layer" else None)
            lines.append([f"{kind}: {name}", str(len(seeds)), spread(dev), spread(test), f"{seconds:.0f}",
                          "–" if ref is None else f"{ref:.1f}"])
            data.append({"kind": kind, "row": name, "seeds": sorted(seeds), "dev": summarize(dev),
                         "test": summarize([t for t in test if t == t]), "train_seconds": seconds, "paper": ref})
            if kind == "frozen features":  # by seed (the order of "seeds"): how training ended
                by_seed = [seeds[s] for s in sorted(seeds)]
                data[-1].update(best_epochs=[v["epoch"] for v in by_seed],
                                epochs_run=[v["epochs_run"] for v in by_seed],
                                largest_last_epoch_move=max(v["last_move"] for v in by_seed))
    return header, lines, data


def pairs(fine: dict) -> tuple[list[str], list[list[str]], dict[str, Any]]:
    base = {s: v["dev"] for s, v in fine.get("last-layer", {}).items()}
    header = ["fine-tuned head", "seeds paired", "median dev F1 difference", "95% interval of the mean", "wilcoxon"]
    lines, data = [], {}
    for head in FINE_TUNED_HEADS[1:]:
        if head not in fine:
            continue
        p = paired({s: v["dev"] for s, v in fine[head].items()}, base)
        data[head] = p
        ci = "–" if p["ci95"] is None else f"[{p['ci95'][0]:+.2f}, {p['ci95'][1]:+.2f}]"
        median = "–" if p["median"] is None else f"{p['median']:+.2f}"
        lines.append([head, str(p["n"]), median, ci, p["wilcoxon"]])
    return header, lines, data


def figure(path: Path, features: dict, fine: dict) -> None:
    """Each row's seeds (dev F1) as dots and BERT-base's figure from the paper as a bar, the legend under the axes;
    sized for the site's column (:mod:`hire.figures`)."""
    from matplotlib.lines import Line2D

    from hire.figures import FIGURE_WIDTH, legend_below, new_axes, save_png

    names = [(f"frozen features: {r}", features[r], PAPER_DEV_F1.get(r)) for r in ROWS if r in features]
    names += [(f"{h} (fine-tuned)", fine[h], PAPER_FINE_TUNED_DEV_F1 if h == "last-layer" else None)
              for h in FINE_TUNED_HEADS if h in fine]
    fig, ax = new_axes((FIGURE_WIDTH, 0.3 * len(names) + 1.4))
    for i, (_, seeds, paper) in enumerate(names):
        dev = [v["dev"] for v in seeds.values()]
        ax.scatter(dev, [i] * len(dev), color="tab:blue", s=18, zorder=3)
        if paper is not None:
            ax.scatter([paper], [i], marker="|", color="tab:red", s=200, zorder=3)
    ax.set_yticks(range(len(names)), [n for n, _, _ in names], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("CoNLL-2003 dev entity F1 (strict)")
    ax.grid(axis="x", alpha=0.3)
    legend_below(fig, [([Line2D([], [], linestyle="none", marker="o", color="tab:blue", markersize=5),
                         Line2D([], [], linestyle="none", marker="|", color="tab:red", markersize=12,
                                markeredgewidth=2)], ["ours (a dot per seed)", "BERT-base (paper)"])], ncol=2)
    save_png(fig, path)


def report(exp: Path, finetuned: Path | None) -> int:
    features, fine = feature_scores(exp), fine_tuned_scores(finetuned)
    if not features and not fine:
        fail(f"{exp}/records: no records; run `table7.py collect` first")
    header, lines, rows = table(features, fine)
    pair_header, pair_lines, pair_data = pairs(fine)
    machines = sorted({json.dumps(read_json(p)["metrics"]["machine"], sort_keys=True)
                       for p in (exp / "records").glob("features__*.json")})
    (exp / "tables").mkdir(exist_ok=True)
    (exp / "figures").mkdir(exist_ok=True)
    (exp / "tables" / "table7.json").write_text(json.dumps({"rows": rows, "paired": pair_data}, indent=1) + "\n")
    (exp / "tables" / "table7.md").write_text("\n".join(markdown_table(header, lines, align="lrrrrr")) + "\n")
    figure(exp / "figures" / "table7.png", features, fine)
    encoders = sorted({read_json(p)["config"]["encoder"] for p in (exp / "records").glob("features__*.json")})
    text = [f"# BERT's Table 7 on {', '.join(encoders) or 'the encoder'}: CoNLL-2003 NER from frozen features and "
            "fine-tuned", "",
            "Entity F1 x 100 (seqeval, strict IOB2), median over seeds [min, max]. Feature rows: a frozen encoder's "
            "word features (first sub-token, cached as float16) feed a randomly initialised 2-layer BiLSTM (the "
            "encoder's width per direction) and a linear layer, early stopping on dev F1 "
            "(`hire features`). Fine-tuned rows: `hire train --data.task conll2003` with each head.", "",
            *markdown_table(header, lines, align="lrrrrr"), "", "![dev F1 by row](figures/table7.png)", ""]
    if pair_lines:
        text += ["## Fine-tuned heads against the fine-tuned last layer, seed by seed (dev F1)", "",
                 *markdown_table(pair_header, pair_lines, align="lrrrl"), ""]
    text += ["## Machines", "", *[f"- {m}" for m in machines], ""]
    (exp / "report.md").write_text("\n".join(text))
    print(f"{exp}/report.md, tables/table7.md|json, figures/table7.png")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="hire features' results -> records")
    c.add_argument("seed_dirs", nargs="+", type=Path)
    c.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("report", help="records -> tables, figure, report.md")
    r.add_argument("experiment", type=Path)
    r.add_argument("--finetuned", type=Path, default=None, help="a hire experiment folder on conll2003")
    args = parser.parse_args(argv)
    if args.command == "collect":
        return collect(args.seed_dirs, args.out)
    return report(args.experiment, args.finetuned)


if __name__ == "__main__":
    sys.exit(main())
