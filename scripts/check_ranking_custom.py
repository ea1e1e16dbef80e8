"""A ranking data set that no ranking test reads, through the custom-file path end to end (issue 47, "How it is
checked"): BM25, the frozen grid and a fine-tuned cross-encoder, each scored by hire and again from the TREC run
file and qrels it wrote, by pytrec_eval (trec_eval's own C code, not hire's metrics).

The data: GLUE's QNLI (``--source``, its labelled dev split by default), answer-sentence selection made from SQuAD:
each row pairs a question with a sentence of its Wikipedia paragraph, labelled ``entailment`` where the sentence
holds the answer. Grouped by question it is a ranking set (one to three candidates a question; about half of the
questions with a correct one have no wrong one, which any system ranks right); the questions are shuffled with
``--seed`` and cut into train, dev and test (70 / 15 / 15), written in the generic ``qid question pid passage
label`` TSV layout to the work folder:

1. ``hire rank-probe --task custom`` on those files: BM25 and every hidden state x pooling x scorer of
   ``--encoder``, frozen;
2. ``hire train --data.task custom --data.format ranking``: a cross-encoder (``--head``) fine-tuned for
   ``--epochs``, chosen on dev MAP, the test split scored once;
3. each test run file (BM25's, the frozen grid's best block's, the cross-encoder's) rescored with pytrec_eval
   against the qrels written beside it: MAP, MRR and P@1 must equal hire's to 1e-9.

Run folders, caches and the split data stay in ``--work`` (a temporary folder by default); ``OUT`` gets
``report.md`` and ``results.json`` (counts, scores, seconds, the source file's sha256; no data).

    python scripts/check_ranking_custom.py OUT [--source ../shared/data/glue/QNLI/dev.tsv] \\
        [--encoder all-MiniLM-L6-v2] [--head last-layer] [--epochs 2] [--work DIR]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hire.checks import report_dir_problem  # noqa: E402
from hire.hardware import machine  # noqa: E402
from hire.model.sharing import markdown_table  # noqa: E402

SHARES = (70, 15, 15)  # per cent of the questions
MEASURES = {"map": "map", "mrr": "recip_rank", "p@1": "P_1"}


def fail(message: str) -> int:
    print(f"check_ranking_custom.py: {message}", file=sys.stderr)
    return 2


def read_source(path: Path) -> list[tuple[str, str, str]]:
    """(question, sentence, label) rows of a QNLI-layout TSV (``index question sentence label``)."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or [c.lower() for c in rows[0][1:4]] != ["question", "sentence", "label"]:
        raise ValueError(f"{path}: line 1: expected the columns index, question, sentence, label (QNLI's layout)")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 4 or row[3] not in ("entailment", "not_entailment"):
            raise ValueError(f"{path}: line {number}: expected 4 columns and a label entailment / not_entailment")
        out.append((row[1], row[2], row[3]))
    return out


