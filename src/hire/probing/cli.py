"""``hire probe`` and ``hire probe-report``: what every layer of a frozen encoder knows.

Each command's options are a typed dataclass, parsed by jsonargparse (:mod:`hire.options`); errors
(``ValueError``, ``DataError``, a missing file) go through the ``hire`` command's handler: one line naming the
option or file at fault, exit status 2. The output folders and the encoders are checked before any work, so a
bad one costs no probing.
Heavy imports (scikit-learn, matplotlib) wait until a command runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hire.config import AtLeast1, ConfigError, Positive, Seed, ranged
from hire.data.conllu import TREEBANK_HELP
from hire.options import Command, folder_command, option, split_words, typed_command

if TYPE_CHECKING:
    from hire.probing.grid import ProbeOptions


def positive_numbers(option: str, text: str) -> tuple[float, ...]:
    """A grid option (``--c_grid 0.01,0.1,1``): positive numbers separated by commas; ConfigError otherwise."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"{option}: expected numbers separated by commas, not {text!r}") from None
    if not values or any(not v > 0 for v in values):  # not > 0: NaN is no strength either
        raise ConfigError(f"{option}: expected positive numbers separated by commas, not {text!r}")
    return values


ENCODERS_HELP = ("an encoder, or several comma-separated: hub name, local folder, all-MiniLM-L6-v2, a run folder "
                 "(its best/), a saved model folder (its fine-tuned encoder), or random:<encoder> (its architecture "
                 "with random weights, fixed seed, and its real tokenizer: an untrained twin)")


def labels_help(option: str) -> str:
    """The help of ``--labels`` beside the encoders' option ``option`` (``--encoder``, ``--encoders``)."""
    return f"names for the encoders in tables and plots, comma-separated (default: the {option} values)"


@dataclass(kw_only=True)
class EncoderOptions:
    """``--encoder`` and ``--labels``, as ``hire probe`` and ``hire reconstruct`` take them: repeatable or
    comma-separated, one label per encoder (``hire rank-probe`` names the same option ``--encoders``)."""

    encoder: list[str] = option(ENCODERS_HELP, [])
    labels: list[str] = option(labels_help("--encoder"), [])


@dataclass(kw_only=True)
class FeatureOptions:
    """How ``hire probe`` and ``hire rank-probe`` encode texts into cached pooled states
    (:class:`hire.probing.features.FeatureSettings`): the cache, its precision, the forward passes and the device
    (which fits the probes too)."""

    cache_dir: str | None = option("feature cache (default: $HIRE_FEATURE_CACHE or ~/.cache/hire/features)", None)
    cache_dtype: Literal["float16", "float32"] = option("stored feature precision (float16: half the space)",
                                                        "float16")
    max_length: AtLeast1 = option("maximum tokens per text encoded (a longer one is cut)", 128)
    batch_size: AtLeast1 = option("texts per encoder forward pass", 64)
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = option(
        "encoder forward precision; auto: bf16 where the hardware is fast at it", "auto")
    device: str = option("cpu, cuda, cuda:1 ... for encoding and fitting the probes (auto: cuda where there is one)",
                         "auto")

    def encoding(self) -> tuple[str, str, str]:
        """The feature cache folder (:func:`feature_cache`), the device (:func:`resolve_device`) and the forward
        precision on it (:func:`forward_precision`), checked."""
        device = resolve_device(self.device)
        precision = forward_precision(self.mixed_precision, device)
        return feature_cache(self.cache_dir), device, precision


def encoders_and_labels(encoder_words: list[str], label_words: list[str], option: str = "--encoder",
                        ) -> tuple[list[str], list[str]]:
    """The encoders (``option``'s words) and ``--labels``, checked: at least one encoder, a distinct name for
    each."""
    encoders, labels = split_words(encoder_words), split_words(label_words)
    if not encoders:
        raise ConfigError(f"{option}: give at least one encoder (hub name, folder, run folder or saved model)")
    if labels and len(labels) != len(encoders):
        raise ConfigError(f"--labels: {len(labels)} names for {len(encoders)} encoders")
    if len(set(labels or encoders)) < len(encoders):
        raise ConfigError("--labels: give each encoder a distinct name" if labels else
                          f"{option}: the same encoder twice")
    return encoders, labels


def check_results_dir(output_dir: str, option: str = "--output_dir", command: str | None = None,
                      writes: Sequence[str] = (), own: Callable[[Path], bool] | None = None) -> None:
    """A folder the command may write its results in, and none of a training run's own files
    (:func:`hire.runs.check_not_run_file`): checked before any work. With ``command``, the folder is also new,
    empty or that command's own output (:func:`hire.checks.check_own_folder`: ``writes`` are the names it writes
    there, ``own`` recognises its output from before markers): no command writes over a file it did not create."""
    from hire.checks import check_output_folder, check_own_folder
    from hire.runs import check_not_run_file

    check_output_folder(output_dir, option)
    check_not_run_file(output_dir, option)
    if command is not None:
        check_own_folder(output_dir, option, command, writes, own)


