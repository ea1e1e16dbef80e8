"""What exact leave-one-out ridge must cost on this machine, for a committed probe grid's regression task, beside
the grid's encoding (issue 48, item 4: "fitting no slower than encoding").

The batched fitter (``hire.probing.solvers.ridge.fit_ridge``) chooses each feature set's ``alpha`` by the exact
leave-one-out error over the grid's alphas, as scikit-learn's ``RidgeCV`` does, in float64. That needs, per feature
set of width D on N training rows, a Gram matrix and one dense decomposition: where D <= N the D x D Gram matrix's
eigendecomposition (every alpha from it), where D > N the N x N kernel's Cholesky factor and its inverse, once per
alpha (a hat-matrix diagonal per alpha needs the inverse's diagonal). This script times exactly those calls (the
fitter's own functions), at the task's sizes, on random matrices of the same shapes (their cost does not depend on
the values), with nothing else of the fitter around them: the sum is a floor under the fitter's time for the task
on this machine, whatever the code around the calls. For the wide sets it also times the one alternative that
gives every alpha from one decomposition (the kernel's eigendecomposition), to show which is cheaper here.

The floor is then put beside the grid's encoding time measured on this machine (``--encoding``: a
``bench_probe_grid.py --time_encoding`` report's ``results.json``) and the batched fitter's time for the grid's
other tasks in that report: for fitting to be no slower than encoding, those tasks would have to fit in what the
floor leaves of the encoding time.

    python benchmarks/ridge_floor.py OUT [--results experiments/probe-minilm/results.json] [--task STS-B] \\
        [--encoder pre-trained] [--encoding benchmarks/results/cpu-2core-probe-grid/results.json] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_common import machine_info
from threadpoolctl import threadpool_limits

from hire.checks import report_dir_problem
from hire.probing.solvers.ridge import _eigh, _gram, _inverse_factor
from hire.reporting import markdown_table


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_width(n: int, d: int, alphas: int, rng: np.random.Generator) -> dict[str, Any]:
    """Seconds of one feature set's decompositions at width ``d`` on ``n`` rows: the fitter's own calls
    (``hire.probing.solvers.ridge``'s ``_gram``, ``_eigh`` and ``_inverse_factor``), on the route it takes at that
    width."""
    z = torch.from_numpy(rng.standard_normal((1, n, d)))
    row: dict[str, Any] = {"width": d, "rows": n}
    rows = d > n
    start = time.perf_counter()
    gram = _gram(z, rows=rows)  # (1, M, M)
    row["gram_seconds"] = time.perf_counter() - start
    del z
    gram[0].diagonal().add_(10.0)  # positive definite, as with any alpha of the grid
    if not rows:
        row["route"] = "D x D Gram, one eigendecomposition"
        row["decomposition_seconds"] = timed(lambda: _eigh(gram))
    else:
        row["route"] = f"N x N kernel, Cholesky + inverse per alpha ({alphas})"
        one = timed(lambda: _inverse_factor(gram[0].clone()))
        row["decomposition_seconds"] = alphas * one
        row["per_alpha_seconds"] = one
        row["one_eigh_seconds"] = timed(lambda: _eigh(gram))
        row["gflops_per_alpha"] = round(2 / 3 * n ** 3 / one / 1e9, 1)
    row["set_seconds"] = row["gram_seconds"] + row["decomposition_seconds"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for report.md and results.json")
    parser.add_argument("--results", type=Path, default=Path("experiments/probe-minilm/results.json"),
                        help="the committed grid's results.json")
    parser.add_argument("--task", default="STS-B", help="its regression task")
    parser.add_argument("--encoder", default="pre-trained", help="the encoder label whose feature sets are counted")
    parser.add_argument("--encoding", type=Path, default=Path("benchmarks/results/cpu-2core-probe-grid/results.json"),
                        help="a bench_probe_grid.py report (with --time_encoding) of the same grid on this machine")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/LAPACK threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads < 1:
        print(f"ridge_floor.py: --threads {args.threads}: give 1 or more", file=sys.stderr)
        return 2
    for path in (args.results, args.encoding):
        if not path.is_file():
            print(f"ridge_floor.py: {path}: file not found", file=sys.stderr)
            return 2
    problem = report_dir_problem(args.out, "floor_seconds")
    if problem:
        print(f"ridge_floor.py: {problem}", file=sys.stderr)
        return 2
    try:
        grid, bench = json.loads(args.results.read_text()), json.loads(args.encoding.read_text())["timings"]
        task = grid["tasks"].get(args.task)
        alphas = len(grid["config"]["probe"]["alpha_grid"])
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        print(f"ridge_floor.py: --results {args.results} / --encoding {args.encoding}: not a probe grid's "
              f"results.json and a bench_probe_grid.py report ({type(err).__name__}: {err})", file=sys.stderr)
        return 2
    if task is None or not task.get("regression"):
        print(f"ridge_floor.py: --task {args.task}: not a regression task of {args.results}", file=sys.stderr)
        return 2
    rows = task["results"].get(args.encoder, {}).get("rows")
    if not rows:
        print(f"ridge_floor.py: --encoder {args.encoder}: no rows for {args.task} in {args.results}", file=sys.stderr)
        return 2
    n = int(task["examples"]["train"])
    widths = Counter(int(r["dim"]) for r in rows)

    rng = np.random.default_rng(args.seed)
    load = os.getloadavg()
    with threadpool_limits(args.threads):
        timings = []
        for d in sorted(widths):
            row = time_width(n, d, alphas, rng)
            row["sets"] = widths[d]
            timings.append(row)
            print(f"width {d}: {row['set_seconds']:.1f} s per set x {widths[d]}", flush=True)
    floor = sum(r["set_seconds"] * r["sets"] for r in timings)

    mine = [t for t in bench if t["encoder"] == args.encoder and "encode_here_seconds" in t]
    encoding = sum(t["encode_here_seconds"] for t in mine)
    others = [t for t in mine if t["task"] != args.task]
    others_fit = sum(t["batched_seconds"] for t in others)
    others_reference = sum(t.get("reference_seconds", 0) for t in others) if all(
        "reference_seconds" in t for t in others) else None
    task_fit = next((t["batched_seconds"] for t in mine if t["task"] == args.task), None)
    left = encoding - floor
    result = {"machine": machine_info(), "threads": args.threads, "load_before": [round(x, 2) for x in load],
              "grid": str(args.results), "task": args.task, "encoder": args.encoder, "train_rows": n,
              "alphas": alphas, "timings": timings, "floor_seconds": round(floor, 1),
              "encoding_report": str(args.encoding), "grid_encoding_seconds": round(encoding, 1),
              "task_batched_seconds": task_fit, "other_tasks": [t["task"] for t in others],
              "other_tasks_batched_seconds": round(others_fit, 1),
              "other_tasks_reference_seconds": others_reference,
              "left_for_other_tasks_seconds": round(left, 1)}
    text = report(result, argv if argv is not None else sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "report.md").write_text(text)
    print(f"floor {floor:.1f} s; the grid's encoding {encoding:.1f} s; written to {args.out}")
    return 0


def report(r: dict[str, Any], argv: list[str]) -> str:
    m = r["machine"]
    table = [[str(t["width"]), str(t["sets"]), t["route"], f"{t['gram_seconds']:.2f}",
              f"{t['decomposition_seconds']:.2f}",
              f"{t['one_eigh_seconds']:.2f}" if "one_eigh_seconds" in t else "-",
              str(t.get("gflops_per_alpha", "-")), f"{t['set_seconds'] * t['sets']:.1f}"] for t in r["timings"]]
    left = r["left_for_other_tasks_seconds"]
    speedup = r["other_tasks_batched_seconds"] / left if left > 0 else None
    lines = [
        f"# What exact leave-one-out ridge must cost: {r['task']} of `{r['grid']}`, beside the grid's encoding", "",
        f"`python benchmarks/ridge_floor.py {' '.join(argv)}`", "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {r['threads']} thread(s); torch {m['torch']}, {m['date']}, "
        f"load average before (1, 5, 15 min): {', '.join(str(x) for x in r['load_before'])}.", "",
        f"{r['task']} ({r['encoder']}): {r['train_rows']} training rows, {r['alphas']} alphas, "
        f"{sum(t['sets'] for t in r['timings'])} feature sets. Seconds of the fitter's Gram and decomposition "
        "calls that exact leave-one-out needs for each set, on random matrices of the same shapes (nothing else of "
        "the fitter); *one eigh*: the kernel's eigendecomposition, the alternative that gives every alpha at once; "
        "*GFLOP/s*: float64 "
        "multiply-adds x 2 per second of one Cholesky factor and its inverse (2N^3/3 flops).", "",
        *markdown_table(["width", "sets", "route", "Gram s", "decompositions s", "one eigh s", "GFLOP/s",
                         "all sets s"], table), "",
        f"**Floor for {r['task']}: {r['floor_seconds']:.1f} s** of LAPACK alone (the batched fitter took "
        f"{r['task_batched_seconds']} s in the encoding report's run).", "",
        f"The grid's encoding on this machine ({r['encoder']}, every task, `{r['encoding_report']}`): "
        f"**{r['grid_encoding_seconds']:.1f} s**. For the whole grid's fitting to be no slower than its encoding, "
        f"the other {len(r['other_tasks'])} tasks ({', '.join(r['other_tasks'])}) would have to fit in "
        f"{left:.1f} s, where the batched fitter took {r['other_tasks_batched_seconds']:.1f} s"
        + (" (no time is left)" if speedup is None else f" (a further {speedup:.1f}x)" if speedup > 1
           else " (within it)")
        + (f" and scikit-learn {r['other_tasks_reference_seconds']:.1f} s." if r["other_tasks_reference_seconds"]
           else "."), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
