"""``hire probe`` and ``hire probe-report``: what every layer of a frozen encoder knows.

Registered in :func:`hire.cli.build_parser`; errors (``ValueError``, ``DataError``, a missing file) go
through the ``hire`` command's handler: one line naming the option or file at fault, exit status 2. The
output folders and the encoders are checked before any work, so a bad one costs no probing.
Heavy imports (scikit-learn, matplotlib) wait until a command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hire.probing.runner import ProbeOptions


def _floats(option: str, text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{option}: expected numbers separated by commas, not {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{option}: expected positive numbers separated by commas, not {text!r}")
    return values


def _names(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def add_encoder_options(parser: argparse.ArgumentParser, encoder_help: str, labels_help: str) -> None:
    """``--encoder`` and ``--labels``, as ``hire probe`` and ``hire reconstruct`` take them: repeatable or
    comma-separated, one label per encoder."""
    parser.add_argument("--encoder", action="append", help=f"{encoder_help}, repeatable or comma-separated: hub "
                        "name, local folder, all-MiniLM-L6-v2, a run folder (its best/) or a saved model folder "
                        "(its fine-tuned encoder)")
    parser.add_argument("--labels", action="append", help=f"names for the encoders in {labels_help}")


def encoders_and_labels(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The ``--encoder`` and ``--labels`` words, checked: at least one encoder, a distinct name for each."""
    encoders, labels = _names(args.encoder), _names(args.labels)
    if not encoders:
        raise ValueError("--encoder: give at least one encoder (hub name, folder, run folder or saved model)")
    if labels and len(labels) != len(encoders):
        raise ValueError(f"--labels: {len(labels)} names for {len(encoders)} encoders")
    if len(set(labels or encoders)) < len(encoders):
        raise ValueError("--labels: give each encoder a distinct name" if labels else
                         "--encoder: the same encoder twice")
    return encoders, labels


def check_results_dir(output_dir: str, option: str = "--output_dir") -> None:
    """A folder the command may write its results in, and none of a training run's own files
    (:func:`hire.runs.check_not_run_file`): checked before any work."""
    from hire.checks import check_output_folder
    from hire.runs import check_not_run_file

    check_output_folder(output_dir, option)
    check_not_run_file(output_dir, option)


def check_encoders(encoders: list[str]) -> None:
    """Every ``--encoder`` loadable (:func:`hire.probing.sources.check_source`), before any work."""
    from hire.probing.sources import check_source

    for spec in encoders:
        check_source(spec, "--encoder")


