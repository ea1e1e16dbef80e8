"""Cross-encoder against bi-encoder (issue 47, item 5), and each head's cross-encoder (item 6, what a row costs):
candidates scored per second at inference, and a training step of each, on one machine.

    python benchmarks/bench_rankers.py                                  # all-MiniLM-L6-v2 on WikiQA dev
    python benchmarks/bench_rankers.py --heads last-layer,hire,hire-lite,scalar-mix,concat-last-4   # every head
    python benchmarks/bench_rankers.py --tiny --questions 20 --steps 2 --out /tmp/rankers-tiny   # a smoke run

Inference ranks the candidates of the first ``--questions`` questions of WikiQA's dev split (every question, as
``--data.keep all``; or, with ``--synthetic`` or without the WikiQA files, a made-up set of WikiQA's shape: 9
candidates a question, questions of 7 words, passages of 25) as hire ranks them: the cross-encoder
(:class:`hire.model.HireModel`, one per head of ``--heads``, ``last-layer`` by default) reads every (question,
passage) pair together; the bi-encoder (:class:`hire.model.BiEncoder`) encodes each distinct question and passage
once and scores every candidate from the vectors. Both through the ranking task type's own encoding and prediction
(``encode_pairs`` / ``encode_apart``, ``RANKING.predict``), batches of ``--batch_size`` items; the time is the
prediction loop's (tokenization apart, reported beside). Candidates per second = candidates / that time; the best
of ``--repeats``.

A training step (forward, loss, backward, clipping, AdamW) on batches of whole questions of at most
``--batch_size`` candidates (``QuestionBatches``, as ``hire train`` makes them; a batch is padded to its longest
pair): the cross-encoders with the pairwise hinge, the bi-encoder with in-batch negatives; one untimed step, then
``--step_repeats`` passes over the next ``--steps`` batches (the same batches for every ranker, their mean padded
length reported): each batch's fastest pass, and the median of those (a shared machine's noise only ever slows a
step down). fp32. A head's training step over the last layer's is what a fine-tuned cell of that
head costs against the last layer's on the same machine (the steps of a cell are these steps, plus evaluations).
Writes ``results.json`` and ``report.md`` (with the machine) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_common import machine_info

from hire.data.ranking import RankingExample, read_wikiqa
from hire.evaluation import eval_loader
from hire.model import build_bi_encoder, build_model, load_tokenizer
from hire.model.heads import head_names
from hire.model.sharing import markdown_table
from hire.tasks.ranking.tasktype import RANKING, QuestionBatches, RankingCollator, encode_apart, encode_pairs
from hire.tasktype import TaskData
from hire.training import make_optimizer

WORDS = ("the", "river", "tower", "city", "was", "built", "in", "north", "king", "war", "of", "a", "and", "people",
         "first", "year", "museum", "island", "capital", "known", "many", "old", "where", "who", "what", "when")


def synthetic(questions: int, seed: int = 0) -> list[RankingExample]:
    """WikiQA's shape: 9 candidates a question (one relevant), questions of 7 words, passages of 25."""
    rng = random.Random(seed)
    rows = []
    for q in range(questions):
        question = " ".join(rng.choices(WORDS, k=7))
        for c in range(9):
            rows.append(RankingExample(f"Q{q}", question, f"S{q}-{c}", " ".join(rng.choices(WORDS, k=25)),
                                       float(c == 0)))
    return rows


def tiny_encoder(folder: Path) -> str:
    """A random BERT 32 wide, 2 layers, with a word vocabulary of the synthetic words, saved in ``folder``."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=160)
    BertModel(config).save_pretrained(folder)
    BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    return str(folder)


def inference(model: Any, examples: list[RankingExample], tokenizer: Any, args: argparse.Namespace,
              bi: bool) -> dict[str, Any]:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    model = accelerator.prepare(model.eval())
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # passages cut to max_length: counted by the split
        split = (encode_apart if bi else encode_pairs)(examples, tokenizer, args.max_length, labelled=False)
    tokenize = time.perf_counter() - start
    loader = accelerator.prepare(eval_loader(split, args.batch_size, RankingCollator(tokenizer.pad_token_id)))
    seconds = min(RANKING.predict(model, loader, split, accelerator).seconds for _ in range(args.repeats))
    texts = len(split.texts()) if bi else len(split)
    return {"candidates": len(examples), "texts_encoded": texts, "seconds": round(seconds, 4),
            "tokenize_seconds": round(tokenize, 4), "candidates_per_second": round(len(examples) / seconds, 1)}


def fastest_median(passes: list[list[float]]) -> float:
    """Seconds of a step: each batch's fastest pass (``passes[k][i]``: pass k, batch i), then the median of those."""
    return statistics.median(min(times) for times in zip(*passes, strict=True))


