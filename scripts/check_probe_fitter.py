"""Recompute a committed ``hire probe`` grid's cells with the batched fitter and compare them with scikit-learn.

For every (task, encoder) of ``RESULTS`` (default ``experiments/probe-minilm/results.json``) whose encoder can be
loaded here with the weights it names (the sha256 in the file), the features come from the feature cache or are
encoded again with the grid's own settings (maximum length, precision, cache dtype; encoding the whole MiniLM grid
took 30 minutes on the 2-core CPU), then every feature set is fitted by ``hire.probing.fit`` under the grid's
protocol and settings, and each cell's score (every evaluation split) is compared with the committed one, which
scikit-learn fitted. Encoders whose weights are not here are listed as skipped. Writes ``report.md`` and
``results.json`` under OUT.

Two comparisons, because the committed scores cannot be the yardstick alone: they were fitted on features
encoded on another machine (bf16 forward passes differ in the last bits between CPUs, and a probe's choice of C
and a few predictions near its boundary move with them), and at ``LogisticRegression``'s default ``tol=1e-4``,
where L-BFGS stops short of the optimum at a point that depends on the solver's path. So every cell is also
fitted on the *same* features by scikit-learn and by the batched fitter, both at ``--reference_tol`` (default
1e-6, up to ``--reference_max_iter`` iterations), where both reach the optimum of the same objective: that
difference is the fitter's own, and the check passes when it is within ``--tolerance`` on every cell.

Even at 1e-6 a solver can stop one example short: an example whose decision value at the optimum is near zero
(3e-4 on one of SST-2's 6,735 held-out sentences) lands on either side, and one example more or less on the
selection split can move the choice of C and with it the dev score. So where a cell differs by more than
``--tolerance`` at ``--reference_tol``, both fitters fit its feature set again at ``--settle_tol`` (default 100x
tighter, ten times the iterations), and the cell is judged there; the report shows both differences. ``--settle``
does only that for the checks already in OUT (no full check again).

    python scripts/check_probe_fitter.py OUT [--results experiments/probe-minilm/results.json] \\
        [--task CoLA] [--encoder pre-trained] [--device cpu] [--tolerance 0.3] [--retrained LABEL=PATH] \\
        [--settle_tol 1e-8] [--settle]

An encoder whose run folder is gone (a fine-tuned one: run folders are not committed) can be trained again by its
recipe and named with ``--retrained LABEL=PATH``: its weights differ from the grid's (another CPU, another
library version), so the committed scores are not compared with, and the same-features check runs on its own
features.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from hire.hardware import machine
from hire.lab.files import write_files
from hire.lab.sources import resolve_source
from hire.probing.classifiers import reference_probe_feature_set
from hire.probing.fit import probe_feature_sets
from hire.probing.grid import grid_pairs, grid_parser, grid_task, read_grid
from hire.reporting import markdown_table


def check_one(results: dict[str, Any], task_name: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    record = results["tasks"][task_name]
    retrained = args.retrained.get(label)
    grid = grid_task(results, task_name, label, args.cache_dir, args.device, retrained)
    if isinstance(grid, str):
        return {"task": task_name, "encoder": label, "skipped": grid}
    task, probe, features, labels, folds, sets = (grid.task, grid.probe, grid.features, grid.labels, grid.folds,
                                                  grid.sets)
    encode = grid.encode_seconds
    start = time.perf_counter()
    with threadpool_limits(1):
        rows = probe_feature_sets(features, labels, sets, task.metrics, task.regression, probe, folds, args.device)
    fit = time.perf_counter() - start
    tight = replace(probe, tol=args.reference_tol, max_iter=args.reference_max_iter)
    if task.regression:  # ridge is solved in closed form: no tolerance, so the fit above is already the optimum
        rows_tight, fit_tight = rows, fit
    else:
        start = time.perf_counter()
        with threadpool_limits(1):
            rows_tight = probe_feature_sets(features, labels, sets, task.metrics, task.regression, tight, folds,
                                            args.device)
        fit_tight = time.perf_counter() - start
    start = time.perf_counter()
    with threadpool_limits(1):
        refs = [reference_probe_feature_set(features, labels, fs, task.metrics, task.regression, tight, folds)
                for fs in sets]
    sklearn_tight = time.perf_counter() - start
    committed = {(r["row"], r["pooling"]): r for r in record["results"][label]["rows"]}
    cells = []
    for row, mine, ref in zip(rows, rows_tight, refs, strict=True):
        old = committed[(row["row"], row["pooling"])]
        for split, values in row["splits"].items():
            then = None if retrained else old["splits"][split]["score"]  # other weights: nothing to compare with
            cells.append({"row": row["row"], "pooling": row["pooling"], "split": split, "new": values["score"],
                          "committed": then,
                          "difference_points": None if then is None else 100 * (values["score"] - then),
                          "same_choice": None if retrained else row["chosen"] == old["chosen"],
                          "new_tight": mine["splits"][split]["score"], "sklearn_tight": ref["splits"][split]["score"],
                          "tight_difference_points": 100 * (mine["splits"][split]["score"]
                                                            - ref["splits"][split]["score"]),
                          "tight_same_choice": mine["chosen"] == ref["chosen"],
                          "tight_not_converged": [mine["not_converged"], ref["not_converged"]]})
    settle_seconds = settle_cells(grid, cells, args)
    versus = [c for c in cells if c["committed"] is not None]
    return {"task": task_name, "encoder": label, "retrained": retrained, "grid_tol": probe.tol,
            "encode_seconds": round(encode, 1), "fit_seconds": round(fit, 1),
            "committed_fit_seconds": record["results"][label]["seconds"]["fit"], "cells": cells,
            "tight_fit_seconds": round(fit_tight, 1), "tight_sklearn_seconds": round(sklearn_tight, 1),
            "max_difference_points": max(abs(c["difference_points"]) for c in versus) if versus else None,
            "over_tolerance": sum(abs(c["difference_points"]) > args.tolerance for c in versus) if versus else None,
            "same_choices": float(np.mean([c["same_choice"] for c in versus])) if versus else None,
            **summarise(cells, args, settle_seconds)}


def settle_cells(grid: Any, cells: list[dict[str, Any]], args: argparse.Namespace) -> float:
    """Where a cell's two scores at ``--reference_tol`` differ by more than ``--tolerance``, both fitters fit that
    feature set again at ``--settle_tol`` and each of its cells gets ``settled`` (the tol, both scores, their
    difference, whether the same C was chosen). Returns the seconds that took (0 where nothing was over)."""
    disputed = {(c["row"], c["pooling"]) for c in cells
                if abs(c["tight_difference_points"]) > args.tolerance and "settled" not in c}
    if not disputed or grid.task.regression:  # ridge: closed form, no tolerance to tighten
        return 0.0
    settings = replace(grid.probe, tol=args.settle_tol, max_iter=10 * args.reference_max_iter)
    sets = [fs for fs in grid.sets if (fs.row, fs.pooling) in disputed]
    start = time.perf_counter()
    with threadpool_limits(1):
        mine = probe_feature_sets(grid.features, grid.labels, sets, grid.task.metrics, False, settings, grid.folds,
                                  args.device)
        refs = [reference_probe_feature_set(grid.features, grid.labels, fs, grid.task.metrics, False, settings,
                                            grid.folds) for fs in sets]
    for fs, new, ref in zip(sets, mine, refs, strict=True):
        for cell in cells:
            if (cell["row"], cell["pooling"]) == (fs.row, fs.pooling):
                split = cell["split"]
                cell["settled"] = {"tol": args.settle_tol, "new": new["splits"][split]["score"],
                                   "sklearn": ref["splits"][split]["score"],
                                   "difference_points": 100 * (new["splits"][split]["score"]
                                                               - ref["splits"][split]["score"]),
                                   "same_choice": new["chosen"] == ref["chosen"]}
    return round(time.perf_counter() - start, 1)


def summarise(cells: list[dict[str, Any]], args: argparse.Namespace, settle_seconds: float) -> dict[str, Any]:
    """A check's verdict over its cells: each judged at ``--reference_tol``, or where it was settled, there."""
    def final(cell: dict[str, Any]) -> float:
        return abs(cell["settled"]["difference_points"] if "settled" in cell else cell["tight_difference_points"])

    return {"max_tight_difference_points": max(abs(c["tight_difference_points"]) for c in cells),
            "over_at_reference_tol": sum(abs(c["tight_difference_points"]) > args.tolerance for c in cells),
            "settled_cells": sum("settled" in c for c in cells), "settle_seconds": settle_seconds,
            "max_final_difference_points": max(final(c) for c in cells),
            "tight_over_tolerance": sum(final(c) > args.tolerance for c in cells),
            "tight_same_choices": float(np.mean([c["tight_same_choice"] for c in cells]))}


