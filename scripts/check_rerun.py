"""Train recorded cells of an experiment again and compare the new records with the committed ones: does a re-run
of a recorded cell repeat its score on the same machine? (issue 47, "How it is checked"; it applies to every
experiment.)

Each cell is trained from scratch by ``hire experiment run EXPERIMENT --only cell=CELL`` into a scratch folder
(``--work``: its own runs and experiments folders, so nothing committed is touched), with as many threads as the
committed record says it was trained with (``OMP_NUM_THREADS``; a different count can change the order of float
additions). The two records are then compared: the best step, the number of steps, every dev evaluation along the
curve, and every metric of the final dev and held-out scores. On the same machine and software the scores should be
identical; the report says which of the record's machine facts (processor, bf16 units, torch, transformers) differ
here, where a difference would explain a different score.

    python scripts/check_rerun.py OUT --experiment configs/experiments/wikiqa-minilm.yaml \\
        --cell 'wikiqa__scalar-mix__rank_loss=pointwise__seed1' [--cell ...] [--work DIR]

OUT gets report.md and results.json; a later run adds its cells (a cell checked again is replaced).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hire.checks import report_dir_problem  # noqa: E402
from hire.hardware import machine  # noqa: E402
from hire.model.sharing import markdown_table  # noqa: E402

MACHINE_FACTS = ("cpu", "fast_bf16_cpu", "torch", "transformers", "torch_threads")


def fail(message: str) -> int:
    print(f"check_rerun.py: {message}", file=sys.stderr)
    return 2


def flat(scores: dict[str, Any], prefix: str) -> dict[str, float]:
    """``{"dev": {"map": ..}}`` -> ``{"prefix dev map": ..}`` (numbers only)."""
    out: dict[str, float] = {}
    for split, metrics in scores.items():
        for name, value in metrics.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[f"{prefix} {split} {name}"] = float(value)
    return out


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Every number both records give, side by side: the final scores, the dev curve, steps and best step."""
    a = {**flat(old["dev"], "dev"), **flat(old.get("held_out") or {}, "held-out")}
    b = {**flat(new["dev"], "dev"), **flat(new.get("held_out") or {}, "held-out")}
    for i, (p, q) in enumerate(zip(old["curve"], new["curve"], strict=False)):
        a[f"curve {i + 1} step"], b[f"curve {i + 1} step"] = float(p["step"]), float(q["step"])
        a[f"curve {i + 1} score"], b[f"curve {i + 1} score"] = float(p["score"]), float(q["score"])
    for key in ("steps", "best_step"):
        a[key], b[key] = float(old[key]), float(new[key])
    keys = sorted(set(a) | set(b))
    differences = {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}
    return {"compared": len(keys), "curve_points": [len(old["curve"]), len(new["curve"])],
            "identical": not differences and len(old["curve"]) == len(new["curve"]),
            "differences": {k: list(v) for k, v in differences.items()},
            "largest_score_difference": max((abs(x - y) for k, (x, y) in differences.items()
                                             if x is not None and y is not None and "step" not in k), default=0.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for report.md and results.json (a later run adds to them)")
    parser.add_argument("--experiment", type=Path, required=True, help="the experiment file")
    parser.add_argument("--cell", action="append", required=True, help="a recorded cell's id (repeatable)")
    parser.add_argument("--experiments_dir", type=Path, default=ROOT / "experiments",
                        help="where the committed records are")
    parser.add_argument("--work", type=Path, default=None,
                        help="scratch folder for the new run folders and records (default: a temporary one)")
    args = parser.parse_args(argv)
    if not args.experiment.is_file():
        return fail(f"--experiment {args.experiment}: file not found")
    try:
        name = yaml.safe_load(args.experiment.read_text())["name"]
    except (yaml.YAMLError, TypeError, KeyError):
        return fail(f"--experiment {args.experiment}: not an experiment file (no name)")
    records = args.experiments_dir / name / "records"
    committed: dict[str, dict[str, Any]] = {}
    for cell in args.cell:
        path = records / f"{cell}.json"
        if not path.is_file():
            return fail(f"--cell {cell}: no record {path}")
        committed[cell] = json.loads(path.read_text())
    problem = report_dir_problem(args.out, "checks")
    if problem:
        return fail(problem)
    if args.work is not None and args.work.exists() and any(args.work.iterdir()):
        return fail(f"--work {args.work} is not empty (its runs would resume instead of training from scratch)")

    here = machine()
    results_path = args.out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {"checks": []}  # ours: out_problem
    with tempfile.TemporaryDirectory(prefix="check-rerun-") as scratch:
        work = args.work or Path(scratch)
        for cell, old in committed.items():
            threads = int(old.get("machine", {}).get("torch_threads") or 1)
            env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
                   "TOKENIZERS_PARALLELISM": "false"}
            command = [sys.executable, "-m", "hire.cli", "experiment", "run", str(args.experiment), "--only",
                       f"cell={cell}", "--runs_dir", str(work / "runs"), "--experiments_dir", str(work / "experiments")]
            print(f"=== {cell}: training again with {threads} thread(s)", flush=True)
            start = time.time()
            done = subprocess.run(command, env=env, cwd=ROOT)
            if done.returncode != 0:
                return fail(f"{cell}: `hire experiment run` failed (exit {done.returncode}); nothing written")
            new = json.loads((work / "experiments" / name / "records" / f"{cell}.json").read_text())
            machines = {k: [old.get("machine", {}).get(k), new.get("machine", {}).get(k)] for k in MACHINE_FACTS}
            check = {"experiment": name, "cell": cell, "threads": threads, "seconds": round(time.time() - start, 1),
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "machine_differences": {k: v for k, v in machines.items() if v[0] != v[1]},
                     "load_average": [round(x, 2) for x in os.getloadavg()], **compare(old, new)}
            results["checks"] = [c for c in results["checks"] if (c["experiment"], c["cell"]) != (name, cell)]
            results["checks"].append(check)
            results["machine"] = here
            args.out.mkdir(parents=True, exist_ok=True)
            results_path.write_text(json.dumps(results, indent=1) + "\n")
            (args.out / "report.md").write_text(report(results))
            verdict = "identical" if check["identical"] else f"{len(check['differences'])} numbers differ"
            print(f"{cell}: {check['compared']} numbers compared, {verdict}", flush=True)
    return 0


def report(results: dict[str, Any]) -> str:
    m = results["machine"]
    rows = []
    for c in results["checks"]:
        differs = ", ".join(f"{k}: {a} here {b}" for k, (a, b) in c["machine_differences"].items()) or "none"
        rows.append([c["experiment"], f"`{c['cell']}`", str(c["threads"]), str(c["compared"]),
                     "yes" if c["identical"] else f"no ({len(c['differences'])} differ)",
                     f"{100 * c['largest_score_difference']:.2f}", differs, f"{c['seconds']:.0f}", c["date"]])
    lines = ["# Recorded cells trained again: do they repeat their scores?", "",
             f"Machine: {m['cpu']}, {m['cpu_count']} cores; torch {m['torch']}, transformers {m['transformers']}.", "",
             "`python scripts/check_rerun.py OUT --experiment EXPERIMENT --cell CELL`: each cell trained again from "
             "scratch with the committed record's thread count, and the new record compared with the committed one "
             "number by number (final dev and held-out metrics, every dev evaluation of the curve and its step, the "
             "number of steps and the best step). *Largest difference*: over the scores, x 100. *Machine "
             "differences*: the record's facts that differ here (committed, then here).", "",
             *markdown_table(["experiment", "cell", "threads", "numbers compared", "identical",
                              "largest difference", "machine differences", "seconds", "date"], rows), ""]
    for c in results["checks"]:
        if c["differences"]:
            lines += [f"## `{c['cell']}`: what differs", "",
                      *markdown_table(["number", "committed", "again"],
                                      [[k, str(a), str(b)] for k, (a, b) in c["differences"].items()]), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
