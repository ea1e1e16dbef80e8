"""A committed ``hire probe`` grid's fitting, timed again on this machine (issue 48, item 4): the batched fitter
(``hire.probing.fit``) against scikit-learn (``StandardScaler`` + ``LogisticRegression`` / ``RidgeCV``, one feature
set at a time, as ``hire probe`` fitted before), both at the grid's own settings, on the same features, one after
the other, with the same threads.

``bench_probe_fit.py`` times synthetic features of one task's shape; this times the real grid, task by task, so
that the speed-up is the grid's (pair tasks have four times wider feature sets, a regression task is ridge, and
SST-2 has 67k sentences). The features come from the feature cache, or are encoded again with the grid's
settings. ``--time_encoding`` encodes each task again into an empty cache, timed, so that the fitting can be put
beside the encoding on the same machine (issue 48: fitting should be no slower). Each (task, encoder)
is written to OUT as it finishes; a later run adds to OUT (a pair timed again is replaced), so the grid can be
timed in pieces, or in several processes with ``--task`` each, one after another.

    python benchmarks/bench_probe_grid.py OUT [--results experiments/probe-minilm/results.json] \\
        [--task MR] [--encoder pre-trained] [--threads 1] [--skip_reference | --time_encoding]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from bench_common import machine_info
from threadpoolctl import threadpool_limits

from hire.lab.files import write_files
from hire.probing.classifiers import reference_probe_feature_set
from hire.probing.fit import probe_feature_sets
from hire.probing.grid import grid_pairs, grid_parser, grid_task, read_grid
from hire.reporting import markdown_table


def time_one(results: dict[str, Any], task_name: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    grid = grid_task(results, task_name, label, args.cache_dir, args.device)  # encoding, where not cached
    if isinstance(grid, str):
        return {"task": task_name, "encoder": label, "skipped": grid}
    task = grid.task
    widths = sorted({design_width(grid, fs) for fs in grid.sets})
    out = {"task": task_name, "encoder": label, "protocol": task.protocol, "regression": task.regression,
           "pair": task.pair, "examples": {s: len(e) for s, e in task.splits.items()}, "feature_sets": len(grid.sets),
           "widths": widths, "encode_seconds": round(grid.encode_seconds, 1),
           "committed_fit_seconds": results["tasks"][task_name]["results"][label]["seconds"]["fit"],
           "committed_encode_seconds": results["tasks"][task_name]["results"][label]["seconds"]["encode"]}
    with threadpool_limits(args.threads):
        start = time.perf_counter()
        rows = probe_feature_sets(grid.features, grid.labels, grid.sets, task.metrics, task.regression, grid.probe,
                                  grid.folds, args.device)
        out["batched_seconds"] = round(time.perf_counter() - start, 1)
        if not args.skip_reference:
            start = time.perf_counter()
            refs = [reference_probe_feature_set(grid.features, grid.labels, fs, task.metrics, task.regression,
                                                grid.probe, grid.folds) for fs in grid.sets]
            out["reference_seconds"] = round(time.perf_counter() - start, 1)
            out["max_difference_points"] = round(max(
                100 * abs(r["splits"][s]["score"] - q["splits"][s]["score"])
                for r, q in zip(rows, refs, strict=True) for s in r["splits"]), 2)
    return out


def time_encoding(results: dict[str, Any], task_name: str, label: str, threads: int, device: str) -> dict[str, Any]:
    """The grid's encoding of ``task_name`` (every split, every hidden state) by ``label``, again, into an empty
    temporary cache: seconds, with the grid's settings on ``device`` (``threads`` CPU threads)."""
    with tempfile.TemporaryDirectory(prefix="bench-probe-grid-") as cache, threadpool_limits(threads):
        grid = grid_task(results, task_name, label, cache, device)
    if isinstance(grid, str):
        return {"skipped": grid}
    return {"encode_here_seconds": round(grid.encode_seconds, 1)}


def design_width(grid: Any, fs: Any) -> int:
    a, b = next(iter(grid.features.values()))
    return len(fs.layers) * a.shape[3] * (1 if b is None else 4)


def run_of(timing: dict[str, Any], commands: list[dict[str, Any]]) -> int | str:
    """The number of the run that made ``timing``: recorded since runs were numbered, else the last run whose
    command named its task."""
    if "run" in timing:
        return timing["run"]
    named = [i for i, c in enumerate(commands, 1) if f"--task {timing['task']} " in c["command"] + " "]
    return named[-1] if named else "-"