def report(checks: list[dict[str, Any]], args: argparse.Namespace,
           commands: list[tuple[str, dict[str, Any] | None]], every: list[tuple[str, str]]) -> str:
    """The report of every check in OUT; ``every``: the grid's (task, encoder) pairs, so that it says which are
    not checked yet. Checks in the grid's order."""
    order = {pair: i for i, pair in enumerate(every)}
    done = sorted((c for c in checks if "cells" in c), key=lambda c: order.get((c["task"], c["encoder"]), len(order)))
    tol, ref = args.tolerance, f"{args.reference_tol:g}"

    def number(value: float | None, form: str = "{:.2f}") -> str:
        return "–" if value is None else form.format(value)

    def encoder(check: dict[str, Any]) -> str:
        return check["encoder"] + (" (retrained)" if check.get("retrained") else "")

    retrained = sorted({(c["encoder"], c["retrained"]) for c in done if c.get("retrained")})
    def settled(c: dict[str, Any]) -> str:
        if not c.get("settled_cells"):
            return "–"
        return (f"{c['settled_cells']} cell{'s' * (c['settled_cells'] != 1)}: largest "
                f"{c['max_final_difference_points']:.2f} "
                f"({c['settle_seconds']:g} s)")

    rows = [[c["task"], encoder(c), str(len(c["cells"])), f"{c['max_tight_difference_points']:.2f}",
             str(c.get("over_at_reference_tol", c["tight_over_tolerance"])), settled(c), str(c["tight_over_tolerance"]),
             f"{100 * c['tight_same_choices']:.0f}%",
             number(c["max_difference_points"]), number(c["over_tolerance"], "{}"), str(c["encode_seconds"]),
             str(c["fit_seconds"]), str(c["committed_fit_seconds"]), str(c["tight_fit_seconds"]),
             str(c["tight_sklearn_seconds"])] for c in done]
    ok = all(c["tight_over_tolerance"] == 0 for c in done)
    runs = [f"`{command}`" + (f" on {m['cpu']}, {m['cpu_count']} cores, torch {m['torch']}" if m else
                              " (machine not recorded)") for command, m in commands]
    known = [m for _, m in commands if m]
    checked = {(c["task"], c["encoder"]) for c in done}
    missing = [f"{task} / {label}" for task, label in every if (task, label) not in checked]
    coverage = (f"Checked: {sum(p in checked for p in every)} of the grid's {len(every)} (task, encoder) pairs, "
                f"{sum(len(c['cells']) for c in done)} cells" +
                (f"; not checked yet: {', '.join(missing)}." if missing else ": every pair of the grid."))
    lines = ["# The batched probe fitter against scikit-learn, on the committed grid", "",
             *([f"Machine: {known[-1]['cpu']}, {known[-1]['cpu_count']} cores, one thread; torch "
                f"{known[-1]['torch']} (the latest run; each run below names its own).", ""] if known else []),
             f"Made by these runs, one after another or side by side, on {args.device}, one thread each (scores in "
             f"points, x 100; tolerance {tol}):", "", *[f"{i}. {run}" for i, run in enumerate(runs, 1)], "",
             f"- **Same features, tol {ref}**: every cell fitted by `hire.probing.fit` and by scikit-learn "
             f"(`StandardScaler` + `LogisticRegression`, or `RidgeCV`) on the same features, both at tol {ref} "
             f"(at most {args.reference_max_iter} iterations), the grid's C grid and selection: the fitter's own "
             "difference. This is the check.",
             f"- **Settled, tol {args.settle_tol:g}**: where a cell differed by more than {tol} at tol {ref}, both "
             f"fitters fitted its feature set again at tol {args.settle_tol:g} (at most "
             f"{10 * args.reference_max_iter} iterations), and the cell is judged there (*over {tol}, judged*): at "
             f"{ref} a solver can stop one example short of the optimum, an example whose decision value there is "
             "near zero, and one example more or less on the selection split can move the choice of C.",
             "- **Committed**: the batched fitter at the grid's settings (tol "
             f"{next((c['grid_tol'] for c in done), 1e-4):g}) against the committed scikit-learn score, fitted on "
             "features encoded on another machine and stopped at tol 1e-4 on its own path: both can move a "
             "borderline choice of C or a few predictions near the boundary.",
             *[f"- **Retrained** (–: nothing to compare with): {label}'s run folder is not here, so the same recipe "
               f"was trained again ({path}); other weights than the grid's, so other features: only the "
               "same-features check applies to it." for label, path in retrained], "",
             *markdown_table(["task", "encoder", "cells", f"largest difference, tol {ref}", f"over {tol}",
                              f"settled at tol {args.settle_tol:g}", f"over {tol}, judged", "same C",
                              "largest difference vs committed", f"over {tol}", "encode s",
                              "fit s", "committed fit s", f"fit s, tol {ref}", f"scikit-learn s, tol {ref}"], rows),
             "", f"Every checked cell within {tol} points of scikit-learn on the same features (at tol {ref}, or "
             f"where settled at {args.settle_tol:g}): {'yes' if ok else '**no**'}.", "", coverage, ""]
    lines += [f"- skipped {c['task']} / {c['encoder']}: {c['skipped']}" for c in checks if "skipped" in c]
    lines += ["", "## Every cell", ""]
    lines += markdown_table(["task", "encoder", "row", "pooling", "split", f"scikit-learn, tol {ref}",
                             f"new, tol {ref}", "difference", "same C", f"difference, tol {args.settle_tol:g}",
                             "committed", "new", "difference", "same C"],
                            [[c["task"], encoder(c), cell["row"], cell["pooling"], cell["split"],
                              f"{cell['sklearn_tight']:.4f}", f"{cell['new_tight']:.4f}",
                              f"{cell['tight_difference_points']:+.2f}",
                              "yes" if cell["tight_same_choice"] else "no",
                              "–" if "settled" not in cell else
                              f"{cell['settled']['difference_points']:+.2f} ({cell['settled']['sklearn']:.4f} / "
                              f"{cell['settled']['new']:.4f}, same C: "
                              f"{'yes' if cell['settled']['same_choice'] else 'no'})",
                              number(cell["committed"], "{:.4f}"), f"{cell['new']:.4f}",
                              number(cell["difference_points"], "{:+.2f}"),
                              "–" if cell["same_choice"] is None else "yes" if cell["same_choice"] else "no"]
                             for c in done for cell in c["cells"]])
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = grid_parser(__doc__, "folder for report.md and results.json")
    parser.add_argument("--tolerance", type=float, default=0.3, help="points")
    parser.add_argument("--reference_tol", type=float, default=1e-6,
                        help="both fitters' tol for the same-features comparison (the optimum)")
    parser.add_argument("--reference_max_iter", type=int, default=10000)
    parser.add_argument("--settle_tol", type=float, default=None,
                        help="where a cell differs by more than --tolerance at --reference_tol, both fitters fit its "
                        "feature set again at this tol and the cell is judged there (default: --reference_tol / 100)")
    parser.add_argument("--settle", action="store_true",
                        help="only settle the cells over --tolerance of the checks already in OUT (those of --task "
                        "and --encoder where given): no full check again")
    parser.add_argument("--retrained", action="append", default=[], metavar="LABEL=PATH",
                        help="use the encoder at PATH in the place of the grid's encoder LABEL (the same recipe "
                        "trained again where the grid's run folder is gone): the same-features check only "
                        "(repeatable)")
    args = parser.parse_args()
    try:
        return check(args)
    except (OSError, ValueError) as err:  # bad input (ConfigError, DataError are ValueErrors): one line
        if os.environ.get("HIRE_DEBUG"):
            raise
        print(f"check_probe_fitter.py: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2


def earlier(path: Path, args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[tuple[str, Any]]]:
    """The checks already in OUT (a run adds to them: a (task, encoder) checked again is replaced) and the
    commands that made them, each with its machine (None where a run did not record one)."""
    if not path.exists():
        return [], []
    try:
        old = json.loads(path.read_text())
        checks = list(old["checks"])
        commands = [(c["command"], c.get("machine")) for c in old["commands"]]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a check_probe_fitter.py results file ({err}); move it away to start "
                         "afresh") from None
    for c in checks:
        if c.get("reference_tol", args.reference_tol) != args.reference_tol:
            raise ValueError(f"{path}: checked at --reference_tol {c['reference_tol']:g}, not "
                             f"{args.reference_tol:g}; use another folder")
    return checks, commands