def _positive(option: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{option}: expected a positive integer, not {value}")


def options_from_args(args: argparse.Namespace) -> ProbeOptions:
    """Check the command line and build :class:`~hire.probing.runner.ProbeOptions`."""
    import torch

    from hire.probing.classifiers import ProbeSettings
    from hire.probing.features import default_cache_dir
    from hire.probing.runner import ProbeOptions
    from hire.probing.tasks import CustomFiles
    from hire.runs import resolve_mixed_precision

    (encoders, labels), tasks = encoders_and_labels(args), _names(args.task)
    if not tasks:
        raise ValueError("--task: give at least one task (e.g. MR, SST-5, CoLA, MRPC, or custom)")
    for option in ("max_length", "batch_size", "max_train_examples", "max_eval_examples", "fit_threads"):
        _positive(f"--{option}", getattr(args, option))
    if args.folds < 2:
        raise ValueError(f"--folds: cross-validation needs at least 2 folds, not {args.folds}")
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: no CUDA device here")
    precision = resolve_mixed_precision(args.mixed_precision)
    if device == "cpu" and precision == "fp16":
        raise ValueError("--mixed_precision fp16: not on CPU (use bf16 or no)")
    check_results_dir(args.output_dir)
    cache_dir = str(Path(args.cache_dir or default_cache_dir()).expanduser())
    check_results_dir(cache_dir, "--cache_dir")
    check_encoders(encoders)
    columns = [c.strip() for c in args.text_columns.split(",") if c.strip()]
    custom = CustomFiles(args.train_file, args.dev_file, args.test_file, columns, args.label_column, args.regression)
    probe = ProbeSettings(args.folds, _floats("--c_grid", args.c_grid), _floats("--alpha_grid", args.alpha_grid),
                          args.seed)
    return ProbeOptions(encoders, tasks, args.output_dir, labels, cache_dir, args.data_dir,
                        args.senteval_dir, custom, args.max_length, args.batch_size, precision, args.cache_dtype,
                        device, args.max_train_examples, args.max_eval_examples, probe, args.fit_threads,
                        args.overwrite)


def _cmd_probe(args: argparse.Namespace) -> int:
    from hire.probing.report import write_report
    from hire.probing.runner import run_probe

    if args.report_only:
        return _cmd_probe_report(args)
    results = run_probe(options_from_args(args))
    print(write_report(results, args.output_dir))
    print(f"results in {args.output_dir}/ (results.json, report.md, poolings.csv, <task>/table-*.csv, layers.png)")
    return 0


def _cmd_probe_report(args: argparse.Namespace) -> int:
    from hire.probing.report import write_report
    from hire.probing.runner import load_results

    check_results_dir(args.output_dir, "output_dir" if getattr(args, "command", None) == "probe-report"
                     else "--output_dir")
    print(write_report(load_results(args.output_dir), args.output_dir))
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    pr = sub.add_parser(
        "probe", help="probe every hidden state and pooling of frozen encoders with linear classifiers",
        description="Encode a task once with a frozen encoder (features cached), then fit a logistic-"
        "regression probe (ridge for regression) on every hidden state x pooling (cls, sep, mean, max) and "
        "on concatenations of layers, under SentEval's protocol: 10-fold cross-validation where a task has "
        "no split, else train -> dev (and test where labelled). Writes tables, a plot and results.json.")
    add_encoder_options(pr, "encoder to probe", "tables and plots, comma-separated (default: the --encoder values)")
    pr.add_argument("--task", action="append", help="task, repeatable or comma-separated: a GLUE task (CoLA, "
                    "SST-2, MRPC, STS-B, RTE, ...), a --senteval_dir folder (MR, CR, MPQA, SST-5) or custom")
    pr.add_argument("--output_dir", default="runs/probe", help="where results go (default: runs/probe)")
    pr.add_argument("--overwrite", action="store_true",
                    help="replace results of other options in --output_dir (the same options resume; a command "
                    "that adds encoders or tasks keeps the results there and runs only the new ones)")
    pr.add_argument("--report_only", action="store_true", help="only redraw tables and figures from "
                    "--output_dir/results.json (as `hire probe-report`)")
    data = pr.add_argument_group("data options")
    data.add_argument("--data_dir", help="GLUE folder (default: $HIRE_GLUE_DIR or ../shared/data/glue)")
    data.add_argument("--senteval_dir", help="SentEval-style folder, one sub-folder per task with all.tsv or "
                      "train/dev/test.tsv (default: $HIRE_SENTEVAL_DIR or senteval/ beside the GLUE folder)")
    data.add_argument("--train_file", help="custom task: training file (.csv, .tsv, .jsonl); alone: k-fold CV")
    data.add_argument("--dev_file", help="custom task: labelled evaluation file")
    data.add_argument("--test_file", help="custom task: labelled test file (C is then chosen on dev)")
    data.add_argument("--text_columns", default="sentence", help="custom task: one or two text columns")
    data.add_argument("--label_column", default="label", help="custom task: the label column")
    data.add_argument("--regression", action="store_true", help="custom task: the label is a real number")
    data.add_argument("--max_train_examples", type=int, help="a random subset of N training (or CV) examples")
    data.add_argument("--max_eval_examples", type=int, help="a random subset of N examples of each dev/test split")
    feats = pr.add_argument_group("feature options")
    feats.add_argument("--cache_dir", help="feature cache (default: $HIRE_FEATURE_CACHE or ~/.cache/hire/features)")
    feats.add_argument("--cache_dtype", choices=["float16", "float32"], default="float16",
                       help="stored feature precision (default: float16, half the space)")
    feats.add_argument("--max_length", type=int, default=128, help="maximum tokens per sentence (default: 128)")
    feats.add_argument("--batch_size", type=int, default=64, help="sentences per forward pass (default: 64)")
    feats.add_argument("--mixed_precision", choices=["auto", "no", "bf16", "fp16"], default="auto",
                       help="forward precision; auto: bf16 where the hardware is fast at it (default: auto)")
    feats.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 ... (default: auto)")
    fit = pr.add_argument_group("probe options")
    fit.add_argument("--folds", type=int, default=10, help="cross-validation folds where a task has no split")
    fit.add_argument("--c_grid", default="0.001,0.01,0.1,1", help="logistic regression: inverse "
                     "regularisation strengths to choose from (default: 0.001,0.01,0.1,1)")
    fit.add_argument("--alpha_grid", default="0.1,1,10,100,1000,10000",
                     help="ridge regression: penalties to choose from by leave-one-out")
    fit.add_argument("--seed", type=int, default=0, help="folds, held-out selection split, subsets")
    fit.add_argument("--fit_threads", type=int, default=1, help="BLAS threads while fitting (default: 1, "
                     "the fastest for probes of this size; several probes never run at once)")
    pr.set_defaults(func=_cmd_probe)

    rp = sub.add_parser("probe-report", help="redraw a probe's tables and figures from its results.json",
                        description="Regenerate report.md, the CSV tables and the plots of `hire probe` from "
                        "OUTPUT_DIR/results.json, byte for byte.")
    rp.add_argument("output_dir", help="a `hire probe` output folder")
    rp.set_defaults(func=_cmd_probe_report)
