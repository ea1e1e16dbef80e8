"""Speed suite: training-step time, inference throughput, memory and arithmetic of every head.

    python benchmarks/bench_heads.py                      # the full suite (about 30 min on 2 CPU cores)
    python benchmarks/bench_heads.py --heads last-layer,hire --lengths 32,128 --precisions fp32

Batch 32 on the default encoder, at fixed lengths (every token real) and on real-length batches from
CoLA and RTE (grouped by length, as training makes them), in fp32 and bf16 autocast. For each head and
setting: the median training-step time (forward, backward, AdamW step), its ratio to the last-layer
head, the multiply-adds of each part (counted by ``torch.utils.flop_counter``) and the ratio they alone
imply, inference examples/s and peak memory. Also a naive HIRE (packed sequences, a loop over hidden
states) and our last-layer training loop against Hugging Face ``Trainer``. Writes ``results.json`` (one
record per head, precision and length) and ``report.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import machine_info, make_batches, reset_accelerate
from naive_hire import make_naive
from speed_report import write_speed_report

from hire import build_model, head_names, load_tokenizer
from hire.model.recurrent import BiGRU
from hire.runtime import keep_freed_memory
from hire.training import make_optimizer


def release_freed_memory() -> None:
    """Hand freed heap back to the OS, so that resident memory measures what is live (glibc only)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def peak_rss_during(fn: Any) -> tuple[Any, float]:
    """Run ``fn``; return its result and the process's peak resident memory above the start (MiB).

    On CPU this samples the resident set every 5 ms after releasing freed memory, so it is the growth of
    live memory during ``fn`` (model, optimizer state and activations of the step), not an allocator total.
    """
    release_freed_memory()
    proc, start, peak, done = psutil.Process(), psutil.Process().memory_info().rss, [0], threading.Event()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.005)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        result = fn()
    finally:
        done.set()
        thread.join()
    if torch.cuda.is_available():
        return result, torch.cuda.max_memory_allocated() / 2**20
    return result, max(0, peak[0] - start) / 2**20


def autocast(precision: str) -> torch.autocast:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16")


def train_step_times(model: torch.nn.Module, batches: list[dict], precision: str, reps: int) -> list[float]:
    optimizer = make_optimizer(model.parameters(), 1e-5, (0.9, 0.98), 1e-6)
    model.train()
    times = []
    # Each batch is seen once before it is timed: the first step of a new shape also builds its kernels
    # (oneDNN's bf16 ones are compiled per shape), a cost that training pays once per length, not per step.
    for i in range(len(batches) + reps):
        batch = batches[i % len(batches)]
        start = time.perf_counter()
        with autocast(precision):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if i >= len(batches):
            times.append(time.perf_counter() - start)
    return times


@torch.no_grad()
def inference_rate(model: torch.nn.Module, batches: list[dict], precision: str) -> float:
    model.eval()
    for batch in batches:  # warm up every shape first, as above
        with autocast(precision):
            model(**batch)
    start, n = time.perf_counter(), 0
    for batch in batches:
        with autocast(precision):
            model(**batch)
        n += len(batch["input_ids"])
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def step_flops(model: torch.nn.Module, batch: dict) -> tuple[dict[str, float], float]:
    """FLOPs of one forward by module (depth 3, ``Global`` for the whole), and of the training step's forward and
    backward together."""
    # FlopCounterMode does not see cuDNN's RNN kernels: count the Bi-GRUs on the step-loop path (same arithmetic).
    cudnn, BiGRU.cudnn_on_cuda = BiGRU.cudnn_on_cuda, False
    try:
        counter = FlopCounterMode(display=False, depth=3)
        with counter:
            model(**batch)
        fwd = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
        counter = FlopCounterMode(display=False)
        with counter:
            model(**batch).loss.backward()
        model.zero_grad()
    finally:
        BiGRU.cudnn_on_cuda = cudnn
    return fwd, counter.get_total_flops()


def count_flops(model: torch.nn.Module, batch: dict) -> dict[str, float]:
    """Multiply-adds per example: each part's forward, and the whole training step (forward + backward)."""
    fwd, step = step_flops(model, batch)
    n = len(batch["input_ids"])
    parts = {"encoder": fwd.get("HireModel.encoder", 0), "extractor": fwd.get("HireModel.head.extractor", 0),
             "fusion": fwd.get("HireModel.head.fusion", 0), "output": fwd.get("HireModel.output", 0)}
    parts["head_other"] = fwd.get("HireModel.head", 0) - parts["extractor"] - parts["fusion"]
    result = {f"macs_{k}": v / 2 / n for k, v in parts.items()}  # a multiply-add is 2 FLOPs
    result["macs_train_step"] = step / 2 / n
    return result