def report(timings: list[dict[str, Any]], commands: list[dict[str, Any]]) -> str:
    done = [t for t in timings if "batched_seconds" in t]
    both = [t for t in done if "reference_seconds" in t]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.1f}x" if b > 0 else "-"

    rows = [[t["task"], t["encoder"], t["protocol"] + (", pair" if t["pair"] else "")
             + (", ridge" if t["regression"] else ""),
             ", ".join(f"{k} {v}" for k, v in t["examples"].items()), f"{min(t['widths'])}-{max(t['widths'])}",
             str(t["encode_seconds"]), str(t.get("encode_here_seconds", "-")),
             str(t.get("reference_seconds", "-")), str(t["batched_seconds"]),
             ratio(t["reference_seconds"], t["batched_seconds"]) if "reference_seconds" in t else "-",
             f"{t['max_difference_points']:.2f}" if "max_difference_points" in t else "-",
             str(t["committed_fit_seconds"]), str(t["committed_encode_seconds"]),
             str(run_of(t, commands)) + (f"; {t['encode_run']}" if "encode_run" in t else "")]
            for t in done]
    last = commands[-1]["machine"]
    lines = ["# A committed probe grid's fitting, timed again: scikit-learn against the batched fitter", "",
             f"Machine: {last.get('cpu', '?')}, {last.get('cores', '?')} cores, {commands[-1]['threads']} thread(s) "
             f"for both fitters" + (f", GPU {last['gpu']} for the batched fitter and the encoding (device "
                                    f"{commands[-1].get('device')})" if "gpu" in last else "")
             + f"; torch {last.get('torch', '?')} (each run below names its own).", ""]
    lines += [f"{i}. `{c['command']}`: {c['machine'].get('cpu', '?')}, {c['machine'].get('cores', '?')} cores, "
              + (f"GPU {c['machine']['gpu']} (device {c.get('device', 'cpu')}), " if "gpu" in c["machine"] else "")
              + f"torch {c['machine'].get('torch', '?')}, {c['threads']} thread(s), {c['machine'].get('date', '?')}"
              + (f", load average before (1, 5, 15 min): {', '.join(map(str, c['load_average']))}"
                 if "load_average" in c else "") for i, c in enumerate(commands, 1)]
    lines += ["", "A load average near 2 before a run means another job shared the 2 cores: both fitters of a task "
              "ran under the same load, one after the other, so their ratio holds better than their seconds."]
    lines += ["", "Both fitters at the grid's settings (C grid, tol, iterations, protocol), on the same features, "
              "one after the other. Seconds of fitting every feature set of the task; *committed*: the grid's own "
              "fitting time (scikit-learn, on the machine that made it). Largest difference: over every cell and "
              "evaluation split, in points (x 100); at the grid's tol 1e-4 both solvers stop short of the optimum "
              "at their own points (`scripts/check_probe_fitter.py` compares them at the optimum). *Features s*: "
              "reading them from the cache here (or encoding them, where they were not cached); *committed encode "
              "s*: the grid's own encoding time (where another run had already cached a split's features, only the "
              "rest); *encoded here s*: the same features encoded again on this machine into an empty cache "
              "(`--time_encoding`, the grid's settings, the same threads), beside which fitting should not be "
              "slower.", ""]
    lines += markdown_table(["task", "encoder", "protocol", "examples", "feature widths", "features s",
                             "encoded here s", "scikit-learn s", "batched s", "speed-up", "largest difference",
                             "committed fit s", "committed encode s", "run (fitting; encoding)"], rows)
    if both:
        ref = sum(t["reference_seconds"] for t in both)
        new = sum(t["batched_seconds"] for t in both)
        cls = [t for t in both if not t["regression"]]
        lines += ["", f"Over the {len(both)} (task, encoder) pairs timed with both: scikit-learn {ref:.0f} s, batched "
                  f"{new:.0f} s: **{ratio(ref, new)}**."]
        if cls and len(cls) < len(both):
            r2, n2 = sum(t["reference_seconds"] for t in cls), sum(t["batched_seconds"] for t in cls)
            lines += [f"Classification only (logistic regression): {r2:.0f} s against {n2:.0f} s: {ratio(r2, n2)}. "
                      "Regression is ridge, in closed form in both, which cost what their matrix decompositions cost."]
        enc = sum(t["committed_encode_seconds"] for t in both)
        lines += [f"The grid's own encoding of these tasks took {enc:.0f} s on the machine that made it."]
    here = [t for t in done if "encode_here_seconds" in t]
    if here:
        fit, enc = sum(t["batched_seconds"] for t in here), sum(t["encode_here_seconds"] for t in here)
        slower = [t["task"] for t in here if t["batched_seconds"] > t["encode_here_seconds"]]
        lines += [f"Fitting against encoding, both on this machine, over the {len(here)} (task, encoder) pairs encoded "
                  f"here: the batched fitter {fit:.0f} s, encoding {enc:.0f} s: fitting "
                  f"**{'no slower' if fit <= enc else 'slower'}** ({ratio(fit, enc)} the encoding's time)"
                  + (f"; per task, fitting took longer than encoding on {', '.join(slower)}." if slower else ".")]
    lines += [f"- skipped {t['task']} / {t['encoder']}: {t['skipped']}" for t in timings if "skipped" in t]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = grid_parser(__doc__, "folder for report.md and results.json (a later run adds to them)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for both fitters")
    parser.add_argument("--skip_reference", action="store_true", help="time the batched fitter only")
    parser.add_argument("--time_encoding", action="store_true",
                        help="time encoding each task's features again into an empty cache (no fitting); the "
                             "pair must have been timed before")
    args = parser.parse_args()
    out = Path(args.out)
    try:
        if args.threads < 1:
            raise ValueError(f"--threads {args.threads}: expected 1 or more")
        if out.exists() and not out.is_dir():
            raise ValueError(f"{out}: not a folder")
        results = read_grid(args.results)
        pairs = grid_pairs(results, args.task, args.encoder)
        timings: list[dict[str, Any]] = []
        commands: list[dict[str, Any]] = []
        if args.time_encoding and args.skip_reference:
            raise ValueError("--time_encoding and --skip_reference: give one (--time_encoding fits nothing)")
        if (out / "results.json").exists():
            try:
                old = json.loads((out / "results.json").read_text())
                timings, commands = list(old["timings"]), list(old["commands"])
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{out / 'results.json'}: not this benchmark's results ({err})") from None
        timed = {(t["task"], t["encoder"]): t for t in timings}
        if args.time_encoding:  # encoding is put beside a pair's fitting: a pair not fitted yet is left out
            untimed = [f"{t} / {e}" for t, e in pairs if "batched_seconds" not in timed.get((t, e), {})]
            if len(untimed) == len(pairs):
                raise ValueError(f"--time_encoding: {', '.join(untimed)} not timed in {out} yet (time the "
                                 "fitters first)")
            if untimed:
                print(f"bench_probe_grid.py: --time_encoding leaves out {', '.join(untimed)}: not timed in {out} "
                      "yet (time the fitters first)", file=sys.stderr, flush=True)
                pairs = [(t, e) for t, e in pairs if "batched_seconds" in timed.get((t, e), {})]
    except (OSError, ValueError) as err:
        print(f"bench_probe_grid.py: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    out.mkdir(parents=True, exist_ok=True)
    commands.append({"command": " ".join(["python", *sys.argv]), "machine": machine_info(), "threads": args.threads,
                     "device": args.device,
                     "load_average": [round(v, 1) for v in os.getloadavg()]})
    for task_name, label in pairs:
        old = timed.get((task_name, label), {})
        if args.time_encoding:
            encoded = time_encoding(results, task_name, label, args.threads, args.device)
            if "skipped" in encoded:
                print(f"{task_name} / {label}: {encoded['skipped']}", file=sys.stderr, flush=True)
                continue
            timing = {**old, **encoded, "encode_run": len(commands)}
        else:  # the fitters timed again: an earlier encoding time of the pair stays
            timing = {**time_one(results, task_name, label, args), "run": len(commands),
                      **{k: v for k, v in old.items() if k in ("encode_here_seconds", "encode_run")}}
        timings = [t for t in timings if (t["task"], t["encoder"]) != (task_name, label)] + [timing]
        print(f"{task_name} / {label}: " + (timing.get("skipped") or
              f"batched {timing['batched_seconds']} s, scikit-learn {timing.get('reference_seconds', '-')} s, "
              f"encoded here {timing.get('encode_here_seconds', '-')} s"),
              file=sys.stderr, flush=True)
        write_files(out, {"results.json": json.dumps({"commands": commands, "timings": timings}, indent=2) + "\n",
                          "report.md": report(timings, commands)})
    print((out / "report.md").read_text() if timings else "nothing timed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
