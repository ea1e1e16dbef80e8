"""``hire features``: BERT's feature-based NER (Table 7) on any encoder.

The options are a typed dataclass parsed by jsonargparse (:mod:`hire.options`); errors go through the ``hire``
command's handler: one line naming the option or file at fault, exit status 2. Options, the output folder and the
encoder are checked before any data is read or any feature computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hire.config import AtLeast1, ConfigError, Positive, Probability, Seed
from hire.featurebased import ROWS
from hire.lab.options import WordFeatureOptions
from hire.options import Command, choose_names, option, split_words, typed_command

EPILOG = f"""\
rows: {', '.join(ROWS)} (or all). Each word's features are its first sub-token's hidden states;
sum-last-4 and sum-all are learned scalar mixes (softmax weights and a scale), hire-mix is HIRE's extractor
(eq. 2-5, per sentence, beyond the paper).

examples:
  hire features --encoder all-MiniLM-L6-v2 --rows all --seed 1 --output_dir runs/table7-minilm
  hire features --encoder random:all-MiniLM-L6-v2 --rows all --seed 1 --output_dir runs/table7-minilm-untrained
  hire features --encoder all-MiniLM-L6-v2 --rows last,concat-last-4 --max_train_examples 2000 --epochs 2 \\
      --output_dir runs/table7-quick
  hire features --task custom --train_file ner/train.conll --dev_file ner/dev.conll --rows last --output_dir runs/ner