def results_of(command: str, key: str | None = None, value: Any = None) -> Callable[[Path], bool]:
    """Recognise a folder that ``hire {command}`` wrote before output folders carried a marker: its
    ``results.json`` is a JSON object holding ``key`` (equal to ``value`` where one is given)."""
    def own(folder: Path) -> bool:
        try:
            results = json.loads((folder / "results.json").read_text())
        except (OSError, ValueError):
            return False
        return isinstance(results, dict) and key in results and (value is None or results[key] == value)

    return own


def check_encoders(encoders: list[str], option: str = "--encoder", max_length: int | None = None) -> None:
    """Every encoder of ``option`` loadable (:func:`hire.probing.sources.check_source`), and, given ``max_length``
    (``--max_length``), taking that many tokens (:func:`hire.config.check_max_length`, the check of ``hire train``
    and ``hire predict``), before any work."""
    from hire.config import check_max_length
    from hire.probing.sources import check_source, encoder_config, resolve_source

    for spec in encoders:
        check_source(spec, option)
        if max_length is not None:
            try:
                check_max_length(max_length, encoder_config(resolve_source(spec)), "--max_length")
            except ConfigError as err:
                raise ConfigError(f"{err} ({option} {spec})" if len(encoders) > 1 else str(err)) from None


_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def resolve_device(choice: str, option: str = "--device") -> str:
    """``--device``, the one check of every lab command's: ``auto`` is cuda where there is a CUDA device, else cpu;
    otherwise cpu, cuda or cuda:N of a CUDA device that is here. The lab's encoding and fitting run on a CPU or a
    CUDA GPU: any other torch device (meta, which holds no data; mps; xpu) is refused here, before any work, rather
    than fail in the middle of it. A ConfigError names the option and what to give."""
    if choice != "auto" and not _DEVICE.fullmatch(choice):
        raise ConfigError(f"{option} {choice}: expected auto, cpu, cuda or cuda:N (the encoders run and the probes "
                          "fit on a CPU or a CUDA GPU)")
    if choice == "cpu":
        return choice
    import torch

    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        raise ConfigError(f"{option} {choice}: no CUDA device here; give {option} cpu (or auto)")
    count, index = torch.cuda.device_count(), int(choice.partition(":")[2] or 0)
    if index >= count:
        raise ConfigError(f"{option} {choice}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    return choice


def forward_precision(choice: str, device: str) -> str:
    """``--mixed_precision`` of the encoder's forward passes on ``device``
    (:func:`hire.hardware.resolve_mixed_precision`); fp16 is a ConfigError on CPU."""
    from hire.hardware import resolve_mixed_precision

    precision = resolve_mixed_precision(choice)
    if device == "cpu" and precision == "fp16":
        raise ConfigError("--mixed_precision fp16: not on CPU (use bf16 or no)")
    return precision


def feature_cache(choice: str | None) -> str:
    """``--cache_dir`` (default: :func:`hire.probing.features.default_cache_dir`), checked as a folder the
    command may write in."""
    from hire.probing.features import default_cache_dir

    cache_dir = str(Path(choice or default_cache_dir()).expanduser())
    check_results_dir(cache_dir, "--cache_dir")
    return cache_dir


def options_from_args(args: ProbeCommand) -> ProbeOptions:
    """Check the command line and build :class:`~hire.probing.grid.ProbeOptions`."""
    from hire.probing.classifiers import ProbeSettings
    from hire.probing.grid import ProbeOptions
    from hire.probing.tasks import CustomFiles

    (encoders, labels), tasks = encoders_and_labels(args.encoder, args.labels), split_words(args.task)
    if not tasks:
        raise ValueError("--task: give at least one task (e.g. MR, SST-5, CoLA, MRPC, ud-probes, or custom)")
    cache_dir, device, precision = args.encoding()
    check_results_dir(args.output_dir, command="probe", writes=PROBE_WRITES, own=_probe_own)
    check_encoders(encoders, max_length=args.max_length)
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
    from hire.probing.tables import write_report

    if args.report_only:
        return _redraw(args.output_dir, "--output_dir")
    results = run_probe(options_from_args(args))
    print(write_report(results, args.output_dir))
    print(f"results in {args.output_dir}/ (results.json, report.md, poolings.csv, <task>/table-*.csv, layers.png)")
    return 0


def _redraw(output_dir: str, option: str) -> int:
    from hire.probing.grid import load_results
    from hire.probing.tables import write_report
    from hire.runs import mark_output_folder

    check_results_dir(output_dir, option, "probe", PROBE_WRITES, _probe_own)
    results = load_results(output_dir)
    mark_output_folder(output_dir, "probe")  # a folder from before markers becomes the probe's by its results
    print(write_report(results, output_dir))
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
