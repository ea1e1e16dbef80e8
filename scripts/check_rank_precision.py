"""Rescore saved cross-encoder rankers in three precisions: how much did bf16 scores move a recorded ranking number?
(issue 73, item 2.)

Before issue 73 the output layer that gives a ranker its score ran under autocast, so a ranker trained or scored in
bf16 gave its candidates scores rounded to 8 bits of mantissa: distinct candidates tied, and the tie rule (``pid``
descending) ordered them, not the model. The output layer now runs in float32 under every precision. Each saved
model (``--model RUN/best``, repeatable) is scored on WikiQA's dev and test splits (has-positive questions, as the
committed grid) three ways, from the same weights:

- ``bf16 output``: autocast bf16 with the output layer inside it, as every committed WikiQA record was scored (the
  old forward, restated here for this comparison only);
- ``bf16, fp32 output``: autocast bf16 with today's float32 output layer (what ``--train.mixed_precision auto``
  now gives on a CPU with bf16 units);
- ``fp32``: no autocast.

For each: distinct scores, candidates in a tie, questions with a tie, MAP, MRR and P@1 (ir-measures, as hire
reports them). OUT gets results.json and report.md, with the machine and the time taken.

    python scripts/check_rank_precision.py OUT --model runs/wikiqa-ll/best [--model ...] [--data_dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import yaml  # noqa: E402

from hire.checks import report_dir_problem  # noqa: E402
from hire.data.ranking import read_wikiqa  # noqa: E402
from hire.hardware import machine  # noqa: E402
from hire.metrics import ranking_metrics  # noqa: E402
from hire.model import HireModel, OutputLayer, load_tokenizer  # noqa: E402
from hire.model.sharing import markdown_table  # noqa: E402
from hire.tasks.ranking.tasktype import RankingCollator, encode_pairs  # noqa: E402

KEY = "hire-check-rank-precision/1"
MODES = ("bf16 output", "bf16, fp32 output", "fp32")
_today = OutputLayer.forward


def _bf16_output(self: OutputLayer, c: torch.Tensor) -> torch.Tensor:
    """The output layer's forward before issue 73: inside autocast, so its products (and the score) are bf16."""
    return self.out(self.dropout(torch.tanh(self.dense(self.dropout(c)))))


@torch.no_grad()
def score(model: HireModel, split: Any, pad_id: int, mode: str, batch_size: int) -> list[float]:
    """Every candidate's score in ``mode``, in example order (batches of similar length, longest first)."""
    OutputLayer.forward = _bf16_output if mode == "bf16 output" else _today  # type: ignore[method-assign]
    try:
        order = sorted(range(len(split)), key=lambda i: -split.lengths[i])
        collate, out = RankingCollator(pad_id), [0.0] * len(split)
        for start in range(0, len(order), batch_size):
            items = [split[i] for i in order[start : start + batch_size]]
            batch = collate(items)
            inputs = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode != "fp32"):
                logits = model(**inputs).logits.float()
            for item, s in zip(items, logits.reshape(-1).tolist(), strict=True):
                out[item["index"]] = s
        return out
    finally:
        OutputLayer.forward = _today  # type: ignore[method-assign]


def ties(examples: list[Any], scores: list[float]) -> dict[str, int]:
    """Distinct scores, candidates that share their score with another of their question, questions with a tie."""
    per_question: dict[str, Counter[float]] = {}
    for ex, s in zip(examples, scores, strict=True):
        per_question.setdefault(ex.qid, Counter())[s] += 1
    tied = sum(n for c in per_question.values() for n in c.values() if n > 1)
    return {"distinct": len(set(scores)), "candidates": len(scores), "tied": tied,
            "questions_with_a_tie": sum(any(n > 1 for n in c.values()) for c in per_question.values()),
            "questions": len(per_question)}


def run_max_length(model_dir: Path) -> int:
    """The run's ``data.max_length`` (its ``config.yaml`` beside ``best/``), else the committed grid's 128."""
    config = model_dir.parent / "config.yaml"
    if config.is_file():
        values = yaml.safe_load(config.read_text()) or {}
        return int((values.get("data") or {}).get("max_length") or 128)
    return 128


def check(model_dir: Path, data_dir: str | None, batch_size: int) -> dict[str, Any]:
    model = HireModel.from_pretrained(model_dir).eval()
    if model.config.task_type != "ranking":
        raise SystemExit(f"--model {model_dir}: a {model.config.task_type} model, not a ranker")
    tokenizer = load_tokenizer(model_dir)
    max_length = run_max_length(model_dir)
    out: dict[str, Any] = {"model": str(model_dir), "head": model.config.head, "splits": {}}
    for split in ("dev", "test"):
        examples = read_wikiqa(data_dir, split).examples
        encoded = encode_pairs(examples, tokenizer, max_length)
        rows = {}
        for mode in MODES:
            scores = score(model, encoded, tokenizer.pad_token_id, mode, batch_size)
            rows[mode] = {"metrics": ranking_metrics(examples, scores), "ties": ties(examples, scores)}
        out["splits"][split] = rows
    return out


def write_report(results: dict[str, Any], out: Path) -> str:
    header = ["model", "split", "scored", "distinct scores", "tied candidates", "questions with a tie", "MAP", "MRR",
              "P@1"]
    rows = []
    for r in results["models"]:
        for split, modes in r["splits"].items():
            for mode, v in modes.items():
                t, m = v["ties"], v["metrics"]
                rows.append([f"{r['head']} ({Path(r['model']).parent.name})", split, mode,
                             f"{t['distinct']} of {t['candidates']}", str(t["tied"]),
                             f"{t['questions_with_a_tie']} of {t['questions']}",
                             *[f"{100 * m[k]:.2f}" for k in ("map", "mrr", "p@1")]])
    m = results["machine"]
    models = " ".join(f"--model runs/{Path(r['model']).parent.name}/best" for r in results["models"])
    text = "\n".join([
        "# Ranking scores in bf16 against float32 (issue 73)", "",
        "The same saved weights scored three ways on WikiQA (has-positive questions): `bf16 output` as every "
        "committed WikiQA record was scored (the output layer inside bf16 autocast), `bf16, fp32 output` as hire "
        "scores now under bf16, and `fp32` without autocast. Scores x 100. " + results.get("note", ""), "",
        f"Machine: {m.get('cpu', m.get('processor', '?'))}, {'with' if m.get('fast_bf16_cpu') else 'no'} bf16 units, "
        f"{m.get('cpu_count', '?')} cores; torch {m.get('torch')}, transformers {m.get('transformers')}; "
        f"{results['date']}; the check took {results['seconds'] / 60:.1f} min.", "",
        *markdown_table(header, rows, align="lllr"), "",
        f"Made by `python scripts/check_rank_precision.py OUT {models}`.", ""])
    (out / "report.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", type=Path, action="append", required=True, help="a saved ranker (RUN/best)")
    parser.add_argument("--data_dir", default=None, help="WikiQA folder (default: ../shared/data/wikiqa)")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--note", default="", help="a sentence for the report: where the models came from")
    args = parser.parse_args(argv)
    problem = report_dir_problem(args.out, KEY)
    if problem:
        parser.error(problem)
    for m in args.model:
        if not (m / "config.json").is_file():
            parser.error(f"--model {m}: no saved model there (config.json)")
    start = time.perf_counter()
    torch.manual_seed(0)
    results = {KEY: True, "models": [check(m, args.data_dir, args.batch_size) for m in args.model],
               "machine": machine()}
    results["seconds"] = round(time.perf_counter() - start, 1)
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results["note"] = args.note
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(write_report(results, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
