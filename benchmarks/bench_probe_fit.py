"""Probe fitting (issue 48, item 4): scikit-learn, one feature set at a time (the reference, as ``hire probe`` fitted
before), against the batched PyTorch fitter (``hire.probing.fit``), on the same features.

The features are synthetic, of a real grid's shape: N examples, ``states`` hidden states x 4 poolings of width d
plus the concatenations (first + last, last four, all), pooled vectors that are correlated and carry the class
more in some states than in others, rounded to float16 as the cache stores them. The default is the shape of
``experiments/probe-minilm``'s MR (10,662 examples, 7 states, d = 384, 10-fold cross-validation). Both fitters run
the same protocol on one CPU thread (or the batched one on ``--device``); the report gives each one's seconds, the
speed-up and the largest score difference over the cells.

    python benchmarks/bench_probe_fit.py [--examples 10662] [--states 7] [--dim 384] [--classes 2] \\
        [--protocol cv] [--device cpu] [--threads 1] [--out benchmarks/results/cpu-2core-probe-fit]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_common import machine_info
from threadpoolctl import threadpool_limits

from hire.probing.classifiers import ProbeSettings, cv_folds, feature_sets, reference_probe_feature_set
from hire.probing.fit import probe_feature_sets
from hire.reporting import markdown_table


def synthetic(n: int, states: int, d: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features (n, states, 4, d) and labels (n,): a shared low-rank part, class means growing with depth, noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    centers = rng.normal(size=(classes, d)) / np.sqrt(d) * 4
    shared = rng.normal(size=(n, 16)) @ rng.normal(size=(16, d))
    a = np.empty((n, states, 4, d), dtype=np.float16)
    for layer in range(states):
        for p in range(4):
            signal = (0.2 + 0.8 * layer / max(1, states - 1)) * (1 - 0.15 * p)
            a[:, layer, p] = shared + signal * centers[y] + rng.normal(size=(n, d))
    a[:, 0, 0] = 1.0  # the embeddings' CLS: the same vector for every sentence
    return a, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10662)
    parser.add_argument("--states", type=int, default=7, help="hidden states (embeddings + layers)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--protocol", choices=("cv", "split"), default="cv",
                        help="cv: 10-fold cross-validation; split: train on 80%%, report the rest")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--device", default="cpu", help="the batched fitter's device")
    parser.add_argument("--skip_reference", action="store_true", help="time the batched fitter only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for both fitters (BLAS and torch)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timings of each fitter, interleaved (reference, batched, reference, ...)")
    parser.add_argument("--out", default="benchmarks/results/cpu-2core-probe-fit")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    a, y = synthetic(args.examples, args.states, args.dim, args.classes, args.seed)
    settings = ProbeSettings(folds=args.folds, seed=args.seed)
    sets = feature_sets(args.states)
    if args.protocol == "cv":
        features, labels, folds = {"all": (a, None)}, {"all": y}, cv_folds(y, args.folds, False, args.seed)
    else:
        cut = int(0.8 * len(y))
        features, labels, folds = {"train": (a[:cut], None), "dev": (a[cut:], None)}, {"train": y[:cut],
                                                                                       "dev": y[cut:]}, None
    record: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "machine": machine_info(),
                              "shape": {"examples": args.examples, "states": args.states, "dim": args.dim,
                                        "classes": args.classes, "feature_sets": len(sets),
                                        "protocol": args.protocol, "folds": args.folds if folds else None},
                              "device": args.device, "threads": args.threads}
    batched, reference = [], []
    with threadpool_limits(args.threads):
        for _ in range(args.repeats):  # interleaved, so that the machine's other load hits both
            if not args.skip_reference:
                start = time.perf_counter()
                ref = [reference_probe_feature_set(features, labels, fs, ("accuracy",), False, settings, folds)
                       for fs in sets]
                reference.append(time.perf_counter() - start)
            start = time.perf_counter()
            ours = probe_feature_sets(features, labels, sets, ("accuracy",), False, settings, folds, args.device)
            batched.append(time.perf_counter() - start)
    record["batched_seconds"] = min(batched)
    record["batched_runs"] = batched
    if reference:
        record["reference_seconds"] = min(reference)
        record["reference_runs"] = reference
    split = "cv" if folds else "dev"
    cells = [{"row": o["row"], "pooling": o["pooling"], "batched": o["splits"][split]["score"],
              "not_converged": o["not_converged"]} for o in ours]
    if not args.skip_reference:
        for cell, r in zip(cells, ref, strict=True):
            cell["reference"] = r["splits"][split]["score"]
            cell["reference_not_converged"] = r["not_converged"]
        same = [o["chosen"] == r["chosen"] for o, r in zip(ours, ref, strict=True)]
        record["speedup"] = record["reference_seconds"] / record["batched_seconds"]
        record["max_difference_points"] = max(100 * abs(c["batched"] - c["reference"]) for c in cells)
        record["same_choices"] = float(np.mean(same))
    record["cells"] = cells
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "report.md").write_text(report(record))
    print(report(record))


def report(record: dict[str, Any]) -> str:
    m, shape = record["machine"], record["shape"]
    rows = [["batched (hire.probing.fit)", f"{record['batched_seconds']:.1f}", record["device"]]]
    if "reference_seconds" in record:
        rows.insert(0, ["scikit-learn, one set at a time", f"{record['reference_seconds']:.1f}", "cpu"])
    lines = ["# Probe fitting: scikit-learn against the batched fitter", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, {record['threads']} thread(s) for both fitters"
             + (f", GPU {m['gpu']}" if "gpu" in m else "")
             + f"; torch {m['torch']}; {m['date']}. `{record['command']}`", "",
             f"Synthetic features: {shape['examples']} examples, {shape['states']} hidden states x 4 poolings of "
             f"width {shape['dim']} and the concatenations ({shape['feature_sets']} feature sets), "
             f"{shape['classes']} classes, protocol {shape['protocol']}"
             + (f" ({shape['folds']} folds)" if shape["folds"] else "") + ".", "",
             *markdown_table(["fitter", "seconds", "device"], rows), "",
             "Seconds: the fastest of the interleaved runs (reference: "
             + ", ".join(f"{s:.1f}" for s in record.get("reference_runs", [])) + "; batched: "
             + ", ".join(f"{s:.1f}" for s in record["batched_runs"]) + ").", ""]
    if "speedup" in record:
        lines += [f"Speed-up: {record['speedup']:.1f}x. Largest score difference over the cells: "
                  f"{record['max_difference_points']:.2f} points; the same C chosen in "
                  f"{100 * record['same_choices']:.0f}% of the feature sets.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