"""


def parse_rows(words: Sequence[str]) -> list[str]:
    """``--rows``: names or ``all``, comma-separated or repeated; ConfigError for an unknown one."""
    return choose_names(words, "--rows", ROWS, "row", all_word=True)


def rows_of_encoder(words: Sequence[str], rows: list[str], encoder: str) -> list[str]:
    """``rows`` (:func:`parse_rows` of ``--rows``' ``words``) that ``--encoder`` has the hidden states for, checked
    before any feature is computed or tagger trained: the last-4 rows need 4 hidden states (3 layers and the
    embeddings). Rows named one by one that it lacks are an error; ``all`` (the default) means the rows it has,
    those it lacks said on stderr."""
    import sys

    from hire.featurebased.rows import row_layers
    from hire.lab.sources import encoder_config, resolve_source

    states = encoder_config(resolve_source(encoder)).num_hidden_layers + 1
    lacking = []
    for row in rows:
        try:
            row_layers(row, states)
        except ValueError:
            lacking.append(row)
    if not lacking:
        return rows
    why = f"need 4 hidden states, and --encoder {encoder} has {states} (its {states - 1} layers and the embeddings)"
    named = [row for row in lacking if row in split_words(words)]
    if named:
        raise ConfigError(f"--rows {','.join(named)}: {why}; leave {'it' if len(named) == 1 else 'them'} out, or give "
                          "--rows all for the rows it has")
    print(f"hire features: {', '.join(lacking)} skipped: {why}", file=sys.stderr)
    return [row for row in rows if row not in lacking]


@dataclass(kw_only=True)
class FeaturesCommand(WordFeatureOptions):
    """Compute once, with the encoder frozen, every word's hidden states H_0 .. H_l at its first sub-token for each
    split (cached on disk as float16, keyed by the encoder's files and the data), then train a randomly initialised
    2-layer BiLSTM (the encoder's width per direction) and a linear layer on each feature set (--rows), with early
    stopping on dev entity F1 (seqeval, strict IOB2; token accuracy for POS). Training never runs the encoder. Each
    row gets a run folder under --output_dir; results.md compares them."""

    encoder: str = option("the frozen encoder: hub name, local folder, all-MiniLM-L6-v2, a run / saved model "
                          "folder (its fine-tuned encoder), or random:<encoder> (its architecture with random "
                          "weights, fixed seed, and its real tokenizer: an untrained twin)", "all-MiniLM-L6-v2")
    rows: list[str] = option("feature sets to train a tagger on, comma-separated, or all (the default)", [])
    output_dir: str = option("where the run folders (one per row) and results.json / results.md go")
    overwrite: bool = option("replace rows in --output_dir that were run with other options", False)
    # data
    task: Literal["conll2003", "custom"] = option("conll2003 (from --data_dir) or custom (--train_file ...)",
                                                  "conll2003")
    tag_column: Literal["ner", "chunk", "pos"] | None = option(
        "which tags: conll2003's (default ner); custom CoNLL files in CoNLL-2003's columns (word POS chunk NER): that "
        "column (default: the last column)", None)
    data_dir: str | None = option("CoNLL-2003 folder (default: $HIRE_CONLL2003_DIR or ../shared/data/conll2003)",
                                  None)
    train_file: str | None = option("custom: training file (CoNLL columns, tag last; or --format tokens)", None)
    dev_file: str | None = option("custom: dev file (early stopping)", None)
    test_file: str | None = option("custom: test file (scored once, with the best epoch)", None)
    format: Literal["conll", "tokens"] = option("custom: file format (tokens: JSON lines of tokens and tags)",
                                                "conll")
    max_train_examples: AtLeast1 | None = option("the first N training sentences (quick runs)", None)
    max_eval_examples: AtLeast1 | None = option("the first N dev and test sentences (quick runs)", None)
    # features
    cache_only: bool = option("only compute (or find) the cached features, train nothing", False)
    # tagger
    epochs: AtLeast1 = option("training epochs at most (early stopping on dev may end sooner)", 4)
    patience: AtLeast1 = option("epochs without a better dev score before stopping", 2)
    lr: Positive = option("Adam learning rate", 1e-3)
    batch_size: AtLeast1 = option("sentences per training batch", 32)
    hidden_size: AtLeast1 | None = option("BiLSTM units per direction (default: the encoder's width)", None)
    dropout: Probability = option("dropout on the BiLSTM's input, output and between its layers", 0.1)
    seed: Seed = option("tagger initialisation and data order", 1)


def _cmd_features(args: FeaturesCommand) -> int:
    from hire.checks import check_input_file
    from hire.lab.checks import check_encoders, check_results_dir, results_of

    rows = parse_rows(args.rows)
    files = {"train": args.train_file, "dev": args.dev_file, "test": args.test_file}
    if args.task == "custom":
        for split in ("train", "dev"):
            if files[split] is None:
                raise ConfigError(f"--{split}_file: --task custom needs a {split} file")
        for split, path in files.items():
            if path is not None:
                check_input_file(path, f"--{split}_file")
    elif any(files.values()):
        given = next(split for split, path in files.items() if path is not None)
        raise ConfigError(f"--{given}_file: only with --task custom")
    check_results_dir(args.output_dir, command="features", writes=("results.json", "results.md", *rows),
                      own=results_of("features", "caches"))
    if args.cache_dir is not None:
        check_results_dir(args.cache_dir, "--cache_dir")
    check_encoders([args.encoder], max_length=args.max_length)  # imports torch
    rows = rows_of_encoder(args.rows, rows, args.encoder)
    from hire.featurebased.grid import FeatureRun, run_features, summary_table
    from hire.featurebased.tagger import TaggerSettings

    device = args.resolved_device()
    tagger = TaggerSettings(args.epochs, args.lr, args.batch_size, args.patience, args.dropout, args.hidden_size,
                            args.seed, device)
    if args.task == "custom" and args.tag_column is not None and args.format != "conll":
        raise ConfigError(f"--tag_column {args.tag_column}: for CoNLL columns; --format {args.format} has one list of "
                          "tags per sentence")
    run = FeatureRun(args.encoder, rows, args.output_dir, args.task, args.tag_column, args.data_dir,
                     files if args.task == "custom" else {}, args.format, args.max_train_examples,
                     args.max_eval_examples, args.cache_only, args.overwrite, tagger, max_length=args.max_length,
                     encode_batch_size=args.encode_batch_size, cache_dir=args.cache_dir)
    from hire.data.glue import data_dir_option

    with data_dir_option("--data_dir"):  # CoNLL-2003's folder, named so where it is missing
        results = run_features(run)
    for split, cache in results["caches"].items():
        state = "found" if cache["cached"] else f"written in {cache['encode_seconds']:.0f} s"
        print(f"{split}: {cache['sentences']} sentences, {cache['words']} words; features {state}: {cache['path']}")
    if not args.cache_only:
        print("\n".join(summary_table(results)))
        print(f"results in {args.output_dir}/ (results.json, results.md, <row>/metrics.json, epochs.jsonl, "
              "predictions/<split>.jsonl)")
    return 0


def add_commands() -> list[Command]:
    """``hire features``."""
    return [typed_command("features", FeaturesCommand, _cmd_features, "tag words from a frozen encoder's cached "
                          "features with a BiLSTM (BERT's feature-based Table 7)", FeaturesCommand.__doc__, EPILOG,
                          config=True)]


__all__ = ["add_commands", "parse_rows"]