def training_step(model: Any, examples: list[RankingExample], tokenizer: Any, args: argparse.Namespace,
                  bi: bool) -> dict[str, Any]:
    task = TaskData("bench", None, (), [], {}, options={"ranker": "bi" if bi else "cross"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        split = RANKING.encode(task, examples, tokenizer, args.max_length)
    collate = RankingCollator(tokenizer.pad_token_id)
    sampler = list(QuestionBatches(split.questions(), args.batch_size, seed=0))
    batches = [collate([split[i] for i in sampler[step % len(sampler)]]) for step in range(args.steps + 1)]
    for batch in batches:
        batch.pop("index")
    model.train()
    optimizer = make_optimizer(model.parameters(), 2e-5, (0.9, 0.98), 1e-6)

    def step(batch: dict[str, Any]) -> float:
        start = time.perf_counter()
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        return time.perf_counter() - start

    step(batches[0])  # untimed (allocations, kernels)
    timed = batches[1:]
    median = fastest_median([[step(batch) for batch in timed] for _ in range(args.step_repeats)])
    candidates = statistics.median(len(next(iter(b.values()))) for b in timed)
    padded = statistics.mean(max(v.shape[-1] for v in b.values() if v.dim() > 1) for b in timed)
    return {"batch_candidates": candidates, "step_seconds": round(median, 4), "batches": len(timed),
            "passes": args.step_repeats,
            "mean_padded_length": round(padded, 1), "candidates_per_second": round(candidates / median, 1)}


def ranker_name(head: str) -> str:
    """The cross-encoder of ``head``: ``cross-encoder`` for the last layer (as reports before ``--heads`` named it)."""
    return "cross-encoder" if head == "last-layer" else f"cross-encoder, {head}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--heads", default="last-layer",
                        help="the cross-encoders' heads, comma-separated (default: last-layer, which is always "
                             "timed: every ratio is to it)")
    parser.add_argument("--tiny", action="store_true", help="a random 2-layer BERT 32 wide instead of --encoder")
    parser.add_argument("--data_dir", default=None, help="WikiQA's folder (default: hire's)")
    parser.add_argument("--synthetic", action="store_true", help="a made-up set of WikiQA's shape")
    parser.add_argument("--questions", type=int, default=296, help="the first N dev questions (all: 296)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="training batches timed (default: 5)")
    parser.add_argument("--step_repeats", type=int, default=3,
                        help="passes over those batches; each batch's fastest counts (default: 3)")
    parser.add_argument("--out", default="benchmarks/results/rankers")
    args = parser.parse_args(argv)
    for name in ("steps", "step_repeats", "repeats", "questions", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected 1 or more, got {getattr(args, name)}")
    heads = [h.strip() for h in args.heads.split(",") if h.strip()]
    unknown = [h for h in heads if h not in head_names()]
    if not heads or unknown:
        parser.error(f"--heads: unknown head {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(head_names())}")
    heads = list(dict.fromkeys(["last-layer", *heads]))  # the last layer is every ratio's baseline
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        parser.error(f"--out: {out} is a file, not a folder")
    began = time.perf_counter()
    scratch = tempfile.TemporaryDirectory()  # the tiny encoder's folder, never among the results
    encoder = tiny_encoder(Path(scratch.name)) if args.tiny else args.encoder
    data = "synthetic (WikiQA's shape)"
    examples: list[RankingExample] | None = None
    if not args.synthetic:
        try:
            examples = read_wikiqa(args.data_dir, "dev", keep="all").examples
            data = "WikiQA dev"
        except (OSError, ValueError) as err:
            if args.data_dir is not None:  # asked for: a made-up set in its place would mislead
                parser.error(f"--data_dir: {err}")
            examples = None
    if examples is None:
        examples = synthetic(args.questions)
    kept = list(dict.fromkeys(ex.qid for ex in examples))[: args.questions]
    examples = [ex for ex in examples if ex.qid in set(kept)]
    try:
        tokenizer = load_tokenizer(encoder)
    except (OSError, ValueError) as err:
        parser.error(f"--encoder: {err}")
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine_info(), "encoder": "tiny random BERT" if args.tiny else encoder,
                               "data": data, "questions": len(kept), "candidates": len(examples),
                               "batch_size": args.batch_size, "max_length": args.max_length,
                               "command": " ".join(["benchmarks/bench_rankers.py", *(sys.argv[1:] if argv is None
                                                                                      else argv)]),
                               "rankers": {}}
    for name, head in [*((ranker_name(h), h) for h in heads), ("bi-encoder", None)]:
        torch.manual_seed(0)
        bi = head is None
        model = build_bi_encoder(encoder) if bi else build_model(encoder, head, 1, task_type="ranking",
                                                                 task_options={"rank_loss": "pairwise"})
        results["rankers"][name] = {"head": head, "inference": inference(model, examples, tokenizer, args, bi),
                                    "training_step": training_step(model, examples, tokenizer, args, bi)}
        print(name, json.dumps(results["rankers"][name]), flush=True)
    results["seconds"] = round(time.perf_counter() - began, 1)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "report.md").write_text(report(results))
    print(f"{out / 'report.md'}")
    return 0


def report(results: dict[str, Any]) -> str:
    """The report's Markdown, from ``results.json``'s contents alone."""
    m = results["machine"]
    rankers = results["rankers"]
    base = rankers.get("cross-encoder", {}).get("training_step", {}).get("step_seconds")
    rows = []
    for name, r in rankers.items():
        inf, step = r["inference"], r["training_step"]
        ratio = f"{step['step_seconds'] / base:.2f}" if base else "-"
        rows.append([name, str(inf["texts_encoded"]), f"{inf['seconds']:.3f}", f"{inf['candidates_per_second']:.1f}",
                     f"{inf['tokenize_seconds']:.3f}", f"{step['step_seconds']:.4f}", ratio,
                     f"{step['batch_candidates']:g}"])
    cross, bi = (rankers[k]["inference"]["candidates_per_second"] for k in ("cross-encoder", "bi-encoder"))
    steps = rankers["cross-encoder"]["training_step"]
    bf16 = m.get("fast_bf16_cpu")
    units = "" if bf16 is None or "gpu" in m else (", with bf16 units" if bf16 else ", no bf16 units")
    how = (f"the median of {steps['batches']} batches (mean padded length {steps['mean_padded_length']} tokens), "
           f"each its fastest of {steps.get('passes', 1)} passes" if "batches" in steps else "one batch, repeated")
    lines = ["# Cross-encoder against bi-encoder" + (", and each head" if len(rankers) > 2 else ""), "",
             f"{results['encoder']}, {results['data']}: {results['questions']} questions, {results['candidates']} "
             f"candidates; batches of {results['batch_size']}, at most {results['max_length']} tokens; fp32. "
             f"Training step: {how}.", "",
             f"Machine: {m['cpu']}{units}, {m['cores']} cores ({m['torch_threads']} torch threads)"
             + (f", {m['gpu']}" if "gpu" in m else "") + f"; torch {m['torch']}, transformers {m['transformers']}; "
             f"{m['date']}" + (f"; the benchmark took {results['seconds'] / 60:.1f} min" if "seconds" in results
                               else "") + ".", "",
             *markdown_table(["ranker", "texts encoded", "inference s", "candidates/s", "tokenize s",
                              "training step s", "step / last layer's", "step candidates"], rows, "lr"), "",
             f"The bi-encoder scores {bi / cross:.1f} x as many candidates a second as the cross-encoder here: it "
             "encodes each distinct question and passage once, the cross-encoder every pair."]
    heads = [(name, r) for name, r in rankers.items() if r.get("head") not in (None, "last-layer")]
    if heads and base:
        lines += ["", "A fine-tuned cell is its training steps plus its evaluations, so a head's training step over "
                  "the last layer's is about what its cell costs against the last layer's on one machine: here "
                  + ", ".join(f"{r['head']} {r['training_step']['step_seconds'] / base:.1f} x" for _, r in heads)
                  + "."]
    lines += ["", f"Written by `{results['command']}`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
