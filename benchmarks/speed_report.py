"""The Markdown report of a speed-suite run, made from its ``results.json`` only.

    python benchmarks/speed_report.py benchmarks/results/cpu-2core/results.json   # re-make report.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hire.reporting import markdown_table


def _find(records: list[dict], **match: Any) -> dict | None:
    return next((r for r in records if all(r.get(k) == v for k, v in match.items())), None)


def _check(ok: bool) -> str:
    return "yes" if ok else "**no**"


def targets(records: list[dict], trainer: list[dict]) -> list[str]:
    """The issue's targets, each checked against the measured records."""
    rows = []
    lengths = list(dict.fromkeys(r["seq_len"] for r in records))
    for length in lengths:
        hire32 = _find(records, head="hire", precision="fp32", seq_len=length)
        hire16 = _find(records, head="hire", precision="bf16", seq_len=length)
        if hire32:
            limit = 1.1 * hire32["arithmetic_ratio"]
            rows.append([f"fp32 HIRE/last-layer step ratio ≤ 1.1 × arithmetic ratio, {length} tokens",
                         f"{hire32['ratio_to_last_layer']:.2f} vs {limit:.2f}",
                         _check(hire32["ratio_to_last_layer"] <= limit)])
            if length == "128":
                rows.append(["fp32 HIRE/last-layer step ratio ≤ 5.0 at 128 tokens",
                             f"{hire32['ratio_to_last_layer']:.2f}", _check(hire32["ratio_to_last_layer"] <= 5.0)])
        if hire32 and hire16:
            share = hire16["step_seconds"] / hire32["step_seconds"]
            rows.append([f"bf16 at least halves HIRE's step time, {length} tokens",
                         f"{hire16['step_seconds']:.3f} s vs {hire32['step_seconds']:.3f} s ({share:.2f})",
                         _check(share <= 0.5)])
        for precision in ("fp32", "bf16"):
            lite = _find(records, head="hire-lite", precision=precision, seq_len=length)
            if lite:
                rows.append([f"hire-lite ≤ 1.5 × last-layer, {precision}, {length} tokens",
                             f"{lite['ratio_to_last_layer']:.2f}", _check(lite["ratio_to_last_layer"] <= 1.5)])
    for t in trainer:
        rows.append([f"last-layer loop no slower than Trainer, {t['precision']}, {t['seq_len']} tokens",
                     f"{t['hire_examples_per_second']:.1f} vs {t['trainer_examples_per_second']:.1f} ex/s",
                     _check(t["speedup"] >= 0.97)])  # 3%: the timing noise of two separate runs
    return markdown_table(["target", "measured", "met"], rows)


def write_speed_report(result: dict[str, Any], path: Path) -> None:
    records, trainer, m = result["records"], result.get("trainer_comparison", []), result["machine"]
    lengths = list(dict.fromkeys(r["seq_len"] for r in records))
    heads = list(dict.fromkeys(r["head"] for r in records))
    lines = ["# Speed report", "",
             f"Machine: {m['cpu']}, {m['cores']} cores ({m['torch_threads']} torch threads)"
             + (f", GPU {m['gpu']}" if "gpu" in m else "")
             + f"; torch {m['torch']}, transformers {m['transformers']}; {m['date']}. "
             f"The suite took {result['seconds'] / 60:.1f} min: `{result['command']}`.", "",
             f"Batch {records[0]['batch_size']}; a training step is forward + backward + AdamW step; the median "
             "of the timed steps, each batch seen once before (kernels are built per shape). `cola` and `rte` "
             "are the first length-grouped training "
             "batches of those tasks (their mean padded length in brackets). Arithmetic ratio: the training "
             "step's multiply-adds (counted by `torch.utils.flop_counter`) over the last-layer head's.", "",
             "## Targets", "", *targets(records, trainer), ""]
    for precision in dict.fromkeys(r["precision"] for r in records):
        lines += [f"## Training step, {precision}: seconds (ratio to last-layer; arithmetic ratio)", ""]
        header = ["head", *[f"{n} [{_find(records, seq_len=n)['mean_tokens']:.0f}]" for n in lengths]]
        rows = []
        for head in heads:
            cells = []
            for n in lengths:
                r = _find(records, head=head, precision=precision, seq_len=n)
                cells.append(f"{r['step_seconds']:.3f} (x{r['ratio_to_last_layer']:.2f}; "
                             f"a{r['arithmetic_ratio']:.2f})" if r else "")
            rows.append([head, *cells])
        lines += [*markdown_table(header, rows), ""]
    lines += ["## Multiply-adds per example (millions), by part", ""]
    for n in lengths:
        rows = [[h, *[f"{r[f'macs_{p}'] / 1e6:.1f}" for p in ("encoder", "extractor", "fusion", "head_other",
                                                             "output", "train_step")]]
                for h in heads if (r := _find(records, head=h, seq_len=n))]
        lines += [f"{n} tokens:", "", *markdown_table(["head", "encoder (fwd)", "extractor (fwd)", "fusion (fwd)",
                                               "other head (fwd)", "output (fwd)", "training step"], rows), ""]
    lines += ["## Inference (examples/s) and peak memory of a training step (MiB above idle)", ""]
    rows = []
    for head in heads:
        for precision in dict.fromkeys(r["precision"] for r in records):
            cells = [f"{r['inference_examples_per_second']:.0f} / {r['peak_memory_mib']:.0f}"
                     if (r := _find(records, head=head, precision=precision, seq_len=n)) else "" for n in lengths]
            rows.append([head, precision, *cells])
    lines += [*markdown_table(["head", "precision", *lengths], rows), ""]
    if trainer:
        lines += ["## Last-layer training loop: hire vs Hugging Face Trainer (examples/s)", "",
                  *markdown_table(["precision", "length", "hire", "Trainer", "hire / Trainer"],
                          [[t["precision"], t["seq_len"], f"{t['hire_examples_per_second']:.1f}",
                            f"{t['trainer_examples_per_second']:.1f}", f"{t['speedup']:.2f}"] for t in trainer]), ""]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description="Re-make a speed-suite report.md from the results.json beside it.")
    parser.add_argument("results", nargs="?", type=Path, default=Path("benchmarks/results/cpu-2core/results.json"),
                        help="a results.json written by bench_heads.py (default: %(default)s)")
    source = parser.parse_args().results
    if not source.is_file():
        parser.error(f"{source}: no such file (give the results.json of a bench_heads.py run)")
    write_speed_report(json.loads(source.read_text()), source.with_name("report.md"))
    print(f"wrote {source.with_name('report.md')}")


if __name__ == "__main__":
    main()
