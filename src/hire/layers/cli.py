"""``hire deepen`` and ``hire reconstruct``: a deeper encoder by duplicating layers, and what each hidden
layer still says about its input (Kao et al.).

Registered in :func:`hire.cli.build_parser`; errors (``ValueError``, ``ConfigError``, ``DataError``, a
missing file) go through the ``hire`` command's handler: one line naming the option or file at fault, exit
status 2. Every option is checked before torch and transformers are imported.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING

from hire.config import ConfigError
from hire.layers.plan import FAMILIES, FAMILY_NAMES, parse_indices
from hire.probing.cli import add_encoder_options, check_encoders, check_results_dir, encoders_and_labels

if TYPE_CHECKING:
    from hire.layers.runner import ReconstructOptions

DEEPEN_EPILOG = f"""\
supported families: {FAMILY_NAMES}; by model type:
""" + "\n".join(textwrap.fill(how, 100, initial_indent=f"  {name:<12}", subsequent_indent=" " * 14)
                for name, how in FAMILIES.items()) + """

examples:
  hire deepen --encoder all-MiniLM-L6-v2 --duplicate 2 --output runs/encoders/minilm-dup2
  hire deepen --encoder all-MiniLM-L6-v2 --duplicate 4,5 --output runs/encoders/minilm-dup45
  hire deepen --encoder all-MiniLM-L6-v2 --duplicate all --output runs/encoders/minilm-dup-all
  hire deepen --encoder roberta-base --layers 0,1,2,3,4,5,6,7,8,9,10,10,11,11 --output runs/encoders/roberta-14
  hire train --model.encoder runs/encoders/minilm-dup45 --data.task CoLA --output_dir runs/cola-dup45
