"""The trivial baselines of the two newer task families, on the dev splits of ../shared/data, so that a reader sees how
far fine-tuning gets:

- span extraction (SQuAD v1.1 and v2.0 splits): the passage's **first sentence**, and the **best-overlap sentence**
  (the sentence that shares the most question words, weighted by inverse document frequency over the passages, with
  the question's own words taken out: a simplification of the sliding-window baseline of the SQuAD paper, which
  scores every constituent by the overlap of its window); scored with the official metrics (hire.tasks.spans);
  on v2.0 every question is answered (no threshold);
- multiple choice (CODAH, DREAM): the **majority** index of the training split, the **longest** choice, and a
  **frozen encoder** (all-MiniLM-L6-v2, mean-pooled last layer): the choice whose vector is closest (cosine) to the
  context's and question's.

    python scripts/qa_baselines.py     # computes; writes benchmarks/results/cpu-2core-qa-baselines
    python scripts/qa_baselines.py --report_only                             # the report again from results.json

Writes ``results.json`` (every figure, with the machine and the seconds taken), ``predictions/<set>-<baseline>.jsonl``
(each question's answer) and ``report.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"\w+")


def sentences(context: str) -> list[tuple[int, int]]:
    """The character spans of the passage's sentences (split after . ! ? and white space)."""
    spans, start = [], 0
    for match in SENTENCE_END.finditer(context):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(context)))
    return [(a, b) for a, b in spans if context[a:b].strip()]


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def span_baselines(examples: list) -> dict[str, list[str]]:
    """Each question's answer under each span baseline."""
    df = Counter(w for c in {ex.context for ex in examples} for w in set(words(c)))
    n = len({ex.context for ex in examples})
    idf = {w: math.log((n + 1) / (d + 1)) + 1 for w, d in df.items()}
    first, overlap = [], []
    for ex in examples:
        spans = sentences(ex.context)
        a, b = spans[0]
        first.append(ex.context[a:b].strip())
        asked = set(words(ex.question))
        best = max(spans, key=lambda s: sum(idf.get(w, 0) for w in set(words(ex.context[s[0]:s[1]])) & asked))
        kept = [w for w in WORD.findall(ex.context[best[0]:best[1]]) if w.lower() not in asked]
        overlap.append(" ".join(kept))
    return {"first-sentence": first, "best-overlap-sentence": overlap}


def choice_baselines(train: list, dev: list) -> dict[str, list[int]]:
    """Each question's chosen index under each multiple-choice baseline."""
    majority = Counter(ex.label for ex in train).most_common(1)[0][0]
    out = {"majority": [min(majority, len(ex.choices) - 1) for ex in dev],
           "longest": [max(range(len(ex.choices)), key=lambda i: len(ex.choices[i])) for ex in dev]}
    out["frozen-minilm"] = frozen_similarity(dev)
    return out


def frozen_similarity(dev: list) -> list[int]:
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel

    from hire.model import load_tokenizer
    from hire.model.encoder import resolve_encoder

    path = resolve_encoder("all-MiniLM-L6-v2")
    tokenizer, model = load_tokenizer(path), AutoModel.from_pretrained(path).eval()

    def vectors(texts: list[str]) -> torch.Tensor:
        out = []
        for i in range(0, len(texts), 64):
            batch = tokenizer(texts[i:i + 64], padding=True, truncation=True, max_length=256, return_tensors="pt")
            with torch.no_grad():
                last = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            out.append(F.normalize((last * mask).sum(1) / mask.sum(1), dim=-1))
        return torch.cat(out)

    queries = vectors([f"{ex.context} {ex.question}".strip() for ex in dev])
    choices = vectors([c for ex in dev for c in ex.choices])
    picked, at = [], 0
    for q, ex in zip(queries, dev, strict=True):
        k = len(ex.choices)
        picked.append(int((choices[at:at + k] @ q).argmax()))
        at += k
    return picked


def compute(out: Path) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from hire.tasks.choice.data import read_named
    from hire.tasks.spans.data import read_squad_dir
    from hire.tasks.spans.tasktype import squad_v1_scores, squad_v2_scores

    started, results = time.perf_counter(), {"sets": {}}
    (out / "predictions").mkdir(parents=True, exist_ok=True)
    for name, version in (("squad", "1.1"), ("squad_v2", "2.0")):
        dev = read_squad_dir(None, version, "dev")
        found = {}
        for baseline, answers in span_baselines(dev).items():
            golds = [ex.golds for ex in dev]
            if version == "1.1":
                exact, f1 = squad_v1_scores(golds, answers)
                found[baseline] = {"exact_match": sum(exact) / len(exact), "f1": sum(f1) / len(f1)}
            else:
                spans = [{"text": a, "score": 0.0, "no_answer_score": -math.inf} for a in answers]
                v2 = squad_v2_scores(golds, spans, threshold=math.inf)  # always answered
                found[baseline] = {k: v2[k] for k in ("exact", "f1", "HasAns_f1", "NoAns_f1")}
            write(out / "predictions" / f"{name}-{baseline}.jsonl",
                  [{"id": ex.qid, "answer": a} for ex, a in zip(dev, answers, strict=True)])
        results["sets"][name] = {"questions": len(dev), "baselines": found}
    for name in ("codah", "dream"):
        train, dev = read_named(name, None, "train"), read_named(name, None, "dev")
        found = {}
        for baseline, picked in choice_baselines(train, dev).items():
            found[baseline] = {"accuracy": sum(p == ex.label for p, ex in zip(picked, dev, strict=True)) / len(dev)}
            write(out / "predictions" / f"{name}-{baseline}.jsonl",
                  [{"id": ex.qid, "prediction": p, "label": ex.label} for ex, p in zip(dev, picked, strict=True)])
        results["sets"][name] = {"questions": len(dev), "baselines": found}
    from hire.hardware import machine

    results["machine"] = machine()
    results["seconds"] = round(time.perf_counter() - started, 1)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def report(results: dict) -> str:
    lines = ["# Trivial baselines of question answering and multiple choice", "",
             "Made by `python scripts/qa_baselines.py` from `results.json` (dev splits of `../shared/data`; SQuAD's "
             "are the official dev sets split by article, so the figures are not comparable with published SQuAD "
             f"numbers). Took {results['seconds']} s on {results['machine']['cpu']} ({results['machine']['cpu_count']} "
             "cores; the frozen encoder in float32).", "",
             "| data set | questions | baseline | metric | value |", "|---|---:|---|---|---:|"]
    for name, found in results["sets"].items():
        for baseline, metrics in found["baselines"].items():
            for metric, value in metrics.items():
                lines.append(f"| {name} | {found['questions']} | {baseline} | {metric} | {100 * value:.1f} |")
    lines += ["", "Published anchors: CODAH, BERT-large 67.5%, humans 95.3% (Chen et al. 2019, on the full data)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=ROOT / "benchmarks" / "results" / "cpu-2core-qa-baselines")
    parser.add_argument("--report_only", action="store_true", help="write report.md again from results.json")
    args = parser.parse_args()
    if args.report_only:
        results = json.loads((args.output_dir / "results.json").read_text())
    else:
        results = compute(args.output_dir)
    (args.output_dir / "report.md").write_text(report(results))
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