def split_questions(rows: list[tuple[str, str, str]], seed: int, folder: Path) -> dict[str, dict[str, int]]:
    """Write train/dev/test.tsv (generic ranking layout) to ``folder``; counts per split."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for question, sentence, label in rows:
        groups.setdefault(question, []).append((sentence, int(label == "entailment")))
    questions = list(groups)
    random.Random(seed).shuffle(questions)
    cut1, cut2 = len(questions) * SHARES[0] // 100, len(questions) * (SHARES[0] + SHARES[1]) // 100
    parts = {"train": questions[:cut1], "dev": questions[cut1:cut2], "test": questions[cut2:]}
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, qs in parts.items():
        with (folder / f"{split}.tsv").open("w", encoding="utf-8") as f:
            f.write("qid\tquestion\tpid\tpassage\tlabel\n")
            for qi, question in enumerate(qs):
                for pi, (sentence, label) in enumerate(groups[question]):
                    f.write(f"{split[:2]}{qi}\t{question}\tp{pi}\t{sentence}\t{label}\n")
        counts[split] = {"questions": len(qs), "candidates": sum(len(groups[q]) for q in qs),
                         "with_positive": sum(any(lab for _, lab in groups[q]) for q in qs),
                         "with_both": sum(len({lab for _, lab in groups[q]}) == 2 for q in qs)}
    return counts


def trec_eval(run: Path, qrels: Path) -> dict[str, float]:
    """MAP, MRR and P@1 of a TREC run file against its qrels, by pytrec_eval (trec_eval's C code), averaged over
    the questions of the run."""
    import pytrec_eval

    truth: dict[str, dict[str, int]] = {}
    for line in qrels.read_text().splitlines():
        qid, _, pid, grade = line.split()
        truth.setdefault(qid, {})[pid] = int(grade)
    ranked: dict[str, dict[str, float]] = {}
    for line in run.read_text().splitlines():
        qid, _, pid, _rank, score, _tag = line.split()
        ranked.setdefault(qid, {})[pid] = float(score)
    per_question = pytrec_eval.RelevanceEvaluator(truth, set(MEASURES.values())).evaluate(ranked)
    n = len(per_question)
    return {ours: sum(q[theirs] for q in per_question.values()) / n for ours, theirs in MEASURES.items()} | {
        "questions": float(n)}


def run(command: list[str], log: Path) -> float:
    start = time.time()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with log.open("w") as f:
        done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command[2:])}` failed (exit {done.returncode}); its output: {log}")
    return round(time.time() - start, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for report.md and results.json")
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "data" / "glue" / "QNLI" / "dev.tsv",
                        help="a labelled QNLI-layout TSV (index, question, sentence, label)")
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--head", default="last-layer", help="the cross-encoder's head")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the question split's shuffle")
    parser.add_argument("--work", type=Path, default=None, help="folder for the data, caches and run folders")
    args = parser.parse_args(argv)
    if not args.source.is_file():
        return fail(f"--source {args.source}: file not found")
    if args.epochs < 1:
        return fail(f"--epochs {args.epochs}: give 1 or more")
    problem = report_dir_problem(args.out, "systems")
    if problem:
        return fail(problem)
    if args.work is not None and args.work.exists() and any(args.work.iterdir()):
        return fail(f"--work {args.work} is not empty (its runs would resume instead of starting)")
    try:
        rows = read_source(args.source)
    except (ValueError, UnicodeDecodeError) as err:
        return fail(str(err))

    with tempfile.TemporaryDirectory(prefix="check-ranking-") as scratch:
        work = args.work or Path(scratch)
        data = work / "data"
        counts = split_questions(rows, args.seed, data)
        files = [str(data / f"{s}.tsv") for s in ("train", "dev", "test")]
        py = [sys.executable, "-m", "hire.cli"]
        frozen_dir, tuned_dir = work / "rank-probe", work / "cross-encoder"
        commands = {
            "frozen": [*py, "rank-probe", "--encoders", args.encoder, "--task", "custom", "--train_file", files[0],
                       "--dev_file", files[1], "--test_file", files[2], "--cache_dir", str(work / "cache"),
                       "--output_dir", str(frozen_dir)],
            "cross-encoder": [*py, "train", "--data.task", "custom", "--data.format", "ranking", "--data.train_file",
                              files[0], "--data.dev_file", files[1], "--data.test_file", files[2], "--model.encoder",
                              args.encoder, "--model.head", args.head, "--train.epochs", str(args.epochs),
                              "--train.batch_size", "32", "--train.lr", "5e-5", "--output_dir", str(tuned_dir)]}
        seconds = {}
        try:
            for name, command in commands.items():
                print(f"=== {name}: {' '.join(command[2:])}", flush=True)
                seconds[name] = run(command, work / f"{name}.log")
        except RuntimeError as err:
            return fail(str(err))

        frozen = json.loads((frozen_dir / "results.json").read_text())
        best = frozen["best"]
        metrics = json.loads((tuned_dir / "metrics.json").read_text())
        systems = {
            "BM25": (frozen["bm25"]["test"], frozen_dir / frozen["bm25"]["runs"]["test"], frozen_dir / "qrels" /
                     "test.qrels"),
            f"frozen: best block ({best['scorer']}, {best['loss']}, {best['row']}, {best['pooling']})": (
                best["test"], frozen_dir / best["runs"]["test"], frozen_dir / "qrels" / "test.qrels"),
            f"cross-encoder ({args.head}, {args.epochs} epochs)": (
                metrics["held_out"]["test"], tuned_dir / "predictions" / "test.run",
                tuned_dir / "predictions" / "test.qrels")}
        table = []
        for name, (ours, run_file, qrels) in systems.items():
            theirs = trec_eval(run_file, qrels)
            agree = all(abs(ours[k] - theirs[k]) <= 1e-9 for k in ("map", "mrr", "p@1", "questions"))
            table.append({"system": name, "hire": {k: ours[k] for k in ("map", "mrr", "p@1", "questions")},
                          "pytrec_eval": theirs, "agree": agree})
        result = {"source": str(args.source), "source_sha256": hashlib.sha256(args.source.read_bytes()).hexdigest(),
                  "encoder": args.encoder, "seed": args.seed, "splits": counts, "keep": frozen["data"]["keep"],
                  "kept_questions": frozen["data"]["questions"], "dev_map": {
                      "frozen best": best["dev"]["map"], "cross-encoder": metrics["dev"]["dev"]["map"]},
                  "commands": {k: " ".join(["hire", *v[3:]]) for k, v in commands.items()}, "seconds": seconds,
                  "systems": table, "passed": all(t["agree"] for t in table), "machine": machine(),
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "report.md").write_text(report(result))
    print(f"{'passed' if result['passed'] else 'FAILED'}: report in {args.out / 'report.md'}")
    return 0 if result["passed"] else 1


def report(r: dict[str, Any]) -> str:
    m, test = r["machine"], r["splits"]["test"]
    splits = markdown_table(["split", "questions", "candidates", "with a positive", "with both", "kept"],
                            [[s, str(c["questions"]), str(c["candidates"]), str(c["with_positive"]),
                              str(c["with_both"]), str(r["kept_questions"][s])] for s, c in r["splits"].items()])
    rows = [[t["system"], *(f"{100 * t['hire'][k]:.2f} / {100 * t['pytrec_eval'][k]:.2f}" for k in ("map", "mrr",
                                                                                                    "p@1")),
             f"{t['hire']['questions']:.0f} / {t['pytrec_eval']['questions']:.0f}", "yes" if t["agree"] else "NO"]
            for t in r["systems"]]
    return "\n".join([
        "# A ranking data set no ranking test reads, through the custom-file path", "",
        f"Machine: {m['cpu']}, {m['cpu_count']} cores; torch {m['torch']}, transformers {m['transformers']}, "
        f"{r['date']}.", "",
        f"Source: `{r['source']}` (sha256 `{r['source_sha256']}`), GLUE's QNLI: a question and a sentence of its "
        "Wikipedia paragraph, labelled `entailment` where the sentence holds the answer. Grouped by question, "
        f"shuffled (seed {r['seed']}) and cut 70 / 15 / 15 into the generic `qid question pid passage label` "
        f"layout; `--keep {r['keep']}` (the default) scores the questions that have a correct candidate:", "",
        *splits, "",
        "Commands (the data files in the work folder):", "",
        *(f"- {k} ({r['seconds'][k]:.0f} s): `{v}`" for k, v in r["commands"].items()), "",
        "Test scores x 100, hire's own / pytrec_eval's (trec_eval's C code) from the run file and qrels that hire "
        "wrote; *agree*: every number equal to 1e-9:", "",
        *markdown_table(["system", "MAP", "MRR", "P@1", "questions", "agree"], rows), "",
        f"Dev MAP x 100 (the choice): frozen best block {100 * r['dev_map']['frozen best']:.2f}, cross-encoder "
        f"{100 * r['dev_map']['cross-encoder']:.2f}. Of the {test['with_positive']} test questions kept, "
        f"{test['with_positive'] - test['with_both']} have no wrong candidate, which every system ranks right: "
        "the set checks the path, not a ranker's quality.", "",
        f"**{'Passed' if r['passed'] else 'Failed'}.**", ""])


if __name__ == "__main__":
    sys.exit(main())
