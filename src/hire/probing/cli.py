"""``hire probe`` and ``hire probe-report``: what every layer of a frozen encoder knows.

Each command's options are a typed dataclass, parsed by jsonargparse (:mod:`hire.options`); errors
(``ValueError``, ``DataError``, a missing file) go through the ``hire`` command's handler: one line naming the
option or file at fault, exit status 2. The output folders and the encoders are checked before any work, so a
bad one costs no probing.
Heavy imports (scikit-learn, matplotlib) wait until a command runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hire.config import AtLeast1, Positive, Seed, ranged
from hire.data.conllu import TREEBANK_HELP
from hire.lab.checks import check_encoders, check_results_dir, positive_numbers, results_of
from hire.lab.options import EncoderOptions, FeatureOptions
from hire.options import Command, folder_command, option, split_words, typed_command

if TYPE_CHECKING:
    from hire.probing.grid import ProbeOptions


def options_from_args(args: ProbeCommand) -> ProbeOptions:
    """Check the command line and build :class:`~hire.probing.grid.ProbeOptions`."""
    from hire.probing.classifiers import ProbeSettings
    from hire.probing.grid import ProbeOptions
    from hire.probing.tasks import CustomFiles

    (encoders, labels), tasks = args.encoders_and_labels(), split_words(args.task)
    if not tasks:
        raise ValueError("--task: give at least one task (e.g. MR, SST-5, CoLA, MRPC, ud-probes, or custom)")
    cache_dir, device, precision = args.encoding()
    check_results_dir(args.output_dir, command="probe", writes=PROBE_WRITES, own=_probe_own)
    check_encoders(encoders, args.encoder_option(), max_length=args.max_length)
    tasks, treebank = _ud_tasks(args, tasks)
    columns = [c.strip() for c in args.text_columns.split(",") if c.strip()]
    custom = CustomFiles(args.train_file, args.dev_file, args.test_file, columns, args.label_column, args.regression)
    probe = ProbeSettings(args.folds, positive_numbers("--c_grid", args.c_grid),
                          positive_numbers("--alpha_grid", args.alpha_grid), args.seed, tol=args.tol, probe=args.probe)
    return ProbeOptions(encoders, tasks, args.output_dir, labels, cache_dir, args.data_dir,
                        args.senteval_dir, custom, args.max_length, args.batch_size, precision, args.cache_dtype,
                        device, args.max_train_examples, args.max_eval_examples, probe, args.fit_threads,
                        args.overwrite, treebank)


def _ud_tasks(args: ProbeCommand, tasks: list[str]) -> tuple[list[str], str | None]:
    """The tasks with ``ud-probes`` expanded to the UD tasks that ``--treebank`` supports (each skipped one said
    on stderr; other tasks kept in their place), and the treebank folder (None where no UD task is asked). Every
    UD task is built here, so a bad treebank stops the command before any work."""
    import sys

    from hire.data.conllu import default_ud_dir
    from hire.probing.ud import build_ud_tasks, expand, is_ud_task

    ud = [t for t in tasks if is_ud_task(t)]
    if not ud:
        if args.treebank is not None:
            raise ValueError("--treebank: only the UD probing tasks read it (--task ud-probes, ud-tense, ...)")
        return tasks, None
    treebank = str(Path(args.treebank).expanduser() if args.treebank else default_ud_dir())
    suite = build_ud_tasks(treebank, ud, args.seed, command="hire probe")
    for name, why in suite.skipped.items():
        print(f"hire probe: {name} skipped: {why}", file=sys.stderr)
    kept = [t for t in expand(ud) if t in suite.tasks]
    if not kept:
        raise ValueError(f"--task {','.join(ud)}: every task was skipped (too few examples in --treebank "
                         f"{treebank}; see above)")
    out: list[str] = []
    for t in tasks:
        out += [k for k in kept if k not in out] if is_ud_task(t) else [t]
    return out, treebank


PROBE_WRITES = ("results.json", "report.md", "poolings.csv", "layers.png")  # and a folder per task


def _probe_own(folder: Path) -> bool:
    """A ``hire probe`` folder from before markers: its results.json is the probe's format."""
    from hire.probing.grid import FORMAT

    return results_of("probe", "format", FORMAT)(folder)