def record(out: Path, mine: list[dict[str, Any]], command: tuple[str, Any] | None, args: argparse.Namespace,
           every: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Write this run's checks into OUT's files, merged with what is there now: read again under a lock, so that
    two runs given the same OUT (one per core) each add their own (task, encoder) checks and neither loses the
    other's. A (task, encoder) checked again is replaced; ``command`` None: none added (nothing was fitted).
    Returns every check written."""
    folder = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)  # on the folder itself: no lock file left behind; released on close
        checks, commands = earlier(out / "results.json", args)
        done = {(c["task"], c["encoder"]) for c in mine}
        checks = [c for c in checks if (c["task"], c["encoder"]) not in done] + mine
        commands = commands + [command] * (command is not None and command not in commands)
        write_files(out, {"results.json": json.dumps({"commands": [{"command": c, "machine": m}
                                                                   for c, m in commands], "checks": checks},
                                                     indent=2) + "\n",
                          "report.md": report(checks, args, commands, every)})
    finally:
        os.close(folder)
    return checks


def retrained_encoders(given: list[str], results: dict[str, Any], path: Path) -> dict[str, str]:
    """``--retrained LABEL=PATH`` options as {label: path}, each label one of the grid's encoders."""
    labels = [e["label"] for e in results["encoders"]]
    chosen: dict[str, str] = {}
    for option in given:
        label, sep, folder = option.partition("=")
        if not sep or not folder:
            raise ValueError(f"--retrained {option}: expected LABEL=PATH")
        if label not in labels:
            raise ValueError(f"--retrained {option}: {path} has no encoder {label!r}; its encoders: "
                             f"{', '.join(labels)}")
        if not Path(folder).exists():
            raise ValueError(f"--retrained {option}: no such file or folder {folder}")
        try:
            resolve_source(folder)  # an encoder, a saved model or a run folder: named now, not skipped later
        except (ValueError, OSError) as err:
            raise ValueError(f"--retrained {option}: {err}") from None
        chosen[label] = folder
    return chosen


def check(args: argparse.Namespace) -> int:
    if not args.reference_tol > 0 or args.reference_max_iter < 1:
        raise ValueError(f"--reference_tol {args.reference_tol} / --reference_max_iter {args.reference_max_iter}: "
                         "expected positive numbers")
    if args.settle_tol is None:
        args.settle_tol = args.reference_tol / 100
    if not 0 < args.settle_tol <= args.reference_tol:
        raise ValueError(f"--settle_tol {args.settle_tol:g}: expected a positive tol no larger than --reference_tol "
                         f"{args.reference_tol:g}")
    if not args.tolerance >= 0:
        raise ValueError(f"--tolerance {args.tolerance}: expected a number of points, 0 or more")
    out, given = Path(args.out), Path(args.results)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: not a folder (report.md and results.json go into it)")
    if (out / "results.json").resolve() == given.resolve():
        raise ValueError(f"{out}: holds the --results file {given}, which this would overwrite; choose another folder")
    torch.set_num_threads(1)
    where = machine()
    results = read_grid(given)
    args.retrained = retrained_encoders(args.retrained, results, given)
    pairs = grid_pairs(results, args.task, args.encoder)
    if args.settle and not (out / "results.json").is_file():
        raise ValueError(f"{out}: no results.json of an earlier check to settle; run the check into it first")
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python", *sys.argv])
    earlier(out / "results.json", args)  # a results file of another kind or tol: refused before any work
    if args.settle:
        return settle_only(out, results, pairs, args, (command, where))
    mine: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    for task_name, label in pairs:
        mine.append({**check_one(results, task_name, label, args), "reference_tol": args.reference_tol,
                     "machine": where})
        print(f"{task_name} / {label}: " + (mine[-1].get("skipped") or
              f"largest difference {mine[-1]['max_tight_difference_points']:.2f} points at tol "
              f"{args.reference_tol:g}" + ("" if mine[-1]["max_difference_points"] is None else
                                           f", {mine[-1]['max_difference_points']:.2f} against the committed score")),
              file=sys.stderr, flush=True)
        # after every check: a run cut short keeps what it measured
        checks = record(out, mine, (command, where), args, grid_pairs(results, [], []))
    print((out / "report.md").read_text() if checks else "nothing checked")
    return 0 if all(c.get("tight_over_tolerance", 0) == 0 for c in checks) else 1


def settle_only(out: Path, results: dict[str, Any], pairs: list[tuple[str, str]], args: argparse.Namespace,
                command: tuple[str, Any]) -> int:
    """``--settle``: the over-tolerance cells of the checks already in OUT (of ``pairs``) settled, nothing else
    fitted again; each settled check is written back."""
    checks, _ = earlier(out / "results.json", args)
    mine: list[dict[str, Any]] = []
    for c in checks:
        if (c["task"], c["encoder"]) not in pairs or "cells" not in c or not any(
                abs(cell["tight_difference_points"]) > args.tolerance and "settled" not in cell for cell in c["cells"]):
            continue
        grid = grid_task(results, c["task"], c["encoder"], args.cache_dir, args.device, c.get("retrained"))
        if isinstance(grid, str):
            print(f"{c['task']} / {c['encoder']}: not settled: {grid}", file=sys.stderr, flush=True)
            continue
        c.update(summarise(c["cells"], args, settle_cells(grid, c["cells"], args)))
        print(f"{c['task']} / {c['encoder']}: {c['settled_cells']} cells settled at tol {args.settle_tol:g}, largest "
              f"difference there {c['max_final_difference_points']:.2f} points", file=sys.stderr, flush=True)
        mine.append(c)
    if not mine:  # report.md drawn again from results.json (by this version), no command added: nothing was fitted
        print("nothing to settle: no checked cell differs by more than the tolerance", file=sys.stderr)
    checks = record(out, mine, command if mine else None, args, grid_pairs(results, [], []))
    print((out / "report.md").read_text())
    return 0 if all(c.get("tight_over_tolerance", 0) == 0 for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
