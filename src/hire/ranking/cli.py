"""``hire rank-probe`` and ``hire rank-probe-report``: answer ranking with every layer and pooling of a frozen encoder.

The options are a typed dataclass parsed by jsonargparse (:mod:`hire.options`); errors go through the ``hire``
command's handler: one line naming the option or file at fault, exit status 2. Options, files, the output folder and
the encoders are checked, and the data read, before anything is encoded or written.
Heavy imports (torch, matplotlib) wait until a command runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from hire.config import AtLeast1, ConfigError, NonNegative, Positive, Seed
from hire.lab.checks import check_encoders, check_results_dir, results_of
from hire.lab.options import EncoderOptions, FeatureOptions
from hire.options import Command, choose_names, folder_command, option, typed_command
from hire.ranking import LOSSES, SCORERS

if TYPE_CHECKING:
    from hire.ranking.settings import RankProbeOptions

EPILOG = """\
scorers: cosine (untrained), bilinear (u^T W v), logistic and mlp (on [u; v; u*v; |u-v|]); losses: hinge (pairwise
rank hinge) and pointwise (binary cross-entropy). Every hidden state, first+last, the last four and all of them,
each under cls, sep, mean and max pooling, is a cell of every (scorer, loss) block.

examples:
  hire rank-probe --encoder all-MiniLM-L6-v2 --task wikiqa --output_dir runs/rank-probe-minilm
  hire rank-probe --encoder all-MiniLM-L6-v2,random:all-MiniLM-L6-v2 --output_dir runs/rank-probe-untrained
  hire rank-probe --encoder all-MiniLM-L6-v2 --max_train_questions 200 --scorers cosine,logistic \\
      --losses hinge --output_dir runs/rank-probe-quick
  hire rank-probe --encoder all-MiniLM-L6-v2 --task custom --train_file train.tsv --dev_file dev.tsv \\
      --test_file test.tsv --columns qid=QuestionID,question=Question,pid=SentenceID,passage=Sentence,label=Label \\
      --output_dir runs/rank-probe-mine
  hire rank-probe-report runs/rank-probe-minilm
"""


@dataclass(kw_only=True)
class RankProbeCommand(FeatureOptions, EncoderOptions):
    """Encode each question and candidate passage apart, once, with a frozen encoder (pooled states cached), then
    score every hidden state and concatenation of layers under CLS, SEP, mean and max pooling with cosine similarity
    and with learned scorers (bilinear; [u; v; u*v; |u-v|] into a logistic layer or an MLP) trained with the
    pairwise rank hinge loss or pointwise cross-entropy, all feature sets at once, early stopping on dev MAP. BM25
    is the baseline row. Writes results.json, report.md, tables, MAP-by-layer figures, and TREC run files and qrels
    of each block's best cell."""

    ENCODER_OPTION: ClassVar[str] = "--encoders"  # the spelling this command's messages named before --encoder

    output_dir: str = option("where results.json, report.md, tables/, figures/, runs/ and qrels/ go",
                             "runs/rank-probe")
    overwrite: bool = option("replace results of other options in --output_dir (the same options resume; a command "
                             "that adds encoders, scorers or losses runs only the new blocks)", False)
    # data
    task: Literal["wikiqa", "custom"] = option("wikiqa (WikiQA-{train,dev,test}.tsv in --data_dir) or custom "
                                               "(--train_file, --dev_file, --test_file)", "wikiqa")
    data_dir: str | None = option("WikiQA folder (default: $HIRE_WIKIQA_DIR or ../shared/data/wikiqa)", None)
    train_file: str | None = option("custom: training candidates (.tsv, .csv, .jsonl)", None)
    dev_file: str | None = option("custom: dev candidates (early stopping and the choice of the best cell)", None)
    test_file: str | None = option("custom: test candidates (scored with each cell's dev-chosen weights)", None)
    format: Literal["auto", "tsv", "csv", "jsonl"] = option("custom: file format (auto: by extension)", "auto")
    columns: dict[str, Any] = option("custom: the column of each field, field=column pairs (fields: qid, question, "
                                     "pid, passage, label; 0-based indices for files without a header)", {})
    keep: Literal["has-positive", "has-both", "all"] = option(
        "which questions count, in every split: with a relevant candidate (WikiQA's usual evaluation), with a "
        "relevant one and two different grades (0/1 labels: a relevant and a non-relevant one), or all",
        "has-positive")
    max_train_questions: AtLeast1 | None = option("a random subset of N training questions (quick runs)", None)
    # the grid
    scorers: list[str] = option(f"scorers, comma-separated: {', '.join(SCORERS)} (default: all)", [])
    losses: list[str] = option(f"losses of the learned scorers, comma-separated: {', '.join(LOSSES)} (default: "
                               "both)", [])
    # training the learned scorers
    epochs: AtLeast1 = option("training epochs at most (early stopping on dev MAP usually ends sooner)", 10)
    patience: AtLeast1 = option("epochs without a better dev MAP before a feature set stops", 2)
    lr: Positive = option("Adam learning rate", 1e-3)
    weight_decay: NonNegative = option("Adam's L2 penalty", 0.0)
    batch_questions: AtLeast1 = option("questions per training step (with all their candidates)", 16)
    margin: Positive = option("the hinge loss's margin", 1.0)
    mlp_hidden: AtLeast1 = option("the MLP scorer's hidden units", 128)
    seed: Seed = option("initial weights, data order, the training subset", 0)


