"""How much a speed suite's step times move between runs of it on one machine.

    python benchmarks/compare_runs.py benchmarks/results/gpu-h100 benchmarks/results/gpu-h100-rerun \\
        benchmarks/results/gpu-h100-reps20 --heads last-layer,hire,hire-lite \\
        --out benchmarks/results/gpu-h100-spread.md

Reads each folder's ``results.json`` (written by ``bench_heads.py``) and writes a markdown table: for every
setting (precision, length) and head that all runs measured, each run's median training step, the largest
over the smallest of those medians, and each run's step ratio to the last-layer head beside the arithmetic
one. A GPU step of a small encoder is bound by kernel launches and moves by tens of percent from run to run;
this says by how much, from the files, so that no single run's ratio is quoted as the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import NamedTuple

from hire.reporting import markdown_table


class Row(NamedTuple):
    precision: str
    length: str
    head: str
    medians: list[float]  # per run, seconds
    ratios: list[float]  # per run, step over the last-layer head's
    arithmetic: float


def load(folder: Path) -> dict:
    path = folder / "results.json"
    if not path.is_file():
        raise SystemExit(f"{path}: not found (give folders that bench_heads.py wrote)")
    return json.loads(path.read_text())


def step_table(runs: list[dict], heads: list[str] | None) -> tuple[list[Row], dict[str, list[list[float]]]]:
    """A row per setting and head that every run has, in the first run's order; and per head and run the
    ratios to last-layer over the settings."""
    index = [{(r["precision"], r["seq_len"], r["head"]): r for r in run["records"]} for run in runs]
    keys = [k for k in index[0] if all(k in i for i in index[1:]) and (heads is None or k[2] in heads)]
    rows, ratios = [], {}
    for precision, length, head in keys:
        recs = [i[(precision, length, head)] for i in index]
        medians = [r["step_seconds"] for r in recs]
        rel = [r["ratio_to_last_layer"] for r in recs]
        rows.append(Row(precision, length, head, medians, rel, recs[0]["arithmetic_ratio"]))
        if head != "last-layer":
            for n, x in enumerate(rel):
                ratios.setdefault(head, [[] for _ in runs])[n].append(x)
    return rows, ratios


def write(folders: list[Path], runs: list[dict], heads: list[str] | None, out: Path) -> None:
    gpus = {r["machine"].get("gpu") or r["machine"].get("cpu") for r in runs}
    rows, ratios = step_table(runs, heads)
    lines = ["# Step times over several runs of the speed suite", ""]
    if len(gpus) > 1:
        lines += [f"**These runs are from different machines ({', '.join(sorted(map(str, gpus)))}):** "
                  "their spread mixes machine and noise.", ""]
    paths = {r["settings"].get("gru", "cudnn") for r in runs}
    if len(paths) > 1:
        lines += ["**These runs differ in the GRU path (cudnn, loop):** max/min mixes the path's cost with noise.", ""]
    lines += ["Made by `benchmarks/compare_runs.py` from:", ""]
    for n, (folder, run) in enumerate(zip(folders, runs, strict=True), 1):
        m, s = run["machine"], run["settings"]
        lines.append(f"{n}. `{folder}`: {m['date']}, {m.get('gpu') or m['cpu']}, torch {m['torch']}; "
                     f"{s['reps']} timed steps a setting, GRU path `{s.get('gru', 'cudnn')}`; "
                     f"the suite took {run['seconds']} s")
    lines += ["", "Median training step in ms, run by run; max/min: the largest median over the smallest; then "
              "each run's step ratio to last-layer, and the arithmetic ratio.", "",
              *markdown_table(["precision", "length", "head", *(f"run {n}" for n in range(1, len(runs) + 1)), "max/min",
                       "ratio to last-layer", "arithmetic"],
                      [[r.precision, r.length, r.head, *(f"{1000 * t:.1f}" for t in r.medians),
                        f"{max(r.medians) / min(r.medians):.2f}", " / ".join(f"{x:.2f}" for x in r.ratios),
                        f"{r.arithmetic:.2f}"] for r in rows])]
    spread = [max(r.medians) / min(r.medians) for r in rows]
    last = [x for r, x in zip(rows, spread, strict=True) if r.head == "last-layer"]
    lines += ["", "## Summary", ""]
    if spread:
        lines.append(f"- A setting's median step differs between these runs by a factor of {min(spread):.2f} to "
                     f"{max(spread):.2f} (median {statistics.median(spread):.2f}).")
    if last:
        lines.append(f"- The last-layer head's, which every ratio divides by: {min(last):.2f} to {max(last):.2f}.")
    for head, per_run in ratios.items():
        lines.append(f"- {head}/last-layer step ratio over {len(per_run[0])} settings: " + "; ".join(
            f"run {n} {min(r):.2f} to {max(r):.2f} (median {statistics.median(r):.2f})"
            for n, r in enumerate(per_run, 1)) + ".")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding a results.json, two or more")
    parser.add_argument("--heads", help="comma-separated heads to compare (default: every head all runs have)")
    parser.add_argument("--out", type=Path, required=True, help="markdown file to write")
    args = parser.parse_args()
    if len(args.folders) < 2:
        parser.error("give two or more folders to compare")
    heads = args.heads.split(",") if args.heads else None
    write(args.folders, [load(f) for f in args.folders], heads, args.out)


if __name__ == "__main__":
    main()
