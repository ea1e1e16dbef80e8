"""``hire evaluate``, ``hire predict``, ``hire heads`` and ``hire report``: saved models and run folders."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from hire.config import DataConfig
from hire.data.batching import encode
from hire.data.files import read_table
from hire.data.tasks import load_task
from hire.evaluation import eval_loader, predict, score, write_predictions, write_submission, zip_submission
from hire.runs import resolve_mixed_precision


def _load(model_dir: str, precision: str) -> tuple[Any, Any, Accelerator]:
    from transformers import AutoTokenizer

    from hire.model import HireModel

    model = HireModel.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "right"
    accelerator = Accelerator(mixed_precision=resolve_mixed_precision(precision))
    return accelerator.prepare(model), tokenizer, accelerator


def _cmd_evaluate(args: argparse.Namespace) -> int:
    model, tokenizer, acc = _load(args.model, args.mixed_precision)
    config = acc.unwrap_model(model).config
    task = load_task(DataConfig(task=args.task, data_dir=args.data_dir, max_eval_examples=args.max_examples),
                     with_train=False)
    if (config.label_names or None) != task.label_names:
        raise ValueError(f"--model {args.model} predicts labels {config.label_names}, "
                         f"but task {task.name} has {task.label_names}")
    out = Path(args.output_dir or Path(args.model) / f"eval-{task.name}")
    splits = {**task.dev, **task.test} if args.split == "all" else (
        task.dev if args.split == "dev" else task.test)
    results: dict[str, Any] = {"model": args.model, "task": task.name}
    for split, examples in splits.items():
        labelled = split in task.dev
        encoded = encode(examples, tokenizer, args.max_length, task.label_names, labelled=labelled)
        preds = predict(model, acc.prepare(eval_loader(encoded, args.batch_size, tokenizer.pad_token_id)), acc,
                        desc=f"{task.name} {split}")
        write_predictions(out / f"{split}.jsonl", examples, preds, task.label_names)
        if labelled:
            results[split] = score(task.metrics, preds, encoded, task.regression)
        else:
            name = task.submission_files.get(split, f"{task.name}-{split}.tsv")
            write_submission(out / "submission" / name, examples, preds, task.label_names)
            results[split] = {"examples": len(examples), "submission": str(out / "submission" / name)}
    if any(split not in task.dev for split in splits):
        zip_submission(out / "submission")
    (out / "metrics.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    model, tokenizer, acc = _load(args.model, args.mixed_precision)
    config = acc.unwrap_model(model).config
    columns = [c.strip() for c in args.text_columns.split(",") if c.strip()]
    examples = read_table(args.input, columns, args.label_column, regression=config.regression,
                          require_label=False)
    encoded = encode(examples, tokenizer, args.max_length, None, labelled=False)
    preds = predict(model, acc.prepare(eval_loader(encoded, args.batch_size, tokenizer.pad_token_id)), acc)
    output = Path(args.output or Path(args.input).with_suffix(".predictions.jsonl"))
    names = None if config.regression else (config.label_names or [str(i) for i in range(config.num_labels)])
    write_predictions(output, examples, preds, names)
    print(f"{len(examples)} examples in {preds.seconds:.2f} s: {preds.examples_per_second:.1f} examples/s "
          f"({acc.mixed_precision} precision, batch {args.batch_size}); predictions in {output}")
    return 0


def _cmd_heads(args: argparse.Namespace) -> int:
    from hire.heads import describe_heads, head_options

    for name, doc in describe_heads().items():
        options = head_options(name)
        print(f"{name:20s} {doc}" + (f"\n{'':20s} options: {', '.join(options)}" if options else ""))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from hire.reporting import collect_runs, runs_table

    rows = collect_runs([Path(r) for r in args.runs])
    table = runs_table(rows)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", required=True, help="a saved model folder (a run's best/)")
        p.add_argument("--batch_size", type=int, default=64, help="examples per batch (default: 64)")
        p.add_argument("--max_length", type=int, default=128, help="maximum tokens per example (default: 128)")
        p.add_argument("--mixed_precision", choices=["auto", "no", "bf16", "fp16"], default="no",
                       help="precision of the forward pass (default: no = fp32)")

    ev = sub.add_parser("evaluate", help="score a saved model on a GLUE task's dev or test split",
                        description="Score a saved model on a task's dev splits (metrics) or predict its "
                        "test splits (GLUE submission files).")
    common(ev)
    ev.add_argument("--task", required=True, help="GLUE task name")
    ev.add_argument("--split", choices=["dev", "test", "all"], default="dev", help="which splits (default: dev)")
    ev.add_argument("--data_dir", help="GLUE folder (default: $HIRE_GLUE_DIR or ../shared/data/glue)")
    ev.add_argument("--max_examples", type=int, help="only the first N examples of each split")
    ev.add_argument("--output_dir", help="where predictions and metrics go (default: MODEL/eval-TASK)")
    ev.set_defaults(func=_cmd_evaluate)

    pr = sub.add_parser("predict", help="predict a file of your own with a saved model",
                        description="Predict every row of a CSV, TSV or JSON-lines file; reports examples/s.")
    common(pr)
    pr.add_argument("--input", required=True, help="file to predict (.csv, .tsv, .jsonl with a header)")
    pr.add_argument("--text_columns", default="sentence", help="one or two text columns, comma-separated")
    pr.add_argument("--label_column", default="label", help="label column, if the file has one (kept as gold)")
    pr.add_argument("--output", help="predictions file (default: INPUT.predictions.jsonl)")
    pr.set_defaults(func=_cmd_predict)

    hd = sub.add_parser("heads", help="list the heads and their options")
    hd.set_defaults(func=_cmd_heads)

    rp = sub.add_parser("report", help="tabulate the dev scores of finished runs side by side")
    rp.add_argument("runs", nargs="+", help="run folders (each with a metrics.json)")
    rp.add_argument("--markdown", help="also write the table to this Markdown file")
    rp.set_defaults(func=_cmd_report)
