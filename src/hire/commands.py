"""The commands on saved models and run folders: ``hire evaluate``, ``predict``, ``export``, ``heads``, ``report``.

Every option is checked, and the model folder read (:mod:`hire.saved_model`: its configuration, whole
weights, a tokenizer), before the model is loaded or any file written: a model never reads text columns other
than those it was trained on, and weights that do not fit its configuration are refused, never started at
random. No output path is a run folder or lies in a run's own files (:func:`hire.runs.check_not_run_file`), nor
is it a command's own input (predict's input file and model files, report's ``metrics.json``); ``hire
evaluate`` of a run's ``best/`` writes beside it, in ``RUN/eval-TASK``. ``hire export`` writes its copy under a
temporary name beside the target and renames it into place once whole. ``hire evaluate`` predicts with the
same pipeline as the end of training (:func:`hire.evaluation.predict_task`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hire.checks import check_input_file, check_output_file, check_output_folder, check_own_file, check_own_folder
from hire.config import AtLeast1, ConfigError, DataConfig, MaxLength, check_max_length
from hire.data.examples import DataError
from hire.data.glue import data_dir_option
from hire.options import Command, option, typed_command
from hire.prediction import (  # noqa: F401 (model_precision, recorded_precision: hire.commands' names, as before)
    default_eval_dir,
    load_checked_model,
    load_for_prediction,
    model_precision,
    output_option,
    recorded_precision,
)
from hire.runs import check_not_run_file, write_atomic
from hire.saved_model import check_model_folder, run_card, trained_max_length
from hire.tasktype import TaskKind, task_kind_for, task_kind_of_model, task_kinds

EVALUATION = ".hire-eval"  # the marker of a folder that `hire evaluate` wrote: only such a folder is written again


def _evaluation_kind(args: EvaluateOptions, config: dict[str, Any]) -> TaskKind:
    """The kind of task of the model, which must be the kind of ``--task``.

    Raises:
        ConfigError: the task and the model are of two kinds (e.g. ``--task wikiqa`` with a model that tags
            words), naming what each does.
    """
    model = task_kind_of_model(config.get("task_type"))
    asked = task_kind_for(DataConfig(task=args.task))
    if asked is not model:
        raise ConfigError(f"--task {args.task}: --model {args.model} {model.describe()}, and the task "
                          f"{asked.describe()}")
    return model


def _run_defaults(args: _PredictingOptions, config: dict[str, Any]) -> None:
    """``--max_length`` left out: the run's, for a run's ``best/`` (:func:`trained_max_length`), else 128."""
    if args.max_length is None:
        args.max_length = trained_max_length(args.model, config) or 128


def _cmd_evaluate(args: EvaluateOptions) -> int:
    config = check_model_folder(args.model)
    _run_defaults(args, config)
    name, data = _evaluation_kind(args, config).evaluation_data(args.task, args.model, config)
    return _evaluate(args, config, name, **data)


def _evaluate(args: EvaluateOptions, config: dict[str, Any], name: str, **data: Any) -> int:
    """Score (and, for GLUE, predict the test splits of) task ``name``, read with the data options ``data`` (and
    ``args``' --data_dir and --max_examples), in ``args``' folder."""
    check_max_length(args.max_length, config.get("encoder_config", {}), "--max_length")
    out = Path(args.output_dir).expanduser() if args.output_dir else default_eval_dir(args.model, name)
    option = output_option("--output_dir", args.output_dir)
    check_output_folder(out, option)
    check_not_run_file(out, option)
    check_own_folder(out, option, "evaluate",
                     ("metrics.json", "predictions", "submission"), lambda folder: (folder / EVALUATION).is_file(),
                     f"choose a new or empty folder (one that `hire evaluate` wrote carries {EVALUATION})")
    from hire.evaluation import predict_task  # the heavy imports, once every option is checked
    from hire.tasktype import load_task

    with data_dir_option("--data_dir"):
        task = load_task(DataConfig(data_dir=args.data_dir, max_eval_examples=args.max_examples, **data),
                         with_train=False)
    for kind in ("dev", "test"):  # a split file that is absent is an error only where it is asked for
        if args.split in (kind, "all") and kind in task.missing:
            raise DataError(f"--split {args.split}: {task.missing[kind]}")
    task.type.prepare_evaluation(task, config)  # what the model fixes of how the task is read and scored
    model, tokenizer, acc = load_for_prediction(args.model, args.mixed_precision, words=task.type.tokenizer_words())
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / EVALUATION, json.dumps({"model": str(args.model), "task": task.name}) + "\n")
    tests = [*task.held_out, *task.test]  # labelled (CoNLL-2003's) or not (GLUE's)
    splits = {"dev": list(task.dev), "test": tests, "all": [*task.dev, *tests]}[args.split]
    predicted = predict_task(model, task, splits, tokenizer, acc, max_length=args.max_length,
                             batch_size=args.batch_size, predictions_dir=out, submission_dir=out / "submission")
    results: dict[str, Any] = {"model": args.model, "task": task.name, "mixed_precision": acc.mixed_precision,
                               **predicted.results}
    write_atomic(out / "metrics.json", json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


def _cmd_predict(args: PredictOptions) -> int:
    config = check_model_folder(args.model)
    _run_defaults(args, config)
    check_input_file(args.input, "--input")
    return task_kind_of_model(config.get("task_type")).predict_file(args, config)  # the kind reads and writes




















def _cmd_export(args: ExportOptions) -> int:
    config = check_model_folder(args.model)  # a model without a tokenizer is refused: the copy would not run on text
    if config.get("ranker") == "bi":
        raise ConfigError(f"--model {args.model}: a bi-encoder, whose folder is already a plain transformers encoder "
                          "(AutoModel loads it without hire: mean-pool its last hidden state); there is no code to "
                          "export, copy the folder")
    out = Path(args.output_dir).expanduser()
    check_output_folder(out, "--output_dir")
    if out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"--output_dir {args.output_dir}: not empty; give a new or empty folder")
    check_not_run_file(out, "--output_dir")
    parent = out.absolute().parent
    if out.is_dir() and not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--output_dir {args.output_dir}: cannot write in {parent} (permission denied), where the "
                          "copy is made before it takes the folder's place")
    card = run_card(args.model)  # the run's files read, and checked, before anything is written
    from hire.model import load_tokenizer  # the heavy imports, once every option is checked
    from hire.model.sharing import ModelCard

    tokenizer = load_tokenizer(args.model)
    model = load_checked_model(args.model)
    with _staged_folder(out) as staged:
        model.save_pretrained(staged, tokenizer, with_code=True, card=ModelCard(**card))
    auto = model.auto_class_name
    print(f"{out}: {model.config.head} model with its tokenizer and code; load it with transformers' "
          f"{auto}.from_pretrained(..., trust_remote_code=True), hire installed or not")
    return 0


@contextmanager
def _staged_folder(out: Path) -> Iterator[Path]:
    """A temporary folder beside ``out`` to write, renamed to ``out`` (absent, or an empty folder) once the block
    ends; on any failure it is removed, and so are the folders made for it, so that nothing is left to block
    the same command run again. A failed write names its file at ``out`` (a full disk: where the copy goes)."""
    made = [p for p in out.absolute().parents if not p.exists()]  # the deepest first
    staged = None
    try:
        out.absolute().parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.absolute().parent))
        umask = os.umask(0)
        os.umask(umask)
        staged.chmod(0o777 & ~umask)  # mkdtemp's folder is private; the copy gets the permissions of a new folder
        try:
            yield staged
            os.replace(staged, out)
        except Exception as err:
            named = _named_at(err, staged, out)
            if named is err:
                raise
            raise named from err
    except BaseException:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _named_at(err: Exception, staged: Path, out: Path) -> Exception:
    """A failed write in ``staged`` as an OSError naming the path it was to have under ``out``: an OSError's file
    names, or safetensors' I/O error (``... (os error 28)``, which names no file: the weights'). Others as they are."""
    from safetensors import SafetensorError

    if isinstance(err, SafetensorError):
        code = re.search(r"\(os error (\d+)\)", str(err))
        if code is None:
            return err
        return OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(out / "model.safetensors"))
    if not isinstance(err, OSError) or err.errno is None:
        return err

    def moved(name: Any) -> Any:
        try:
            return str(out / Path(os.fsdecode(name)).absolute().relative_to(staged.absolute()))
        except (TypeError, ValueError):
            return name

    names = [moved(err.filename), moved(err.filename2)]
    return OSError(err.errno, err.strerror, names[0] or str(out), None, names[1])


def _cmd_heads(args: HeadsOptions) -> int:
    from hire.model.heads import describe_heads, head_options

    for name, doc in describe_heads().items():
        options = head_options(name)
        print(f"{name:20s} {doc}" + (f"\n{'':20s} options: {', '.join(options)}" if options else ""))
    return 0


def _cmd_report(args: ReportOptions) -> int:
    for run in args.runs:
        if not Path(run).is_dir():
            raise ConfigError(f"{run}: no such run folder")
    if args.markdown:  # never over a run's files, nor over the metrics.json it reads
        check_output_file(args.markdown, "--markdown",
                          {f"the metrics.json of {run}": Path(run) / "metrics.json" for run in args.runs})
        check_not_run_file(args.markdown, "--markdown")
        from hire.reporting import is_runs_table

        check_own_file(args.markdown, "--markdown", "report", is_runs_table)
    from hire.reporting import collect_runs, runs_table

    table = runs_table(collect_runs([Path(r) for r in args.runs]))
    print(table)
    if args.markdown:
        Path(args.markdown).expanduser().parent.mkdir(parents=True, exist_ok=True)  # checked writable above
        write_atomic(Path(args.markdown).expanduser(), table + "\n")
    return 0




# What hire evaluate's options say of the named tasks and their folders: each kind of task's words.
_NAMED_TASKS = "; ".join(kind.named_help for kind in task_kinds().values() if kind.named_help)
_DATA_FOLDERS = "; ".join(kind.data_dir_help for kind in task_kinds().values() if kind.data_dir_help)
# The input layouts of `hire predict`: each kind of task's, in the order the kinds were registered.
_PREDICT_FORMATS = Literal[tuple(f for kind in task_kinds().values() for f in kind.predict_formats)]  # type: ignore


# -- the options of each command: typed dataclasses, parsed by jsonargparse as ``hire train``'s (hire.options) ----
Precision = Literal["auto", "no", "bf16", "fp16"]


@dataclass(kw_only=True)
class ModelOptions:
    model: str = option("a saved model folder (a run's best/)")


@dataclass(kw_only=True)
class _PredictingOptions(ModelOptions):
    batch_size: AtLeast1 = option("examples per batch", 64)
    max_length: MaxLength | None = option("maximum tokens per example (longer ones are cut, with a warning). "
                                          "Default: for a run's best/, the run's --data.max_length; else 128",
                                          None)
    mixed_precision: Precision | None = option(
        "precision of the forward pass: no (fp32), bf16, fp16 (a CUDA GPU), or auto (what training's auto picks: "
        "bf16 where this machine is fast at it, fp16 on an older GPU, else fp32). Default: for a run's best/, the "
        "precision the run trained and scored its dev splits in (its metrics.json); for any other model folder, no",
        None)


@dataclass(kw_only=True)
class EvaluateOptions(_PredictingOptions):
    task: str = option(f"the task, by name, of the model's kind: {_NAMED_TASKS}")
    split: Literal["dev", "test", "all"] = option("which splits", "dev")
    data_dir: str | None = option(f"the task's folder, as the official download: {_DATA_FOLDERS}", None)
    max_examples: AtLeast1 | None = option("only the first N examples of each split (for a ranker: N questions, "
                                           "with all their candidates)", None)
    output_dir: str | None = option("where predictions and metrics go (default: RUN/eval-TASK beside the model when "
                                    "MODEL is a run's best/, whose files only hire train writes; else "
                                    "MODEL/eval-TASK); never a run folder or one of its files", None)


@dataclass(kw_only=True)
class PredictOptions(_PredictingOptions):
    input: str = option("file to predict: for a sentence model a table (.csv, .tsv, .jsonl with a header); for a "
                        "tagger raw text (a sentence per line), a CoNLL column file or token JSON lines (--format); "
                        "for a ranker candidates to rank (.tsv, .csv, .jsonl rows of qid, question, pid, passage "
                        "and an optional label); for a question-answering model SQuAD JSON or JSON lines of id, "
                        "context, question (answers optional); for a multiple-choice model JSON lines of context "
                        "and/or question, choices (label optional), or a SWAG, CODAH or DREAM file")
    format: _PREDICT_FORMATS | None = option(  # type: ignore[valid-type]
        "the input's layout (default: table for a sentence model, ranking for a ranker, squad for a "
        "question-answering model, choices for a multiple-choice model; for a tagger text for .txt, tokens for "
        ".jsonl, else conll, the word in column 0)", None)
    ranking_columns: dict[str, Any] = option("a ranker's input: the column of each field (qid, question, pid, "
                                             "passage, label) where it is not the field's name, e.g. "
                                             "qid=QuestionID,passage=Sentence", {})
    text_columns: str | None = option("one or two text columns, comma-separated (default: those the model was "
                                      "trained on, where its run folder says, else sentence)", None)
    label_column: str = option("label column, if the file has one (kept as gold; its labels must be the model's)",
                               "label")
    output: str | None = option("predictions file (default: INPUT.predictions.jsonl; a ranker also writes the TREC "
                                "run file beside it, with the suffix .run); never the input, a file of the model "
                                "or of a run", None)


@dataclass(kw_only=True)
class ExportOptions(ModelOptions):
    output_dir: str = option("where the copy goes (a new or empty folder, never among a run's own files)")


@dataclass(kw_only=True)
class HeadsOptions:
    pass


@dataclass(kw_only=True)
class ReportOptions:
    runs: list[str] = option("run folders (each with a metrics.json)", positional=True)
    markdown: str | None = option("also write the table to this Markdown file (not a run's file)", None)


def add_commands() -> list[Command]:
    """The commands on saved models and run folders."""
    return [
        typed_command("evaluate", EvaluateOptions, _cmd_evaluate, "score a saved model on a named task's dev or "
                      "test split (GLUE, CoNLL-2003, WikiQA, SQuAD, CODAH, DREAM)", "Score a saved model on a named "
                      "task of its kind: on its dev split (metrics) or its test split (scored where it is labelled, "
                      "else predicted). A model that labels sentences on a GLUE task (the GLUE metrics; GLUE "
                      "submission files for the test split); one that tags words on CoNLL-2003 (strict entity F1); "
                      "one that ranks passages on WikiQA (MAP, MRR, P@1, TREC run files); one that answers questions "
                      "with a span of the passage on SQuAD v1.1 or v2.0 (exact match and F1); one that chooses one of "
                      "several answers on CODAH or DREAM (accuracy). Files of your own: hire predict."),
        typed_command("predict", PredictOptions, _cmd_predict, "predict a file of your own with a saved model",
                      "Predict a file of your own with a saved model of any kind: a model that labels sentences reads "
                      "a CSV, TSV or JSON-lines table; one that tags words raw text, a CoNLL file or token JSON "
                      "lines; one that ranks passages each question's candidates (and writes a TREC run file); one "
                      "that answers questions with a span of the passage SQuAD JSON or JSON lines; one that chooses "
                      "one of several answers JSON lines or a SWAG, CODAH or DREAM file. A labelled input is scored "
                      "too; reports examples/s."),
        typed_command("export", ExportOptions, _cmd_export,
                      "copy a saved model with its modelling code, to load without hire",
                      "Write a saved model (converted to the current format) with its tokenizer, model card and "
                      "modelling code, so that transformers loads it with trust_remote_code=True where hire is not "
                      "installed. A model folder without a tokenizer is refused. The copy is written beside "
                      "--output_dir under a temporary name and renamed into place once complete: a failed export (a "
                      "full disk) leaves nothing behind."),
        typed_command("heads", HeadsOptions, _cmd_heads, "list the heads and their options"),
        typed_command("report", ReportOptions, _cmd_report, "tabulate the dev scores of finished runs side by side"),
    ]