def _cmd_probe(args: ProbeCommand) -> int:
    from hire.probing.grid import run_probe
    from hire.probing.tables import write_probe_report

    if args.report_only:
        return _redraw(args.output_dir, "--output_dir")
    results = run_probe(options_from_args(args))
    print(write_probe_report(results, args.output_dir))
    print(f"results in {args.output_dir}/ (results.json, report.md, poolings.csv, <task>/table-*.csv, layers.png)")
    return 0


def _redraw(output_dir: str, option: str) -> int:
    from hire.probing.grid import load_results
    from hire.probing.tables import write_probe_report
    from hire.runs import mark_output_folder

    check_results_dir(output_dir, option, "probe", PROBE_WRITES, _probe_own)
    results = load_results(output_dir)
    mark_output_folder(output_dir, "probe")  # a folder from before markers becomes the probe's by its results
    print(write_probe_report(results, output_dir))
    return 0


# -- the options of each command: typed dataclasses, parsed by jsonargparse (hire.options) ------------------------
AtLeast2 = ranged(int, (">=", 2), name="AtLeast2")  # cross-validation folds


@dataclass(kw_only=True)
class ProbeCommand(FeatureOptions, EncoderOptions):
    """Encode a task once with a frozen encoder (features cached), then fit a logistic-regression probe (ridge for
    regression) on every hidden state x pooling (cls, sep, mean, max) and on concatenations of layers, under
    SentEval's protocol: 10-fold cross-validation where a task has no split, else train -> dev (and test where
    labelled). Writes tables, a plot and results.json."""

    task: list[str] = option("a task, or several comma-separated: a GLUE task (CoLA, SST-2, MRPC, STS-B, RTE, ...), a "
                             "--senteval_dir folder (MR, CR, MPQA, SST-5), custom, or SentEval's probing tasks from "
                             "a --treebank: ud-probes (all), ud-sentlen, ud-wc, ud-bshift, ud-treedepth, ud-topconst, "
                             "ud-tense, ud-subjnum, ud-objnum, ud-coordinv", [])
    output_dir: str = option("where results go", "runs/probe")
    overwrite: bool = option("replace results of other options in --output_dir (the same options resume; a command "
                             "that adds encoders or tasks keeps the results there and runs only the new ones)", False)
    report_only: bool = option("only redraw tables and figures from --output_dir/results.json (as `hire "
                               "probe-report`)", False)
    # data
    data_dir: str | None = option("GLUE folder (default: $HIRE_GLUE_DIR or ../shared/data/glue)", None)
    treebank: str | None = option(TREEBANK_HELP, None)
    senteval_dir: str | None = option("SentEval-style folder, one sub-folder per task with all.tsv or "
                                      "train/dev/test.tsv (default: $HIRE_SENTEVAL_DIR or senteval/ beside the GLUE "
                                      "folder)", None)
    train_file: str | None = option("custom task: training file (.csv, .tsv, .jsonl); alone: k-fold CV", None)
    dev_file: str | None = option("custom task: labelled evaluation file", None)
    test_file: str | None = option("custom task: labelled test file (C is then chosen on dev)", None)
    text_columns: str = option("custom task: one or two text columns, comma-separated", "sentence")
    label_column: str = option("custom task: the label column", "label")
    regression: bool = option("custom task: the label is a real number", False)
    max_train_examples: AtLeast1 | None = option("a random subset of N training (or CV) examples", None)
    max_eval_examples: AtLeast1 | None = option("a random subset of N examples of each dev/test split", None)
    # probes
    folds: AtLeast2 = option("cross-validation folds where a task has no split", 10)
    c_grid: str = option("logistic regression: inverse regularisation strengths to choose from, comma-separated",
                         "0.001,0.01,0.1,1")
    tol: Positive = option("logistic regression: the solver stops when no gradient entry exceeds this "
                           "(scikit-learn's tol; 1e-6 reaches the optimum, so scores no longer depend on the solver)",
                           1e-4)
    alpha_grid: str = option("ridge regression: penalties to choose from by leave-one-out, comma-separated",
                             "0.1,1,10,100,1000,10000")
    seed: Seed = option("folds, held-out selection split, subsets", 0)
    probe: Literal["linear", "mlp"] = option("linear: logistic regression (ridge for regression), C chosen from "
                                             "--c_grid; mlp: SentEval's MLP probe (50 hidden units, early stopping)",
                                             "linear")
    fit_threads: AtLeast1 = option("BLAS threads while fitting (1: the fastest for probes of this size; several "
                                   "probes never run at once)", 1)


