"""``hire evaluate``, ``hire predict``, ``hire heads`` and ``hire report``: saved models and run folders.

Every option is checked, and the model's saved configuration read, before the model is loaded or any
file written: a predictions file never replaces its input, and a model never reads text columns other
than those it was trained on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from hire.checks import (
    check_input_file,
    check_output_file,
    check_output_folder,
    check_saved_model,
    check_text_columns,
    writing,
)
from hire.config import MIN_MAX_LENGTH, ConfigError, DataConfig, check_max_length
from hire.data.examples import DataError
from hire.data.glue import get_task, task_text_columns


def _at_least(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, not {value}")
        return value

    return parse


def saved_model_config(model_dir: str) -> dict[str, Any]:
    """The ``config.json`` of a saved model, read without loading the model (``--model``)."""
    path = check_saved_model(model_dir, "--model") / "config.json"
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        config = None
    if not isinstance(config, dict):
        raise ConfigError(f"--model {model_dir}: not a saved hire model ({path} is not a JSON object)")
    return config


def trained_text_columns(model_dir: str, config: dict[str, Any]) -> list[str] | None:
    """The text columns a saved model was trained on; None where that is not known.

    From its ``config.json`` where training recorded them (``text_columns``), else from the run folder's
    ``config.yaml`` beside it (a run's ``best/``): the custom task's ``--data.text_columns`` or the GLUE
    task's columns. The run's configuration is trusted only if its head is the model's.
    """
    if config.get("text_columns"):
        return list(config["text_columns"])
    try:
        run = yaml.safe_load((Path(model_dir).expanduser().resolve().parent / "config.yaml").read_text())
        data, model = run["data"], run["model"]
        if model["head"] != config.get("head"):
            return None
        if str(data["task"]).lower() == "custom":
            columns = data["text_columns"]
            return list(columns) if isinstance(columns, list) and 1 <= len(columns) <= 2 else None
        return list(task_text_columns(data["task"]))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError, DataError):
        return None


def _texts(columns: list[str] | tuple[str, ...]) -> str:
    return f"sentence pairs ({', '.join(columns)})" if len(columns) == 2 else f"single sentences ({columns[0]})"


def _load(model_dir: str, precision: str) -> tuple[Any, Any, Any]:
    from accelerate import Accelerator
    from transformers import AutoTokenizer

    from hire.model import HireModel
    from hire.runs import resolve_mixed_precision

    model = HireModel.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "right"
    accelerator = Accelerator(mixed_precision=resolve_mixed_precision(precision))
    return accelerator.prepare(model), tokenizer, accelerator


def _cmd_evaluate(args: argparse.Namespace) -> int:
    config = saved_model_config(args.model)
    try:
        spec = get_task(args.task)
    except DataError as err:
        raise ConfigError(f"--task: {err}") from None
    if (config.get("label_names") or None) != (list(spec.labels) if spec.labels else None):
        raise ConfigError(f"--model {args.model} predicts labels {config.get('label_names')}, "
                          f"but task {spec.name} has {list(spec.labels) if spec.labels else 'real-valued scores'}")
    trained, wanted = trained_text_columns(args.model, config), task_text_columns(spec)
    if trained is not None and len(trained) != len(wanted):
        raise ConfigError(f"--task {spec.name}: the task has {_texts(wanted)}, but --model {args.model} "
                          f"was trained on {_texts(trained)}")
    check_max_length(args.max_length, config.get("encoder_config", {}), "--max_length")
    out = Path(args.output_dir or Path(args.model) / f"eval-{spec.name}")
    check_output_folder(out, "--output_dir")
    from hire.data.batching import encode  # the heavy imports, once every option is checked
    from hire.data.tasks import load_task
    from hire.evaluation import eval_loader, predict, score, write_predictions, write_submission, zip_submission

    task = load_task(DataConfig(task=spec.name, data_dir=args.data_dir, max_eval_examples=args.max_examples),
                     with_train=False)
    model, tokenizer, acc = _load(args.model, args.mixed_precision)
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
    with writing(out / "metrics.json"):
        (out / "metrics.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from hire.data.files import read_table

    config = saved_model_config(args.model)
    check_input_file(args.input, "--input")
    trained = trained_text_columns(args.model, config)
    given = args.text_columns or (",".join(trained) if trained else "sentence")
    columns = [c.strip() for c in given.split(",") if c.strip()]
    check_text_columns(columns, args.label_column, "--text_columns", "--label_column")
    if trained is not None and len(columns) != len(trained):
        raise ConfigError(f"--text_columns {given}: --model {args.model} was trained on {_texts(trained)}; "
                          f"give {len(trained)} column(s)")
    output = check_output_file(args.output or Path(args.input).with_suffix(".predictions.jsonl"), "--output",
                               {"--input": args.input})
    check_max_length(args.max_length, config.get("encoder_config", {}), "--max_length")
    regression = config.get("num_labels") == 1
    names = None if regression else (config.get("label_names") or [str(i) for i in range(config.get("num_labels", 2))])
    examples = read_table(args.input, columns, args.label_column, regression=regression, require_label=False,
                          labels=names, labels_from=f"the model ({args.model})")
    from hire.data.batching import encode  # the heavy imports, once every option is checked
    from hire.evaluation import eval_loader, predict, write_predictions

    model, tokenizer, acc = _load(args.model, args.mixed_precision)
    encoded = encode(examples, tokenizer, args.max_length, None, labelled=False)
    preds = predict(model, acc.prepare(eval_loader(encoded, args.batch_size, tokenizer.pad_token_id)), acc)
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
    for run in args.runs:
        if not Path(run).is_dir():
            raise ConfigError(f"{run}: no such run folder")
    if args.markdown:
        check_output_file(args.markdown, "--markdown")
    from hire.reporting import collect_runs, runs_table

    table = runs_table(collect_runs([Path(r) for r in args.runs]))
    print(table)
    if args.markdown:
        with writing(args.markdown):
            Path(args.markdown).write_text(table + "\n")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", required=True, help="a saved model folder (a run's best/)")
        p.add_argument("--batch_size", type=_at_least(1), default=64, help="examples per batch (default: 64)")
        p.add_argument("--max_length", type=_at_least(MIN_MAX_LENGTH), default=128,
                       help="maximum tokens per example (default: 128)")
        p.add_argument("--mixed_precision", choices=["auto", "no", "bf16", "fp16"], default="no",
                       help="precision of the forward pass (default: no = fp32)")

    ev = sub.add_parser("evaluate", help="score a saved model on a GLUE task's dev or test split",
                        description="Score a saved model on a task's dev splits (metrics) or predict its "
                        "test splits (GLUE submission files).")
    common(ev)
    ev.add_argument("--task", required=True, help="GLUE task name")
    ev.add_argument("--split", choices=["dev", "test", "all"], default="dev", help="which splits (default: dev)")
    ev.add_argument("--data_dir", help="GLUE folder (default: $HIRE_GLUE_DIR or ../shared/data/glue)")
    ev.add_argument("--max_examples", type=_at_least(1), help="only the first N examples of each split")
    ev.add_argument("--output_dir", help="where predictions and metrics go (default: MODEL/eval-TASK)")
    ev.set_defaults(func=_cmd_evaluate)

    pr = sub.add_parser("predict", help="predict a file of your own with a saved model",
                        description="Predict every row of a CSV, TSV or JSON-lines file; reports examples/s.")
    common(pr)
    pr.add_argument("--input", required=True, help="file to predict (.csv, .tsv, .jsonl with a header)")
    pr.add_argument("--text_columns", help="one or two text columns, comma-separated (default: those the model "
                    "was trained on, where its run folder says, else sentence)")
    pr.add_argument("--label_column", default="label", help="label column, if the file has one (kept as gold; "
                    "its labels must be the model's)")
    pr.add_argument("--output", help="predictions file (default: INPUT.predictions.jsonl)")
    pr.set_defaults(func=_cmd_predict)

    hd = sub.add_parser("heads", help="list the heads and their options")
    hd.set_defaults(func=_cmd_heads)

    rp = sub.add_parser("report", help="tabulate the dev scores of finished runs side by side")
    rp.add_argument("runs", nargs="+", help="run folders (each with a metrics.json)")
    rp.add_argument("--markdown", help="also write the table to this Markdown file")
    rp.set_defaults(func=_cmd_report)
