"""``hire probe-tokens`` and ``hire probe-tokens-report``: what every hidden state knows about each word, with
controls (:mod:`hire.probing.tokens`).

The options are a typed dataclass parsed by jsonargparse (:mod:`hire.options`); errors go through the ``hire``
command's handler: one line naming the option or file at fault, exit status 2. The options, the output folder,
its earlier results, the encoders and every data file are checked before any encoding or writing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from hire.config import AtLeast1, Positive, Seed
from hire.data.conllu import TREEBANK_HELP
from hire.lab.checks import check_encoders, check_results_dir, positive_numbers, results_of
from hire.lab.options import EncoderList, WordFeatureOptions
from hire.options import Command, folder_command, option, typed_command

EPILOG = """\
tasks: ud-upos, ud-deprel (from --treebank), conll-pos, conll-chunk, conll-ner (from --conll2003), or all.
Controls beside every table: the majority class, a control task (each word type mapped to a random tag drawn
from the training distribution; selectivity = task accuracy - control accuracy) and, when given, an encoder's
random-weight twin (random:<encoder>).

examples:
  hire probe-tokens --encoder all-MiniLM-L6-v2,random:all-MiniLM-L6-v2 --tasks all --output_dir runs/tokens
  hire probe-tokens --encoder all-MiniLM-L6-v2 --tasks ud-upos,ud-deprel --treebank ud/en_gum --subword mean \\
      --output_dir runs/tokens-gum
  hire probe-tokens-report runs/tokens
"""


@dataclass(kw_only=True)
class TokenProbeCommand(WordFeatureOptions, EncoderList):
    """Encode each word once with a frozen encoder (its first, last or mean sub-token, every hidden state, cached),
    then fit a multinomial logistic regression per hidden state (C chosen on dev by token accuracy) for UPOS and
    dependency relations of a UD treebank and CoNLL-2003's POS, chunk and NER tags; score dev and test. Beside every
    table: the majority class, a control task (Hewitt & Liang 2019: each word type mapped to a random tag;
    selectivity = task - control accuracy) and random-weight twins of the encoders (random:<encoder>). Writes
    results.json, report.md (best and expected layer per task) and one figure with every task. The encoder, where
    none is given: all-MiniLM-L6-v2."""

    ENCODER_OPTION: ClassVar[str] = "--encoders"  # the spelling this command's messages named before --encoder

    tasks: list[str] = option("tasks, comma-separated, or all (the default)", [])
    output_dir: str = option("where results.json, report.md and figures/ go (a later run adds encoders or tasks)")
    overwrite: bool = option("start afresh where --output_dir holds probes run with other options", False)
    # data
    treebank: str | None = option(TREEBANK_HELP, None)
    conll2003: str | None = option("CoNLL-2003 folder (default: $HIRE_CONLL2003_DIR or ../shared/data/conll2003)",
                                   None)
    deprel: Literal["universal", "full"] = option("ud-deprel: the universal relation (before ':') or the full one",
                                                  "universal")
    max_train_sentences: AtLeast1 | None = option("the first N training sentences of each source (quick runs)", None)
    max_eval_sentences: AtLeast1 | None = option("the first N dev and test sentences (quick runs)", None)
    # features
    subword: Literal["first", "last", "mean"] = option("a word's vector: its first, last or mean sub-token", "first")
    # probes
    c_grid: str = option("inverse regularisation strengths, chosen per layer on dev, comma-separated",
                         "0.001,0.01,0.1,1")
    max_iter: AtLeast1 = option("L-BFGS iterations at most per probe", 1000)
    tol: Positive = option("the solver stops when no gradient entry exceeds this (scikit-learn's tol; 1e-6 reaches "
                           "the optimum, so scores no longer depend on the solver)", 1e-4)
    seed: Seed = option("the control task's word-type labels (a random:<encoder> always has seed 0: one spec, one "
                        "set of weights, in every command)", 0)


def _cmd_probe_tokens(args: TokenProbeCommand) -> int:
    from hire.probing.tokens import FitSettings, TokenProbeRun, parse_tasks, run_token_probes, summary_rows

    tasks = parse_tasks(args.tasks)
    grid = positive_numbers("--c_grid", args.c_grid)
    device = args.resolved_device()
    encoders = args.encoder_words() or ["all-MiniLM-L6-v2"]
    check_encoders(encoders, args.encoder_option(), max_length=args.max_length)
    run = TokenProbeRun(encoders=encoders, tasks=tasks,
                        output_dir=args.output_dir, treebank=args.treebank, conll2003=args.conll2003,
                        subword=args.subword, deprel=args.deprel, max_train_sentences=args.max_train_sentences,
                        max_eval_sentences=args.max_eval_sentences, max_length=args.max_length,
                        encode_batch_size=args.encode_batch_size, cache_dir=args.cache_dir,
                        fit=FitSettings(grid, args.max_iter, device, args.tol), seed=args.seed,
                        overwrite=args.overwrite)
    from hire.data.glue import data_dir_option

    with data_dir_option("--conll2003"):  # CoNLL-2003's folder, named so where it is missing
        results = run_token_probes(run)
    labels = [e["label"] for e in results["encoders"]]
    for row in summary_rows(results, labels):
        print(f"{row[0]} / {row[1]}: best layer {row[5]}, expected layer {row[6]} (running best {row[7]}), "
              f"majority {row[2]}")
    print(f"results in {args.output_dir}/ (results.json, report.md, figures/layers.png)")
    return 0


def _cmd_report(output_dir: str) -> int:
    from hire.probing.tokens import redraw

    check_results_dir(output_dir, "output_dir", "probe-tokens", ("results.json", "report.md", "figures"),
                      results_of("probe-tokens", "command", "probe-tokens"))
    redraw(output_dir)
    print(f"redrawn: {output_dir}/report.md, figures/layers.png")
    return 0


def add_commands() -> list[Command]:
    """``hire probe-tokens`` and ``hire probe-tokens-report``."""
    return [
        typed_command("probe-tokens", TokenProbeCommand, _cmd_probe_tokens, "probe every hidden state for each word's "
                      "tag (UPOS, dependency relation, POS, chunk, NER), with controls", TokenProbeCommand.__doc__,
                      EPILOG, config=True),
        folder_command("probe-tokens-report", "probe-tokens", _cmd_report,
                       "redraw a token probe's report and figure from its results.json",
                       "Regenerate report.md and figures/layers.png of `hire probe-tokens` from "
                       "OUTPUT_DIR/results.json alone, byte for byte."),
    ]


__all__ = ["TokenProbeCommand", "add_commands"]
