"""Token-level heads' training step against the last layer's, beside the ratio their arithmetic implies (issue 46,
item 8).

    python benchmarks/bench_token_heads.py     # every token head; 32 and 128 tokens and CoNLL-2003; fp32 and bf16
    python benchmarks/bench_token_heads.py --encoder all-mpnet-base-v2 --out benchmarks/results/cpu-2core-token-mpnet
    python benchmarks/bench_token_heads.py --report-from benchmarks/results/cpu-2core-token-heads/results.json

A training step of :class:`hire.model.HireForTokenClassification` (forward, the token loss over every word,
backward, gradient clipping and the AdamW step of training) on batches of ``--batch_size`` sentences: at fixed
lengths (random sub-tokens, every one real and each one a word with a tag) and on the first length-grouped
batches of CoNLL-2003's NER training set, encoded and batched as ``hire train --data.task conll2003`` makes them
(``encode_tokens``, ``LengthGroupedBatches``, ``TokenCollator``). In fp32 and bf16 autocast.

The heads run interleaved: every repetition times one step of each head on the same batch, the heads' order
rotating, so that other processes on a shared machine slow all of them alike; the paired ratio (the median over
repetitions of a head's step over the last layer's on the same batch) is the figure such load moves least. Before
timing, each head runs ``--warmup`` untimed steps and one on every real-length batch (kernels are built per
shape). All heads' models live at once (about 16 bytes per parameter each, with AdamW's state).

Arithmetic ratio: the training step's multiply-adds (forward and backward, counted by ``torch.utils.flop_counter``
on the same batches) over the last-layer head's; per sentence, the forward's split into the encoder, HIRE's
extractor and fusion Bi-GRUs, the rest of the head and the output layer. Writes ``results.json`` (one record per
head, precision and length) and ``report.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig
from transformers.utils import logging as hf_logging

sys.path.insert(0, str(Path(__file__).parent))  # run as a script or imported by the tests: its neighbours
from bench_common import command_main, machine_info
from bench_heads import autocast, step_flops

from hire.checks import ConfigError, check_output_folder
from hire.config import check_encoder, check_max_length
from hire.data.batching import BOOKKEEPING_KEYS, LengthGroupedBatches
from hire.data.conll import read_conll2003, tag_names
from hire.data.examples import DataError
from hire.data.tokens import IGNORE, TokenCollator, encode_tokens
from hire.hardware import cpu_has_fast_bf16
from hire.model import build_model, load_tokenizer
from hire.model.encoder import resolve_encoder
from hire.model.heads import build_head, head_names
from hire.reporting import markdown_table
from hire.runtime import KERNEL_CACHE_VAR, keep_freed_memory
from hire.training import make_optimizer

TOKEN_HEADS = ("last-layer", "scalar-mix", "concat-last-4", "hire", "hire-lite")
PRECISIONS = ("fp32", "bf16")
REAL = "conll"  # the setting name of CoNLL-2003's real-length batches
NER_TAGS = 9  # CoNLL-2003 NER in IOB2: O, and B-/I- of four types (the fixed lengths' tag count without the data)
PARTS = ("encoder", "extractor", "fusion", "head_other", "output")
Batch = dict[str, torch.Tensor]


# -- options -------------------------------------------------------------------------------------------------------
def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--heads", default=",".join(TOKEN_HEADS), help="comma-separated token heads (last-layer "
                        "is always timed: every ratio divides by it)")
    parser.add_argument("--lengths", default="32,128", help="fixed lengths in sub-tokens, comma-separated")
    parser.add_argument("--no-real", dest="real", action="store_false", help="skip CoNLL-2003's real-length batches")
    parser.add_argument("--data_dir", default=None, help="CoNLL-2003's folder (default: ../shared/data/conll2003)")
    parser.add_argument("--max_length", type=int, default=128, help="sub-tokens per CoNLL-2003 window, as training")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--batch_size", type=int, default=32, help="sentences per step")
    parser.add_argument("--reps", type=int, default=5, help="timed steps per head and setting")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per head and setting before timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/cpu-2core-token-heads",
                        help="folder for results.json and report.md")
    parser.add_argument("--report-from", dest="report_from", default=None, metavar="RESULTS_JSON",
                        help="only re-make report.md beside this results.json")
    return parser.parse_args(argv)


def _names(value: str, option: str) -> list[str]:
    names = [v.strip() for v in value.split(",")]
    if not all(names):
        raise ConfigError(f"{option} {value!r}: an empty name in the list")
    if len(set(names)) != len(names):
        raise ConfigError(f"{option} {value!r}: a name is given twice")
    return names


def check_options(args: argparse.Namespace) -> None:
    """Every option checked before anything is built or written; :class:`ConfigError` naming the option."""
    for option in ("batch_size", "reps", "max_length"):
        if getattr(args, option) < 1:
            raise ConfigError(f"--{option} {getattr(args, option)}: must be at least 1")
    if args.warmup < 0:
        raise ConfigError(f"--warmup {args.warmup}: must be 0 or more")
    heads = _names(args.heads, "--heads")
    known = head_names()
    for head in heads:
        if head not in known:
            raise ConfigError(f"--heads: unknown head {head!r}; the token heads are {', '.join(TOKEN_HEADS)}")
        try:
            build_head(head, 8, 13).check_tokens()  # a head's per-token form does not depend on its sizes
        except ValueError as err:
            raise ConfigError(f"--heads {head}: {err}") from None
    args.head_list = ["last-layer", *[h for h in heads if h != "last-layer"]]
    lengths = _names(args.lengths, "--lengths") if args.lengths.strip() else []
    for length in lengths:
        if not length.isdigit() or int(length) < 3:
            raise ConfigError(f"--lengths: {length!r} is not a length; give whole numbers of sub-tokens, at least 3 "
                              "(the two special tokens and a word)")
    args.settings = lengths + ([REAL] if args.real else [])
    if not args.settings:
        raise ConfigError("--lengths: empty, and --no-real leaves nothing to time")
    args.precision_list = _names(args.precisions, "--precisions")
    for precision in args.precision_list:
        if precision not in PRECISIONS:
            raise ConfigError(f"--precisions: {precision!r}; use {' and/or '.join(PRECISIONS)}")
    check_encoder(args.encoder, "--encoder")
    config = AutoConfig.from_pretrained(resolve_encoder(args.encoder))
    for length in lengths:
        check_max_length(int(length), config, "--lengths")
    if args.real:
        check_max_length(args.max_length, config, "--max_length")
    check_output_folder(args.out, "--out")


# -- batches ---------------------------------------------------------------------------------------------------------
def fixed_batches(tokenizer: Any, length: int, batch_size: int, n: int, num_tags: int, seed: int) -> list[Batch]:
    """``n`` batches of ``length`` sub-tokens, every one real: [CLS], random ordinary vocabulary entries, [SEP].
    Each sub-token between the special tokens is a word of its own, with a random tag.

    (``bench_common.make_batches`` labels sentences, and draws ids above 1000, beyond a small test vocabulary.)"""
    g = torch.Generator().manual_seed(seed)
    special = set(tokenizer.all_special_ids)
    ordinary = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    inner = length - 2
    batches = []
    for _ in range(n):
        ids = ordinary[torch.randint(len(ordinary), (batch_size, length), generator=g)]  # (B, n)
        ids[:, 0], ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
        labels = torch.full((batch_size, length), IGNORE)
        labels[:, 1:-1] = torch.randint(num_tags, (batch_size, inner), generator=g)
        word_ids = torch.full((batch_size, length), -1)
        word_ids[:, 1:-1] = torch.arange(inner)
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids),
                        "token_type_ids": torch.zeros_like(ids), "labels": labels, "word_ids": word_ids})
    return batches


def conll_batches(examples: Sequence[Any], tags: list[str], tokenizer: Any, max_length: int, batch_size: int,
                  n: int, seed: int) -> list[Batch]:
    """The first ``n`` batches of a training epoch on CoNLL-2003 (seed ``seed``), made as ``hire train`` makes them:
    one scored sub-token per word (the first), windows of ``max_length``, length-grouped batches."""
    split = encode_tokens(examples, tokenizer, max_length, tags, subword="first", context="sentence")
    collate = TokenCollator(tokenizer.pad_token_id)
    batches = []
    for indices in LengthGroupedBatches(split.lengths, batch_size, shuffle=True, seed=seed):
        batch = collate([split[i] for i in indices])
        batches.append({k: v for k, v in batch.items() if k not in BOOKKEEPING_KEYS})
        if len(batches) == n:
            break
    return batches


# -- measurement -----------------------------------------------------------------------------------------------------
def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, precision: str) -> float:
    """One training step as ``hire train`` takes it (forward, loss, backward, clipping, AdamW); its seconds."""
    start = time.perf_counter()
    with autocast(precision):
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def interleaved_times(models: dict[str, tuple[torch.nn.Module, torch.optim.Optimizer]], batches: list[Batch],
                      precision: str, reps: int, warmup: int) -> dict[str, list[float]]:
    """Per head, the seconds of ``reps`` steps, one step of every head per repetition on the same batch (the heads'
    order rotating by one each time). Untimed first: ``warmup`` steps per head, and at least one on every batch."""
    heads = list(models)
    for i in range(max(warmup, len(batches))):
        for head in heads:
            train_step(*models[head], batches[i % len(batches)], precision)
    times: dict[str, list[float]] = {head: [] for head in heads}
    for r in range(reps):
        k = r % len(heads)
        for head in heads[k:] + heads[:k]:
            times[head].append(train_step(*models[head], batches[r % len(batches)], precision))
    return times


def count_macs(model: torch.nn.Module, batch: Batch) -> dict[str, float]:
    """Multiply-adds per sentence: each part's forward, and the whole training step (forward + backward).

    A token model's head runs through ``Head.tokens``, not its own ``forward``, so the module tracker never enters
    the head itself: its part other than the Bi-GRUs is the forward's total less the parts it does see. (The
    sentence suite's ``bench_heads.count_flops`` reads ``HireModel``'s module names, hence this token form.)"""
    root = type(model).__name__
    forward, step = step_flops(model, batch)
    parts = {p: forward.get(f"{root}.{name}", 0) for p, name in
             (("encoder", "encoder"), ("extractor", "head.extractor"), ("fusion", "head.fusion"),
              ("output", "output"))}
    parts["head_other"] = forward.get("Global", 0) - sum(parts.values())
    sentences = len(batch["input_ids"])
    macs = {f"macs_{p}": parts[p] / 2 / sentences for p in PARTS}  # a multiply-add is 2 FLOPs
    macs["macs_train_step"] = step / 2 / sentences
    return macs


def mean_macs(model: torch.nn.Module, batches: list[Batch]) -> dict[str, float]:
    """:func:`count_macs` averaged over ``batches``, counted once per distinct shape (a batch's arithmetic is its
    shape's)."""
    counted: dict[tuple[int, ...], dict[str, float]] = {}
    for b in batches:
        shape = tuple(b["input_ids"].shape)
        if shape not in counted:
            counted[shape] = count_macs(model, b)
    per_batch = [counted[tuple(b["input_ids"].shape)] for b in batches]
    return {k: statistics.mean(c[k] for c in per_batch) for k in per_batch[0]}


def build_models(args: argparse.Namespace, num_tags: int) -> dict[str, tuple[torch.nn.Module, torch.optim.Optimizer]]:
    """Every head's token model (from the same seed) and its AdamW, as training makes it."""
    models = {}
    for head in args.head_list:
        torch.manual_seed(args.seed)
        model = build_model(args.encoder, head, num_tags, task_type="token")
        if torch.cuda.is_available():
            model.cuda()
        models[head] = (model.train(), make_optimizer(model.parameters(), 1e-5, (0.9, 0.98), 1e-6))
    return models


def bench(args: argparse.Namespace, models: dict[str, tuple[torch.nn.Module, torch.optim.Optimizer]],
          batches: dict[str, list[Batch]], partial: Path) -> list[dict[str, Any]]:
    """Every setting's records: per precision and length, each head's step times, ratios and multiply-adds."""
    records: list[dict[str, Any]] = []
    macs: dict[tuple[str, str], dict[str, float]] = {}
    for precision in args.precision_list:
        for length, setting in batches.items():
            times = interleaved_times(models, setting, precision, args.reps, args.warmup)
            base = statistics.median(times["last-layer"])
            real = [float(b["attention_mask"].sum()) / b["attention_mask"].numel() for b in setting]
            for head, (model, _) in models.items():
                if (head, length) not in macs:  # the arithmetic does not depend on the precision
                    macs[head, length] = mean_macs(model, setting)
                step = statistics.median(times[head])
                rec = {"head": head, "precision": precision, "seq_len": length, "batch_size": args.batch_size,
                       "mean_tokens": statistics.mean(b["input_ids"].shape[1] for b in setting),
                       "real_token_share": statistics.mean(real), "step_seconds": step,
                       "step_seconds_all": times[head], "ratio_to_last_layer": step / base,
                       "paired_ratio": statistics.median(t / b for t, b in zip(times[head], times["last-layer"],
                                                                               strict=True)),
                       **macs[head, length]}
                rec["arithmetic_ratio"] = rec["macs_train_step"] / macs["last-layer", length]["macs_train_step"]
                records.append(rec)
                print(f"{precision:5s} {length:>6s} {head:14s} {step:7.3f} s  x{rec['ratio_to_last_layer']:.2f} "
                      f"(paired x{rec['paired_ratio']:.2f}; arith x{rec['arithmetic_ratio']:.2f})", flush=True)
            partial.write_text(json.dumps(records) + "\n")  # a long run cut short keeps what it measured
    return records


# -- report ----------------------------------------------------------------------------------------------------------
def _find(records: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    return next((r for r in records if all(r.get(k) == v for k, v in match.items())), None)


def _setting(r: dict[str, Any]) -> str:
    return f"{r['precision']}, {'CoNLL-2003' if r['seq_len'] == REAL else r['seq_len'] + ' tokens'}"


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"x{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"x{low:.2f} to x{high:.2f}"


def findings(records: list[dict[str, Any]], machine: dict[str, Any]) -> list[str]:
    """What the numbers show, in sentences made from them."""
    lines = []
    heads = [h for h in dict.fromkeys(r["head"] for r in records) if h != "last-layer"]
    for head in heads:
        rs = [r for r in records if r["head"] == head]
        gaps = [r["paired_ratio"] / r["arithmetic_ratio"] for r in rs]
        widest = rs[max(range(len(rs)), key=lambda i: abs(gaps[i] - 1))]
        median_gap = statistics.median(gaps)
        lines.append(
            f"- {head}: a training step takes {_span([r['paired_ratio'] for r in rs])} the last layer's (paired) "
            f"over {len(rs)} setting{'s' if len(rs) > 1 else ''}, where the multiply-adds alone imply "
            f"{_span([r['arithmetic_ratio'] for r in rs])}: {median_gap:.2f} times the arithmetic ratio"
            + (f" at the median, {widest['paired_ratio'] / widest['arithmetic_ratio']:.2f} times in the widest case "
               f"({_setting(widest)})" if len(rs) > 1 else f" ({_setting(widest)})")
            + f"; {'slower' if median_gap > 1 else 'faster'} than its arithmetic alone implies.")
    longest = max((r for r in records if r["seq_len"] != REAL), key=lambda r: int(r["seq_len"]), default=None)
    for head in heads:
        r = _find(records, head=head, seq_len=longest["seq_len"]) if longest else None
        if r and r["macs_extractor"] + r["macs_fusion"] > 0:
            forward = sum(r[f"macs_{p}"] for p in PARTS)
            share = 100 * (r["macs_extractor"] + r["macs_fusion"]) / forward
            lines.append(f"- {head}'s Bi-GRUs (extractor and fusion) are {share:.0f}% of its forward multiply-adds at "
                         f"{r['seq_len']} tokens.")
    if {"fp32", "bf16"} <= {r["precision"] for r in records}:
        shares = {}
        for head in dict.fromkeys(r["head"] for r in records):
            pairs = [(b["step_seconds"], f["step_seconds"]) for b in records if b["head"] == head
                     and b["precision"] == "bf16" and (f := _find(records, head=head, precision="fp32",
                                                                  seq_len=b["seq_len"]))]
            shares[head] = statistics.median(b / f for b, f in pairs)
        units = "has" if machine.get("fast_bf16_cpu") else "has no"
        where = f"the GPU ({machine['gpu']})" if "gpu" in machine else f"this CPU ({units} bf16 units)"
        lines.append("- bf16 autocast against fp32 on " + where + ", median step-time ratio over lengths: "
                     + ", ".join(f"{h} {s:.2f}" for h, s in shares.items()) + ".")
    return lines


def _column(r: dict[str, Any]) -> str:
    """A setting's column: a fixed length, or the real batches' mean padded length and share of real tokens."""
    if r["seq_len"] != REAL:
        return r["seq_len"]
    return f"{REAL} [{r['mean_tokens']:.0f}, {100 * r['real_token_share']:.0f}% real]"


def report(result: dict[str, Any]) -> str:
    """The Markdown report, from ``results.json``'s content only."""
    records, m = result["records"], result["machine"]
    settings = list(dict.fromkeys(r["seq_len"] for r in records))
    heads = list(dict.fromkeys(r["head"] for r in records))
    load = ", ".join(f"{v:.1f}" for v in result["load_average_before"])
    bf16 = "GPU " + m["gpu"] if "gpu" in m else "bf16 units: " + ("yes" if m.get("fast_bf16_cpu") else "no")
    s = result["settings"]
    lines = [
        "# Token-level heads: training step against the last layer", "",
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['torch_threads']} torch threads), {bf16}; torch {m['torch']}, "
        f"transformers {m['transformers']}; {m['date']}; load average before (1, 5, 15 min): {load}. The benchmark "
        f"took {result['seconds'] / 60:.1f} min: `{result['command']}`.", "",
        f"{s['encoder']}, `HireForTokenClassification`, batches of {s['batch_size']} sentences. A step: forward, the "
        "token loss over every word, backward, clipping and the AdamW step. Fixed lengths: every sub-token real and "
        f"each a word; `{REAL}`: the first length-grouped CoNLL-2003 NER training batches (windows of "
        f"{s['max_length']}), as training makes them (their mean padded length and share of real sub-tokens in "
        f"brackets). Heads interleaved, {s['reps']} timed steps each after {s['warmup']} untimed (and one on every "
        "real-length batch). Cells: the "
        "median step in seconds (its ratio to last-layer's median; paired: the median over repetitions of the ratio "
        "on the same batch; arith: the ratio of the training step's multiply-adds, `torch.utils.flop_counter`).", "",
        "## What it shows", "", *findings(records, m), ""]
    for precision in dict.fromkeys(r["precision"] for r in records):
        lines += [f"## Training step, {precision}", ""]
        header = ["head", *[_column(_find(records, seq_len=n)) for n in settings]]
        rows = [[head, *[f"{r['step_seconds']:.3f} (x{r['ratio_to_last_layer']:.2f}; paired "
                         f"x{r['paired_ratio']:.2f}; arith x{r['arithmetic_ratio']:.2f})"
                         if (r := _find(records, head=head, precision=precision, seq_len=n)) else "" for n in settings]]
                for head in heads]
        lines += [*markdown_table(header, rows), ""]
    lines += ["## Multiply-adds per sentence (millions), by part", ""]
    for n in settings:
        rows = [[h, *[f"{r[f'macs_{p}'] / 1e6:.1f}" for p in (*PARTS, "train_step")]]
                for h in heads if (r := _find(records, head=h, seq_len=n))]
        lines += [f"{n}:", "", *markdown_table(["head", "encoder (fwd)", "extractor (fwd)", "fusion (fwd)",
                                                "other head (fwd)", "output (fwd)", "training step"], rows), ""]
    return "\n".join(lines)