def bench_heads(args: argparse.Namespace, tokenizer: Any) -> list[dict[str, Any]]:
    heads = head_names() if args.heads == "all" else args.heads.split(",")
    heads = ["last-layer", *[h for h in heads if h != "last-layer"]]
    records: list[dict[str, Any]] = []
    macs: dict[tuple[str, str], dict[str, float]] = {}
    for precision in args.precisions.split(","):
        for length in args.lengths.split(","):
            batches = make_batches(tokenizer, length, args.batch_size, args.reps, seed=0)
            mean_len = statistics.mean(b["input_ids"].shape[1] for b in batches)
            names = heads + (["hire-naive"] if args.naive and "hire" in heads else [])
            base = None
            for head in names:
                torch.manual_seed(0)
                model = build_model(args.encoder, head="hire" if head == "hire-naive" else head, num_labels=2)
                if head == "hire-naive":
                    make_naive(model.head)
                if torch.cuda.is_available():
                    model.cuda()
                    batches = [{k: v.cuda() for k, v in b.items()} for b in batches]
                times, peak = peak_rss_during(
                    lambda m=model, b=batches, p=precision: train_step_times(m, b, p, args.reps))
                if (head, length) not in macs:  # the arithmetic does not depend on the precision
                    macs[head, length] = count_flops(model, batches[0])
                rec = {"head": head, "precision": precision, "seq_len": length, "mean_tokens": mean_len,
                       "batch_size": args.batch_size, "step_seconds": statistics.median(times),
                       "step_seconds_all": times, "peak_memory_mib": round(peak, 1),
                       "inference_examples_per_second": inference_rate(model, batches, precision),
                       **macs[head, length]}
                if head == "last-layer":
                    base = rec
                rec["ratio_to_last_layer"] = rec["step_seconds"] / base["step_seconds"]
                rec["arithmetic_ratio"] = rec["macs_train_step"] / base["macs_train_step"]
                records.append(rec)
                print(f"{precision:5s} {length:>5s} {head:18s} {rec['step_seconds']:7.3f} s  "
                      f"x{rec['ratio_to_last_layer']:.2f} (arith x{rec['arithmetic_ratio']:.2f})  "
                      f"{rec['inference_examples_per_second']:7.1f} ex/s  {rec['peak_memory_mib']:7.1f} MiB",
                      flush=True)
                del model
            if args.partial:  # keep what is measured so far: a long suite can be cut short
                args.partial.write_text(json.dumps(records) + "\n")
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--heads", default="all", help="comma-separated head names, or all")
    parser.add_argument("--lengths", default="32,64,128,cola,rte", help="token counts and/or cola, rte")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3, help="timed steps per setting (each batch warmed up first)")
    parser.add_argument("--no-naive", dest="naive", action="store_false", help="skip the naive HIRE")
    parser.add_argument("--no-trainer", dest="trainer", action="store_false", help="skip the Trainer comparison")
    parser.add_argument("--gru", choices=["cudnn", "loop"], default="cudnn",
                        help="on CUDA, HIRE's Bi-GRUs run with cuDNN (the default) or the exact step loop CPUs run")
    parser.add_argument("--out", default="benchmarks/results/cpu-2core", help="folder for results.json, report.md")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    keep_freed_memory()  # as the hire command does (hire.runtime)
    BiGRU.cudnn_on_cuda = args.gru == "cudnn"
    args.partial = out / "partial.json"
    tokenizer = load_tokenizer(args.encoder)
    records = bench_heads(args, tokenizer)
    trainer = []
    if args.trainer:
        from bench_trainer import compare_with_trainer

        reset_accelerate()
        trainer = compare_with_trainer(args, tokenizer)
    args.partial.unlink(missing_ok=True)
    settings = {k: v for k, v in vars(args).items() if k != "partial"}
    result = {"machine": machine_info(), "command": " ".join(sys.argv), "seconds": round(time.time() - start),
              "settings": settings, "records": records, "trainer_comparison": trainer}
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    write_speed_report(result, out / "report.md")
    print(f"wrote {out / 'results.json'} and {out / 'report.md'} in {result['seconds']} s")


if __name__ == "__main__":
    main()
