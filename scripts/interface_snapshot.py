"""What a restructuring must leave unchanged, written as files and compared: every command's ``--help``, the
``config.yaml`` that a sequence, a token and a ranking run (cross- and bi-encoder) save, and each run's saved model
with its predictions on a fixed input.

    python scripts/interface_snapshot.py write OUT      # on one checkout (its installed hire)
    python scripts/interface_snapshot.py compare A B    # prints each file that differs, exit status 1 if any

The runs train a tiny random encoder for 4 steps on generated data (about a minute on 2 cores); ``compare`` also
loads each model folder of A with the hire installed now and checks that it predicts what A's hire predicted.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["COLUMNS"] = "120"  # help is wrapped to the terminal's width

WORDS = ["a", "fine", "film", "dull", "good", "fun", "bad", "acting", "great", "awful", "not", "where", "is", "the",
         "lake", "river", "tower", "in", "north", "south", "near", "paris", "john", "smith", "went", "to", "london"]


def _help(words: list[str]) -> str:
    from hire.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), contextlib.suppress(SystemExit):
        main(words)
    return out.getvalue()


def write_help(out: Path) -> None:
    from hire.cli import all_commands

    (out / "help").mkdir(parents=True, exist_ok=True)
    (out / "help" / "hire.txt").write_text(_help(["--help"]))
    for command in all_commands():
        (out / "help" / f"{command.name}.txt").write_text(_help([command.name, "--help"]))
        for sub in getattr(command, "commands", ()) or ():
            (out / "help" / f"{command.name}-{sub.name}.txt").write_text(_help([command.name, sub.name, "--help"]))


def _encoder(folder: Path) -> Path:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(WORDS) + 5, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _data(root: Path) -> dict[str, dict[str, Path]]:
    rng = random.Random(0)
    files: dict[str, dict[str, Path]] = {"sequence": {}, "token": {}, "ranking": {}}
    for split, n in (("train", 24), ("dev", 8), ("test", 6)):
        rows = [f"{' '.join(rng.choices(WORDS[:11], k=rng.randint(2, 5)))},{rng.choice(['pos', 'neg'])}"
                for _ in range(n)]
        files["sequence"][split] = root / f"{split}.csv"
        files["sequence"][split].write_text("sentence,label\n" + "".join(r + "\n" for r in rows))
        lines = ["-DOCSTART- -X- O", ""]
        for _ in range(n):
            for word in rng.choices(["john", "smith", "went", "to", "london", "paris", "the"], k=rng.randint(2, 6)):
                tag = {"john": "B-PER", "london": "B-LOC", "paris": "B-LOC"}.get(word, "O")
                lines.append(f"{word} X {tag}")
            lines.append("")
        files["token"][split] = root / f"{split}.conll"
        files["token"][split].write_text("\n".join(lines) + "\n")
        rows = ["QuestionID\tQuestion\tSentenceID\tSentence\tLabel"]
        for q in range(n):
            thing = rng.choice(["lake", "river", "tower"])
            for c in range(3):
                label = int(c == q % 3)
                text = f"the {thing} is in the north" if label else f"the {rng.choice(['lake', 'river'])} near paris"
                rows.append(f"Q{split}{q}\twhere is the {thing}\tS{split}{q}-{c}\t{text}\t{label}")
        files["ranking"][split] = root / f"{split}.tsv"
        files["ranking"][split].write_text("\n".join(rows) + "\n")
    return files


RUNS = {  # name: (kind of data, options beside the files)
    "sequence": ("sequence", ["--model.head", "hire"]),
    "token": ("token", ["--data.format", "conll", "--model.head", "hire"]),
    "ranking": ("ranking", ["--data.format", "ranking", "--data.ranking_columns",
                            "qid=QuestionID,question=Question,pid=SentenceID,passage=Sentence,label=Label",
                            "--model.head", "last-layer", "--train.rank_loss", "pairwise"]),
    "bi-encoder": ("ranking", ["--data.format", "ranking", "--data.ranking_columns",
                               "qid=QuestionID,question=Question,pid=SentenceID,passage=Sentence,label=Label",
                               "--model.head", "last-layer", "--model.ranker", "bi"]),
}


def write_runs(out: Path, work: Path) -> None:
    from hire.cli import main

    encoder = _encoder(work / "encoder")
    files = _data(work)
    for name, (kind, extra) in RUNS.items():
        run = out / "runs" / name
        words = ["train", "--output_dir", str(run), "--data.task", "custom", "--data.train_file",
                 str(files[kind]["train"]), "--data.dev_file", str(files[kind]["dev"]), "--data.test_file",
                 str(files[kind]["test"]), "--data.max_length", "32", "--model.encoder", str(encoder),
                 "--train.batch_size", "8", "--train.max_steps", "4", "--train.eval_every", "2",
                 "--train.mixed_precision", "no", "--train.seed", "3", *extra]
        status, said = _quietly(main, words)
        if status:
            raise SystemExit(f"hire {' '.join(words)} exited {status}: {said[-2000:]}")
        (out / "configs").mkdir(parents=True, exist_ok=True)
        text = (run / "config.yaml").read_text().replace(str(out), "OUT").replace(str(work), "WORK")
        (out / "configs" / f"{name}.yaml").write_text(text)
        shutil.copy(files[kind]["test"], run / f"input{files[kind]['test'].suffix}")
        _predict(run, run / "expected.jsonl")
        for noise in ("checkpoints", "logs", "last"):
            shutil.rmtree(run / noise, ignore_errors=True)


def _predict(run: Path, output: Path) -> None:
    from hire.cli import main

    source = next(run.glob("input.*"))
    words = ["predict", "--model", str(run / "best"), "--input", str(source), "--output", str(output),
             "--mixed_precision", "no"]
    if source.suffix == ".conll":
        words += ["--format", "conll"]
    if source.suffix == ".tsv":
        words += ["--format", "ranking", "--ranking_columns",
                  "qid=QuestionID,question=Question,pid=SentenceID,passage=Sentence,label=Label"]
    status, said = _quietly(main, words)
    if status:
        raise SystemExit(f"hire {' '.join(words)} exited {status}: {said[-2000:]}")


def _quietly(main, words: list[str]) -> tuple[int, str]:
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        status = main(words)
    return status, said.getvalue()


def compare(a: Path, b: Path) -> int:
    differences = []
    helps = {p.relative_to(root) for root in (a, b) for p in (root / "help").rglob("*.txt")}
    for path in sorted(helps | {p.relative_to(a) for p in (a / "configs").glob("*.yaml")}):
        left = (a / path).read_text() if (a / path).exists() else ""
        right = (b / path).read_text() if (b / path).exists() else ""
        if left != right:
            differences.append(str(path))
            print(f"--- {path}")
            sys.stdout.writelines(difflib.unified_diff(left.splitlines(True), right.splitlines(True), "before",
                                                       "after", n=1))
    with tempfile.TemporaryDirectory() as tmp:
        for run in sorted((a / "runs").iterdir()):
            again = Path(tmp) / f"{run.name}.jsonl"
            _predict(run, again)
            same = [json.loads(line) for line in (run / "expected.jsonl").read_text().splitlines()] == \
                   [json.loads(line) for line in again.read_text().splitlines()]
            print(f"{run.name}: the saved model loads and predicts {'the same' if same else 'DIFFERENTLY'}")
            if not same:
                differences.append(f"runs/{run.name}")
    print(f"{len(differences)} differ" + (": " + ", ".join(differences) if differences else ""))
    return 1 if differences else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("write").add_argument("out", type=Path)
    cmp = sub.add_parser("compare")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.verb == "compare":
        return compare(args.a, args.b)
    if args.out.exists():
        raise SystemExit(f"{args.out} exists; name a new folder")
    write_help(args.out)
    with tempfile.TemporaryDirectory() as work:
        write_runs(args.out, Path(work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
