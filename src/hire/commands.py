"""The commands on saved models and run folders: ``hire evaluate``, ``predict``, ``export``, ``heads``, ``report``.

Every option is checked, and the model's saved configuration read (:mod:`hire.saved_model`), before the model
is loaded or any file written: a predictions file never replaces its input, and a model never reads text
columns other than those it was trained on. ``hire evaluate`` predicts with the same pipeline as the end of
training (:func:`hire.evaluation.predict_task`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hire.checks import (
    check_input_file,
    check_output_file,
    check_output_folder,
    check_text_columns,
    writing,
)
from hire.config import MIN_MAX_LENGTH, ConfigError, DataConfig, check_max_length
from hire.data.examples import DataError
from hire.data.glue import get_task, task_text_columns
from hire.runs import replacing, write_atomic
from hire.saved_model import (
    run_card,
    saved_label_names,
    saved_model_config,
    saved_num_labels,
    trained_text_columns,
)


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


def _texts(columns: list[str] | tuple[str, ...]) -> str:
    return f"sentence pairs ({', '.join(columns)})" if len(columns) == 2 else f"single sentences ({columns[0]})"


def _load(model_dir: str, precision: str) -> tuple[Any, Any, Any]:
    from accelerate import Accelerator

    from hire.model import HireModel, load_tokenizer
    from hire.runs import resolve_mixed_precision

    model = HireModel.from_pretrained(model_dir)
    accelerator = Accelerator(mixed_precision=resolve_mixed_precision(precision))
    return accelerator.prepare(model), load_tokenizer(model_dir), accelerator


def _cmd_evaluate(args: argparse.Namespace) -> int:
    config = saved_model_config(args.model)
    try:
        spec = get_task(args.task)
    except DataError as err:
        raise ConfigError(f"--task: {err}") from None
    if saved_label_names(config) != (list(spec.labels) if spec.labels else None):
        raise ConfigError(f"--model {args.model} predicts labels {saved_label_names(config)}, "
                          f"but task {spec.name} has {list(spec.labels) if spec.labels else 'real-valued scores'}")
    trained, wanted = trained_text_columns(args.model, config), task_text_columns(spec)
    if trained is not None and len(trained) != len(wanted):
        raise ConfigError(f"--task {spec.name}: the task has {_texts(wanted)}, but --model {args.model} "
                          f"was trained on {_texts(trained)}")
    check_max_length(args.max_length, config.get("encoder_config", {}), "--max_length")
    out = Path(args.output_dir or Path(args.model) / f"eval-{spec.name}")
    check_output_folder(out, "--output_dir")
    from hire.evaluation import predict_task  # the heavy imports, once every option is checked
    from hire.tasks import load_task

    task = load_task(DataConfig(task=spec.name, data_dir=args.data_dir, max_eval_examples=args.max_examples),
                     with_train=False)
    model, tokenizer, acc = _load(args.model, args.mixed_precision)
    splits = [*task.dev, *task.test] if args.split == "all" else list(task.dev if args.split == "dev" else task.test)
    predicted = predict_task(model, task, splits, tokenizer, acc, max_length=args.max_length,
                             batch_size=args.batch_size, predictions_dir=out, submission_dir=out / "submission")
    results: dict[str, Any] = {"model": args.model, "task": task.name, **predicted.results}
    with writing(out / "metrics.json"):
        write_atomic(out / "metrics.json", json.dumps(results, indent=2) + "\n")
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
    num_labels = saved_num_labels(config)
    regression = num_labels == 1
    names = None if regression else (saved_label_names(config) or [str(i) for i in range(num_labels)])
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


def _cmd_export(args: argparse.Namespace) -> int:
    saved_model_config(args.model)
    out = Path(args.output_dir).expanduser()
    check_output_folder(out, "--output_dir")
    if out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"--output_dir {args.output_dir}: not empty; give a new or empty folder")
    from hire.model import HireModel, load_tokenizer  # the heavy imports, once every option is checked
    from hire.sharing import ModelCard

    model = HireModel.from_pretrained(args.model)
    has_tokenizer = (Path(args.model).expanduser() / "tokenizer_config.json").is_file()
    model.save_pretrained(out, load_tokenizer(args.model) if has_tokenizer else None, with_code=True,
                          card=ModelCard(**run_card(args.model)))
    print(f"{out}: {model.config.head} model with its code; load it with transformers' "
          "AutoModelForSequenceClassification.from_pretrained(..., trust_remote_code=True), hire installed or not")
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
        with writing(args.markdown), replacing(Path(args.markdown)) as tmp:
            tmp.write_text(table + "\n")
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

    ex = sub.add_parser("export", help="copy a saved model with its modelling code, to load without hire",
                        description="Write a saved model (converted to the current format) with its tokenizer, "
                        "model card and modelling code, so that transformers loads it with trust_remote_code=True "
                        "where hire is not installed.")
    ex.add_argument("--model", required=True, help="a saved model folder (a run's best/)")
    ex.add_argument("--output_dir", required=True, help="where the copy goes (a new or empty folder)")
    ex.set_defaults(func=_cmd_export)

    hd = sub.add_parser("heads", help="list the heads and their options")
    hd.set_defaults(func=_cmd_heads)

    rp = sub.add_parser("report", help="tabulate the dev scores of finished runs side by side")
    rp.add_argument("runs", nargs="+", help="run folders (each with a metrics.json)")
    rp.add_argument("--markdown", help="also write the table to this Markdown file")
    rp.set_defaults(func=_cmd_report)