"""


def _cmd_deepen(args: argparse.Namespace) -> int:
    duplicate = parse_indices(args.duplicate, "--duplicate", allow_all=True) if args.duplicate is not None else None
    layers = parse_indices(args.layers, "--layers") if args.layers is not None else None
    from hire.layers.deepen import check_output, deepen_checkpoint

    check_output(args.output, args.encoder, args.overwrite)  # before the weights are read
    record = deepen_checkpoint(args.encoder, args.output, duplicate, layers,
                               duplicate_all=args.duplicate is not None and duplicate is None,
                               overwrite=args.overwrite)
    print(f"{args.encoder} ({record['model_type']}) {record['description']}")
    tokenizer = "tokenizer, " if record["tokenizer"] else "no tokenizer (the source has none), "
    print(f"wrote {args.output}/ (config.json, model.safetensors, {tokenizer}deepen.json)")
    return 0


def _positive(option: str, value: int | None, zero_ok: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not zero_ok)):
        raise ConfigError(f"--{option}: expected a positive integer, not {value}")


def reconstruct_options(args: argparse.Namespace) -> ReconstructOptions:
    """Check the command line (before torch is imported) and build the options."""
    from hire.checks import check_input_file, check_text_columns
    from hire.data.examples import DataError
    from hire.data.glue import get_task
    from hire.layers.runner import ReconstructOptions

    encoders, labels = encoders_and_labels(args)
    columns = [c.strip() for c in args.text_columns.split(",") if c.strip()]
    if args.input is not None:
        if args.task is not None or args.split is not None:
            raise ConfigError("--input: give either --task (and --split) or --input, not both")
        check_input_file(args.input, "--input")
        check_text_columns(columns, None, "--text_columns", "")
    else:
        try:
            spec = get_task(args.task or "CoLA")
        except DataError as err:
            raise ConfigError(f"--task: {err}") from None
        if args.split is not None and args.split not in spec.splits:
            raise ConfigError(f"--split {args.split}: {spec.name} has {', '.join(spec.splits)}")
    for option in ("max_length", "batch_size"):
        _positive(option, getattr(args, option))
    _positive("max_examples", args.max_examples, zero_ok=True)
    check_results_dir(args.output_dir)
    check_encoders(encoders)  # last: it imports torch
    device = _device(args.device)
    return ReconstructOptions(encoders, args.output_dir, labels, None if args.input else (args.task or "CoLA"),
                              args.split, args.data_dir, args.input, columns, args.max_examples or None,
                              args.max_length, args.batch_size, args.decoder, args.x_axis, device)


def _device(choice: str) -> str:
    import torch

    device = choice if choice != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {choice}: no CUDA device here")
    return device


def _cmd_reconstruct(args: argparse.Namespace) -> int:
    from hire.layers.report import load_results, write_report

    if args.report_only:
        check_results_dir(args.output_dir)
        print(write_report(load_results(args.output_dir), args.output_dir))
        return 0
    opts = reconstruct_options(args)
    from hire.layers.runner import run_reconstruction

    results = run_reconstruction(opts)
    print(write_report(results, opts.output_dir))
    print(f"results in {opts.output_dir}/ (results.json, reconstruction.md, reconstruction.csv, reconstruction.png)")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    de = sub.add_parser(
        "deepen", help="make an encoder deeper by duplicating some of its layers (no training)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=DEEPEN_EPILOG,
        description="Write a deeper copy of a Hugging Face encoder: each layer of the new encoder is an "
        "independent copy of a source layer (Kao et al.: duplicate some layers, then fine-tune). Every other "
        "weight (embeddings, shared relative-position tables, a masked-LM head) is kept as it is. The output "
        "is an ordinary checkpoint (config.json, model.safetensors, tokenizer, and deepen.json recording the "
        "source and plan) that AutoModel.from_pretrained and `hire train --model.encoder` load as any other.")
    de.add_argument("--encoder", required=True, help="the source encoder: hub name, local folder or all-MiniLM-L6-v2")
    plan = de.add_mutually_exclusive_group(required=True)
    plan.add_argument("--duplicate", metavar="I,J,..|all", help="0-based layers to duplicate, each copy right "
                      "after its source (4,5: 0 1 2 3 4 4 5 5; a layer listed twice runs three times), or all")
    plan.add_argument("--layers", metavar="I,J,..", help="the new encoder's layers as an explicit order of "
                      "0-based source layers (0,1,2,3,4,4,5,5); a layer may repeat or be left out")
    de.add_argument("--output", required=True, help="the folder to write (new or empty)")
    de.add_argument("--overwrite", action="store_true", help="replace an earlier `hire deepen` output in --output "
                    "(never a folder holding anything else)")
    de.set_defaults(func=_cmd_deepen)

    re_ = sub.add_parser(
        "reconstruct", help="how well each hidden layer's output reconstructs the input tokens",
        description="Feed each hidden state H_0 .. H_l of each encoder to the model's own output layer (its "
        "trained masked-LM head where the checkpoint has one, else the tied input embeddings: logits = H E^T) "
        "and report the top-1 accuracy of recovering the unmasked input tokens at real positions (Kao et al.). "
        "Writes results.json, a table (Markdown, CSV) and a plot to --output_dir.")
    add_encoder_options(re_, "encoder (a `hire deepen` output has its duplicated layers marked)",
                        "the table and plot, comma-separated (default: folder names, else the --encoder values)")
    re_.add_argument("--output_dir", default="runs/reconstruct", help="where results go (default: runs/reconstruct)")
    re_.add_argument("--report_only", action="store_true", help="only redraw the table and plot from "
                     "--output_dir/results.json")
    data = re_.add_argument_group("data options")
    data.add_argument("--task", help="GLUE task whose sentences are read (default: CoLA)")
    data.add_argument("--split", help="its split (default: the task's dev split)")
    data.add_argument("--data_dir", help="GLUE folder (default: $HIRE_GLUE_DIR or ../shared/data/glue)")
    data.add_argument("--input", help="your own file instead (.csv, .tsv, .jsonl with a header)")
    data.add_argument("--text_columns", default="sentence", help="--input: one or two text columns (default: sentence)")
    data.add_argument("--max_examples", type=int, default=500, help="the first N examples (default: 500; 0: all)")
    data.add_argument("--max_length", type=int, default=128, help="maximum tokens per example (default: 128)")
    run = re_.add_argument_group("run options")
    run.add_argument("--decoder", choices=["auto", "mlm-head", "tied-embeddings"], default="auto",
                     help="the output layer: auto takes the trained masked-LM head where the checkpoint has one, "
                     "else the tied input embeddings (default: auto)")
    run.add_argument("--x_axis", choices=["relative", "layer"], default="relative",
                     help="plot against relative depth j/l (encoders of any depth side by side) or layer index")
    run.add_argument("--batch_size", type=int, default=32, help="sentences per forward pass (default: 32)")
    run.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 ... (default: auto)")
    re_.set_defaults(func=_cmd_reconstruct)


__all__ = ["add_commands", "reconstruct_options"]