RESULT_KEYS = ("machine", "command", "seconds", "load_average_before", "settings", "records")


def load_results(path: Path) -> dict[str, Any]:
    """A results.json this benchmark wrote; :class:`ConfigError` naming ``--report-from`` for anything else."""
    where = f"--report-from {path}"
    if not path.is_file():
        raise ConfigError(f"{where}: no such file (give a results.json of this benchmark)")
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{where}: not JSON ({err})") from None
    missing = [k for k in RESULT_KEYS if k not in result] if isinstance(result, dict) else list(RESULT_KEYS)
    if missing or not result["records"]:
        raise ConfigError(f"{where}: not a results.json of bench_token_heads.py (missing "
                          f"{', '.join(missing) or 'records'})")
    return result


# -- command ---------------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace, argv: Sequence[str]) -> None:
    if args.report_from:
        source = Path(args.report_from)
        result = load_results(source)
        source.with_name("report.md").write_text(report(result))
        print(f"wrote {source.with_name('report.md')}")
        return
    check_options(args)
    started, load_before = time.perf_counter(), os.getloadavg()
    conll = None
    if args.real:  # read (and checked) before any model is built
        try:
            examples = list(read_conll2003(args.data_dir, "train").examples)
        except DataError as err:  # the reader names the hire command's option; this script's is --data_dir
            raise DataError(str(err).replace("--data.data_dir", "--data_dir")) from None
        conll = (examples, tag_names(examples))
    keep_freed_memory()  # as the hire command does (hire.runtime)
    hf_logging.disable_progress_bar()  # one bar per model loaded says nothing in the benchmark's log
    tokenizer = load_tokenizer(args.encoder, words=True)
    num_tags = len(conll[1]) if conll else NER_TAGS
    models = build_models(args, num_tags)
    device = next(models["last-layer"][0].parameters()).device
    batches = {}
    for length in args.settings:
        made = (conll_batches(*conll, tokenizer, args.max_length, args.batch_size, args.reps, args.seed)
                if length == REAL and conll else
                fixed_batches(tokenizer, int(length), args.batch_size, args.reps, num_tags, args.seed))
        batches[length] = [{k: v.to(device) for k, v in b.items()} for b in made]
    out = Path(args.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)  # only now: everything above is checked
    partial = out / "partial.json"
    records = bench(args, models, batches, partial)
    partial.unlink(missing_ok=True)
    settings = {k: getattr(args, k) for k in ("encoder", "heads", "lengths", "real", "data_dir", "max_length",
                                              "precisions", "batch_size", "reps", "warmup", "seed")}
    result = {"machine": {**machine_info(), "fast_bf16_cpu": cpu_has_fast_bf16()},
              "environment": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", KERNEL_CACHE_VAR)},
              "command": " ".join(["python benchmarks/bench_token_heads.py", *argv]),
              "seconds": round(time.perf_counter() - started), "load_average_before": load_before,
              "load_average_after": os.getloadavg(), "settings": settings, "records": records}
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "report.md").write_text(report(result))
    print(f"wrote {out / 'results.json'} and {out / 'report.md'} in {result['seconds']} s")


def main(argv: Sequence[str] | None = None) -> int:
    """The command: 0 when the benchmark ran, 2 (and one line on stderr, nothing written) for bad input."""
    return command_main("bench_token_heads", parse_options, run, argv)


if __name__ == "__main__":
    sys.exit(main())