@dataclass(kw_only=True)
class UDTasksCommand:
    """Build SentEval's probing tasks (Conneau et al. 2018: SentLen, WC, BShift, TreeDepth, TopConst, Tense,
    SubjNum, ObjNum, CoordInv) from a Universal Dependencies treebank's own train/dev/test split, as `hire probe
    --task ud-probes` does, and print each task's rule, examples per split and class, and one example per class;
    tasks the treebank cannot support are named with the reason."""

    treebank: str | None = option(TREEBANK_HELP, None)
    task: list[str] = option("ud-probes (all) or UD tasks by name, comma-separated", ["ud-probes"])
    seed: Seed = option("the random choices: balancing, which sentences are swapped", 0)
    output_dir: str | None = option("also write each task there as a SentEval folder named after the SentEval task "
                                    "(Tense/train.tsv, dev.tsv, test.tsv, with the header label<TAB>sentence) and "
                                    "the description as README.md", None)


def _ud_writes() -> tuple[str, ...]:
    """What ``hire ud-tasks --output_dir`` writes there: README.md and a folder per SentEval task."""
    from hire.probing.ud import UD_TASKS

    return ("README.md", *dict.fromkeys(spec.senteval for spec in UD_TASKS.values()))


def _ud_own(folder: Path) -> bool:
    """A ``hire ud-tasks`` folder from before markers: its README.md is the description ud-tasks writes."""
    from hire.checks import own_file

    return own_file(folder / "README.md", lambda line: line.startswith("# Probing tasks from "))


def _cmd_ud_tasks(args: UDTasksCommand) -> int:
    from hire.probing.ud import build_ud_tasks, describe, write_senteval_folders

    if args.output_dir is not None:
        check_results_dir(args.output_dir, command="ud-tasks", writes=_ud_writes(), own=_ud_own)
    suite = build_ud_tasks(args.treebank, split_words(args.task) or ["ud-probes"], args.seed, command="hire ud-tasks")
    text = describe(suite)
    print(text, end="")
    if args.output_dir is not None:
        write_senteval_folders(suite, Path(args.output_dir), text)
        print(f"tasks in {args.output_dir}/ (Tense/train.tsv, dev.tsv, test.tsv, ...: `hire probe --senteval_dir "
              f"{args.output_dir} --task Tense` reads them)")
    return 0


def add_commands() -> list[Command]:
    """``hire probe`` and ``hire probe-report``."""
    return [
        typed_command("probe", ProbeCommand, _cmd_probe,
                      "probe every hidden state and pooling of frozen encoders with linear classifiers",
                      ProbeCommand.__doc__, config=True),
        typed_command("ud-tasks", UDTasksCommand, _cmd_ud_tasks,
                      "show (and write) the SentEval-style probing tasks built from a UD treebank",
                      UDTasksCommand.__doc__),
        folder_command("probe-report", "probe", lambda output_dir: _redraw(output_dir, "output_dir"),
                       "redraw a probe's tables and figures from its results.json",
                       "Regenerate report.md, the CSV tables and the plots of `hire probe` from "
                       "OUTPUT_DIR/results.json, byte for byte."),
    ]


__all__ = ["ProbeCommand", "UDTasksCommand", "add_commands"]