def _files(args: RankProbeCommand) -> dict[str, str]:
    """The custom files, checked: train and dev needed with --task custom, none without it."""
    from hire.checks import check_input_file
    from hire.data.ranking import FIELDS

    files = {s: f for s, f in (("train", args.train_file), ("dev", args.dev_file), ("test", args.test_file)) if f}
    if args.task != "custom":
        if files:
            raise ConfigError(f"--{next(iter(files))}_file: only with --task custom")
        if args.columns or args.format != "auto":
            raise ConfigError(f"--{'columns' if args.columns else 'format'}: only with --task custom")
        return {}
    for name, column in args.columns.items():
        if name not in FIELDS:
            raise ConfigError(f"--columns: unknown field {name!r}; the fields are {', '.join(FIELDS)}")
        if isinstance(column, bool) or not isinstance(column, str | int) or column == "":
            raise ConfigError(f"--columns: {name}={column!r}: give a column name, or a 0-based index")
    for split in ("train", "dev"):
        if split not in files:
            raise ConfigError(f"--{split}_file: --task custom needs a {split} file")
    for split, path in files.items():
        check_input_file(path, f"--{split}_file")
    return files


def options_from_args(args: RankProbeCommand) -> RankProbeOptions:
    """Check the command line (names, files, folders, encoders) and build the grid's options."""
    scorers = choose_names(args.scorers, "--scorers", SCORERS)
    losses = choose_names(args.losses, "--losses", LOSSES)
    if args.data_dir is not None and args.task != "wikiqa":
        raise ConfigError("--data_dir: only with --task wikiqa (give --train_file ... with --task custom)")
    files = _files(args)
    encoders, labels = args.encoders_and_labels()
    check_results_dir(args.output_dir, command="rank-probe", writes=WRITES, own=_own)
    from hire.ranking.settings import FitSettings, RankProbeOptions

    cache_dir, device, precision = args.encoding()
    check_encoders(encoders, args.encoder_option(), max_length=args.max_length)
    fit = FitSettings(args.epochs, args.patience, args.lr, args.weight_decay, args.batch_questions, args.margin,
                      args.mlp_hidden, args.seed, device)
    return RankProbeOptions(encoders, args.output_dir, labels, args.task, args.data_dir, files, args.format,
                            dict(args.columns) or None, args.keep, scorers, losses, args.max_train_questions,
                            cache_dir, args.max_length, args.batch_size, precision, args.cache_dtype, fit,
                            args.overwrite)


def _cmd_rank_probe(args: RankProbeCommand) -> int:
    from hire.data.glue import data_dir_option
    from hire.ranking.frozen import run_rank_probe
    from hire.ranking.tables import write_rank_report

    with data_dir_option("--data_dir"):  # WikiQA's folder, named so where it is missing
        results = run_rank_probe(options_from_args(args))
    write_rank_report(results, args.output_dir)
    best = results.get("best")
    if best:
        split = "test" if "test" in best else "dev"
        print(f"best by dev MAP: {best['label']}, {best['scorer']} ({best['loss']}), {best['row']} {best['pooling']}: "
              f"{split} MAP {100 * best[split]['map']:.2f}")
    print(f"results in {args.output_dir}/ (results.json, report.md, tables/, figures/, runs/, qrels/)")
    return 0


WRITES = ("results.json", "report.md", "tables", "figures", "runs", "qrels")  # at the top of --output_dir


def _own(folder: Path) -> bool:
    """A ``hire rank-probe`` folder from before markers: its results.json is the rank probe's format."""
    from hire.ranking.tables import FORMAT

    return results_of("rank-probe", "format", FORMAT)(folder)


def _cmd_report(output_dir: str) -> int:
    from hire.ranking.tables import load_results, write_rank_report
    from hire.runs import mark_output_folder

    check_results_dir(output_dir, "output_dir", "rank-probe", WRITES, _own)
    results = load_results(output_dir)
    mark_output_folder(output_dir, "rank-probe")  # a folder from before markers becomes the probe's by its results
    write_rank_report(results, output_dir)
    print(f"report in {output_dir}/report.md")
    return 0


def add_commands() -> list[Command]:
    """``hire rank-probe`` and ``hire rank-probe-report``."""
    return [
        typed_command("rank-probe", RankProbeCommand, _cmd_rank_probe,
                      "rank answer passages with every layer and pooling of frozen encoders, against BM25",
                      RankProbeCommand.__doc__, EPILOG, config=True),
        folder_command("rank-probe-report", "rank-probe", _cmd_report,
                       "redraw a rank probe's tables and figures from its results.json",
                       "Regenerate report.md, tables/ and figures/ of `hire rank-probe` from "
                       "OUTPUT_DIR/results.json alone."),
    ]


__all__ = ["add_commands"]
