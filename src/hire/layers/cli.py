"""``hire deepen`` and ``hire reconstruct``: a deeper encoder by duplicating layers, and what each hidden
layer still says about its input (Kao et al.).

Each command's options are a typed dataclass, parsed by jsonargparse (:mod:`hire.options`); errors
(``ValueError``, ``ConfigError``, ``DataError``, a missing file) go through the ``hire`` command's handler:
one line naming the option or file at fault, exit status 2. Every option is checked before torch and
transformers are imported.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from jsonargparse.typing import NonNegativeInt

from hire.config import AtLeast1, ConfigError
from hire.lab.checks import check_encoders, check_results_dir, results_of
from hire.lab.options import DeviceOption, EncoderOptions, LengthOption
from hire.layers.plan import FAMILIES, FAMILY_NAMES, parse_indices
from hire.options import Command, option, typed_command

if TYPE_CHECKING:
    from hire.layers.grid import ReconstructOptions

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


def _cmd_deepen(args: DeepenOptions) -> int:
    if (args.duplicate is None) == (args.layers is None):
        raise ConfigError("--layers: not allowed with --duplicate; give one of them" if args.layers is not None else
                          "--duplicate or --layers: give one of them")
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


def reconstruct_options(args: ReconstructCommand) -> ReconstructOptions:
    """Check the command line (before torch is imported) and build the options."""
    from hire.checks import check_input_file, check_text_columns
    from hire.data.examples import DataError
    from hire.data.glue import get_task
    from hire.layers.grid import ReconstructOptions

    encoders, labels = args.encoders_and_labels()
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
    _check_output(args.output_dir)
    check_encoders(encoders, args.encoder_option(), max_length=args.max_length)  # last: it imports torch
    device = args.resolved_device()
    return ReconstructOptions(encoders, args.output_dir, labels, None if args.input else (args.task or "CoLA"),
                              args.split, args.data_dir, args.input, columns, args.max_examples or None,
                              args.max_length, args.batch_size, args.decoder, args.x_axis, device)


def _check_output(output_dir: str) -> None:
    """``--output_dir``: new, empty or ``hire reconstruct``'s own (its results.json, from before markers)."""
    from hire.layers.tables import FORMAT

    check_results_dir(output_dir, command="reconstruct", own=results_of("reconstruct", "format", FORMAT),
                      writes=("results.json", "reconstruction.md", "reconstruction.csv", "reconstruction.png"))


def _cmd_reconstruct(args: ReconstructCommand) -> int:
    from hire.layers.tables import load_results, write_reconstruct_report

    if args.report_only:
        from hire.runs import mark_output_folder

        _check_output(args.output_dir)
        results = load_results(args.output_dir)
        mark_output_folder(args.output_dir, "reconstruct")  # a folder from before markers: its results make it so
        print(write_reconstruct_report(results, args.output_dir))
        return 0
    opts = reconstruct_options(args)
    from hire.layers.grid import run_reconstruction

    results = run_reconstruction(opts)
    print(write_reconstruct_report(results, opts.output_dir))
    print(f"results in {opts.output_dir}/ (results.json, reconstruction.md, reconstruction.csv, reconstruction.png)")
    return 0


# -- the options of each command: typed dataclasses, parsed by jsonargparse (hire.options) ------------------------
AtLeast0 = Annotated[int, NonNegativeInt]


@dataclass(kw_only=True)
class DeepenOptions:
    """Write a deeper copy of a Hugging Face encoder: each layer of the new encoder is an independent copy of a
    source layer (Kao et al.: duplicate some layers, then fine-tune). Every other weight (embeddings, shared
    relative-position tables, a masked-LM head) is kept as it is. The output is an ordinary checkpoint (config.json,
    model.safetensors, tokenizer, and deepen.json recording the source and plan) that AutoModel.from_pretrained and
    `hire train --model.encoder` load as any other."""

    encoder: str = option("the source encoder: hub name, local folder or all-MiniLM-L6-v2")
    duplicate: str | None = option("0-based layers to duplicate, I,J,.. or all: each copy right after its source "
                                   "(4,5: 0 1 2 3 4 4 5 5; a layer listed twice runs three times); or give --layers",
                                   None)
    layers: str | None = option("the new encoder's layers as an explicit order of 0-based source layers, I,J,.. "
                                "(0,1,2,3,4,4,5,5); a layer may repeat or be left out", None)
    output: str = option("the folder to write (new or empty)")
    overwrite: bool = option("replace an earlier `hire deepen` output in --output (never a folder holding anything "
                             "else)", False)


@dataclass(kw_only=True)
class ReconstructCommand(DeviceOption, LengthOption, EncoderOptions):
    """Feed each hidden state H_0 .. H_l of each encoder to the model's own output layer (its trained masked-LM head
    where the checkpoint has one, else the tied input embeddings: logits = H E^T) and report the top-1 accuracy of
    recovering the unmasked input tokens at real positions (Kao et al.). Writes results.json, a table (Markdown,
    CSV) and a plot to --output_dir."""

    output_dir: str = option("where results go", "runs/reconstruct")
    report_only: bool = option("only redraw the table and plot from --output_dir/results.json", False)
    # data
    task: str | None = option("GLUE task whose sentences are read (default: CoLA)", None)
    split: str | None = option("its split (default: the task's dev split)", None)
    data_dir: str | None = option("GLUE folder (default: $HIRE_GLUE_DIR or ../shared/data/glue)", None)
    input: str | None = option("your own file instead (.csv, .tsv, .jsonl with a header)", None)
    text_columns: str = option("--input: one or two text columns, comma-separated", "sentence")
    max_examples: AtLeast0 = option("the first N examples (0: all)", 500)
    # run
    decoder: Literal["auto", "mlm-head", "tied-embeddings"] = option(
        "the output layer: auto takes the trained masked-LM head where the checkpoint has one, else the tied input "
        "embeddings", "auto")
    x_axis: Literal["relative", "layer"] = option("plot against relative depth j/l (encoders of any depth side by "
                                                  "side) or layer index", "relative")
    batch_size: AtLeast1 = option("sentences per forward pass", 32)


def add_commands() -> list[Command]:
    """``hire deepen`` and ``hire reconstruct``."""
    return [
        typed_command("deepen", DeepenOptions, _cmd_deepen,
                      "make an encoder deeper by duplicating some of its layers (no training)",
                      DeepenOptions.__doc__, DEEPEN_EPILOG),
        typed_command("reconstruct", ReconstructCommand, _cmd_reconstruct,
                      "how well each hidden layer's output reconstructs the input tokens",
                      ReconstructCommand.__doc__, config=True),
    ]


__all__ = ["add_commands", "reconstruct_options"]
