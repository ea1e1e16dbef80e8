"""Span heads' training step against the last layer's at 384 tokens, beside the ratio their arithmetic implies, and
the prediction throughput of hire's span pipeline against a plain transformers loop on the same model (issue 75,
item 7). transformers 5 has no ``pipeline("question-answering")``; the plain loop runs
``AutoModelForQuestionAnswering`` over the same windows and takes each window's best start and end.

    python benchmarks/bench_span_heads.py                 # all-MiniLM-L6-v2, fp32 (and bf16 where it is fast)
    python benchmarks/bench_span_heads.py --report-from benchmarks/results/cpu-2core-span-heads/results.json

A training step of :class:`hire.model.HireForQuestionAnswering` (forward, the start/end loss, backward, clipping,
AdamW) on batches of ``--batch_size`` windows of ``--length`` real sub-tokens with random answer positions; the heads
run interleaved (``bench_token_heads.interleaved_times``), the paired ratio is the median of a head's step over the
last layer's on the same batch. Arithmetic: multiply-adds of the training step (``torch.utils.flop_counter``) over
the last layer's. Throughput: the first ``--questions`` questions of SQuAD v1.1's dev split (windows of
``--length``, stride 128). Writes ``results.json`` and ``report.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import machine_info
from bench_heads import step_flops
from bench_token_heads import interleaved_times

from hire.hardware import cpu_has_fast_bf16
from hire.model import build_model, load_tokenizer
from hire.model.encoder import resolve_encoder
from hire.reporting import markdown_table
from hire.training import make_optimizer

HEADS = ("last-layer", "scalar-mix", "concat-last-4", "hire")


def batches(tokenizer: Any, length: int, batch_size: int, n: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """``n`` batches of ``length`` real sub-tokens ([CLS], random ordinary entries, [SEP]) with random answers."""
    g = torch.Generator().manual_seed(seed)
    special = set(tokenizer.all_special_ids)
    ordinary = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    out = []
    for _ in range(n):
        ids = ordinary[torch.randint(len(ordinary), (batch_size, length), generator=g)]
        ids[:, 0], ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
        start = torch.randint(1, length - 10, (batch_size,), generator=g)
        out.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
                    "start_positions": start, "end_positions": start + torch.randint(0, 8, (batch_size,), generator=g)})
    return out


def throughput(encoder: str, head: str, questions: int, length: int, precision: str) -> dict[str, float]:
    """Questions per second: hire's span pipeline (windows, model, best span over windows, characters) against a
    plain transformers loop over the same windows (the model, each window's argmax start and end)."""
    from accelerate import Accelerator

    from hire.evaluation import eval_loader
    from hire.tasks.spans.data import read_squad_dir
    from hire.tasks.spans.tasktype import LABELS, SPANS
    from hire.tasktype import TaskData

    examples = read_squad_dir(None, "1.1", "dev")[:questions]
    torch.manual_seed(0)
    model = build_model(encoder, head, 2, label_names=list(LABELS), task_type="span").eval()
    tokenizer = load_tokenizer(resolve_encoder(encoder))
    acc = Accelerator(mixed_precision=precision, cpu=True)
    task = TaskData("bench", list(LABELS), (), [], {}, {"x": examples}, options={"doc_stride": 128,
                    "max_answer_length": 30, "version": "1.1"}, type=SPANS)
    start = time.perf_counter()
    encoded = SPANS.encode(task, examples, tokenizer, length, labelled=False)
    prepared = acc.prepare(model)
    preds = SPANS.predict(prepared, acc.prepare(eval_loader(encoded, 32, SPANS.collator(tokenizer.pad_token_id))),
                          encoded, acc)
    SPANS.answers(task, preds, examples)
    hire_seconds = time.perf_counter() - start
    start = time.perf_counter()
    with torch.no_grad(), acc.autocast():
        for q in range(0, len(encoded), 32):
            batch = encoded.features[q:q + 32]
            n = max(len(f["input_ids"]) for f in batch)
            ids = torch.tensor([f["input_ids"] + [tokenizer.pad_token_id] * (n - len(f["input_ids"])) for f in batch])
            mask = torch.tensor([[1] * len(f["input_ids"]) + [0] * (n - len(f["input_ids"])) for f in batch])
            out = model(input_ids=ids, attention_mask=mask)
            out.start_logits.argmax(-1), out.end_logits.argmax(-1)
    plain_seconds = time.perf_counter() - start
    return {"questions": len(examples), "windows": len(encoded), "hire_questions_per_second": len(examples) /
            hire_seconds, "plain_questions_per_second": len(examples) / plain_seconds}


def run(args: argparse.Namespace) -> dict[str, Any]:
    tokenizer = load_tokenizer(resolve_encoder(args.encoder))
    data = batches(tokenizer, args.length, args.batch_size, 2)
    precisions = ["no", *(["bf16"] if cpu_has_fast_bf16() or torch.cuda.is_available() else [])]
    models = {}
    for head in args.heads.split(","):
        torch.manual_seed(0)
        model = build_model(args.encoder, head, 2, label_names=["start", "end"], task_type="span").train()
        models[head] = (model, make_optimizer(model.parameters(), 1e-5, (0.9, 0.98), 1e-6))
    records = []
    macs = {head: step_flops(model, data[0])[1] / 2 for head, (model, _) in models.items()}
    for precision in precisions:
        times = interleaved_times(models, data, "bf16" if precision == "bf16" else "no", args.reps, args.warmup)
        base = statistics.median(times["last-layer"])
        for head in models:
            records.append({"head": head, "precision": precision, "length": args.length,
                            "batch_size": args.batch_size, "step_seconds": statistics.median(times[head]),
                            "step_seconds_all": times[head], "ratio_to_last_layer": statistics.median(times[head]) /
                            base, "paired_ratio": statistics.median(t / b for t, b in zip(
                                times[head], times["last-layer"], strict=True)),
                            "arithmetic_ratio": macs[head] / macs["last-layer"]})
            print(records[-1]["head"], precision, round(records[-1]["step_seconds"], 3),
                  round(records[-1]["paired_ratio"], 2), flush=True)
    speed = {head: throughput(args.encoder, head, args.questions, args.length, precisions[-1])
             for head in ("last-layer", "hire")}
    return {"encoder": args.encoder, "machine": machine_info(), "records": records, "throughput": speed,
            "throughput_precision": precisions[-1], "squad_train_windows": train_windows(tokenizer, args.length)}


def train_windows(tokenizer: Any, length: int) -> int:
    """The windows of SQuAD v1.1's training split at ``length`` tokens and stride 128: the steps of an epoch are
    these over the batch size."""
    from hire.tasks.spans.data import read_squad_dir
    from hire.tasks.spans.tasktype import encode_spans

    return len(encode_spans(read_squad_dir(None, "1.1", "train"), tokenizer, length, 128, labelled=False))


def report(result: dict[str, Any]) -> str:
    windows = result["squad_train_windows"]
    rows = [[r["head"], {"no": "fp32"}.get(r["precision"], r["precision"]), f"{r['step_seconds']:.3f}",
             f"{r['paired_ratio']:.2f}", f"{r['arithmetic_ratio']:.2f}",
             f"{windows / r['batch_size'] * r['step_seconds'] / 3600:.1f}"] for r in result["records"]]
    speed = [[head, str(s["questions"]), str(s["windows"]), f"{s['hire_questions_per_second']:.1f}",
              f"{s['plain_questions_per_second']:.1f}"] for head, s in result["throughput"].items()]
    m = result["machine"]
    lines = ["# Span heads at 384 tokens: the training step and prediction throughput", "",
             f"Made by `python benchmarks/bench_span_heads.py` on {m.get('cpu')} ({m.get('cores')} cores), "
             f"{m['date']}, "
             f"{result['encoder']}; batches of {result['records'][0]['batch_size']} windows of "
             f"{result['records'][0]['length']} real tokens.", "",
             "## The training step", "",
             *markdown_table(["head", "precision", "step (s)", "x last layer (paired)", "x last layer (arithmetic)",
                              "hours per SQuAD epoch"], rows, "llr"),
             "", f"An epoch of the SQuAD v1.1 training split is {windows:,} windows of "
             f"{result['records'][0]['length']} tokens (stride 128): the last column is the step times that many "
             "batches, the time a grid cell takes per epoch on this machine.",
             "", f"## Prediction, questions per second "
             f"({ {'no': 'fp32'}.get(result['throughput_precision'], result['throughput_precision'])})", "",
             "hire's span pipeline (windows, model, the best span over every window, the answer's characters) against "
             "a plain transformers loop over the same windows (the model and each window's argmax start and end; "
             "transformers 5 has no question-answering pipeline). SQuAD v1.1 dev, the first questions.", "",
             *markdown_table(["head", "questions", "windows", "hire", "plain loop"], speed, "lr")]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--heads", default=",".join(HEADS))
    parser.add_argument("--length", type=int, default=384)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu-2core-span-heads"))
    parser.add_argument("--report-from", type=Path, default=None)
    args = parser.parse_args()
    if args.report_from:
        print(report(json.loads(args.report_from.read_text())))
        return 0
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "report.md").write_text(report(result))
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
