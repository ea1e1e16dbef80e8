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

from hire.checks import (
    check_input_file,
    check_output_file,
    check_output_folder,
    check_own_file,
    check_own_folder,
    check_text_columns,
)
from hire.config import AtLeast1, ConfigError, DataConfig, MaxLength, check_max_length
from hire.data.examples import DataError
from hire.data.glue import data_dir_option, get_task, task_text_columns
from hire.options import Command, option, typed_command
from hire.runs import check_not_run_file, is_run_folder, write_atomic
from hire.saved_model import (
    check_model_folder,
    check_weights,
    run_card,
    saved_label_names,
    saved_num_labels,
    trained_max_length,
    trained_text_columns,
)


def _texts(columns: list[str] | tuple[str, ...]) -> str:
    return f"sentence pairs ({', '.join(columns)})" if len(columns) == 2 else f"single sentences ({columns[0]})"


def _load(model_dir: str, precision: str | None, words: bool = False) -> tuple[Any, Any, Any]:
    """The model (prepared), its tokenizer and the accelerator; the tokenizer first, as it is the cheaper.
    ``precision`` None: :func:`model_precision`."""
    from accelerate import Accelerator

    from hire.hardware import resolve_mixed_precision
    from hire.model import load_tokenizer

    tokenizer = load_tokenizer(model_dir, words)
    accelerator = Accelerator(mixed_precision=resolve_mixed_precision(model_precision(model_dir, precision)))
    return accelerator.prepare(_load_model(model_dir)), tokenizer, accelerator


def recorded_precision(model_dir: str | Path) -> str | None:
    """The precision that the run of ``model_dir`` trained and evaluated in, when the folder is a run's ``best/``
    (its ``metrics.json``, or ``state.json`` while it trains); None for any other folder or where the run
    records none."""
    run = _run_of_best(model_dir)
    if run is None:
        return None
    for name in ("metrics.json", "state.json"):
        try:
            value = json.loads((run / name).read_text(encoding="utf-8")).get("mixed_precision")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, str) and value in ("no", "bf16", "fp16"):
            return value
    return None


def model_precision(model_dir: str | Path, choice: str | None) -> str:
    """The precision ``hire evaluate`` and ``hire predict`` run in: ``--mixed_precision`` where given; by default
    the one the model's run trained and scored its dev splits in (:func:`recorded_precision`), and fp32 for a
    model that is not a run's ``best/``. A run's bf16 where this machine has no fast bf16 (a GPU without it, a CPU
    without bf16 units), or its fp16 without a CUDA GPU, falls back to fp32 with a warning: emulated, it would be
    many times slower."""
    import warnings

    import torch

    from hire.hardware import cpu_has_fast_bf16

    if choice is not None:
        return choice
    recorded = recorded_precision(model_dir)
    if recorded is None:
        return "no"
    cuda = torch.cuda.is_available()
    if recorded == "fp16":
        fast = cuda
    elif recorded == "bf16":
        fast = torch.cuda.is_bf16_supported() if cuda else cpu_has_fast_bf16()
    else:
        fast = True
    if not fast:
        warnings.warn(f"--model {model_dir}: its run trained in {recorded}, which this machine does not run fast "
                      f"({'no CUDA GPU' if recorded == 'fp16' else 'no bf16 units known here'}): predicting in "
                      "fp32, so scores can differ from the recorded ones in the last digits (--mixed_precision "
                      "chooses)", RuntimeWarning, stacklevel=2)
        return "no"
    return recorded


def _load_model(model_dir: str) -> Any:
    """``HireModel.from_pretrained``, once :func:`check_model_folder` has passed and the weights are known to fit
    the configuration: every parameter of the model it describes is in the weights, in its shape (checked on a
    model built on torch's meta device, which holds no data). transformers would start a missing weight at random
    with a log line, which makes every prediction silently wrong."""
    import torch
    from safetensors import SafetensorError

    from hire.encoder import Encoder
    from hire.model import BiEncoder, HireModel, is_bi_encoder, load_config

    shapes = check_weights(model_dir)
    bi = is_bi_encoder(model_dir)
    if shapes is not None:
        with torch.device("meta"):
            if bi:  # the encoder as transformers saves it: its parameters without hire's "encoder.model." prefix
                config = json.loads((Path(model_dir).expanduser() / "config.json").read_text(encoding="utf-8"))
                empty = Encoder.from_config(config).model
            else:
                empty = HireModel(load_config(Path(model_dir).expanduser()))
        missing = [name for name, _ in empty.named_parameters() if name not in shapes]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise ConfigError(f"--model {model_dir}: the weights lack {missing[0]}{more}, which the model of its "
                              "config.json has; they are not this model's")
        for name, parameter in empty.named_parameters():
            if list(parameter.shape) != shapes[name]:
                raise ConfigError(f"--model {model_dir}: the weights hold {name} in the shape {shapes[name]}, the "
                                  f"model of its config.json needs {list(parameter.shape)}; they are not this "
                                  "model's")
    try:
        return BiEncoder.from_pretrained(model_dir) if bi else HireModel.from_pretrained(model_dir)
    except SafetensorError as err:
        raise ConfigError(f"--model {model_dir}: the weights do not load ({' '.join(str(err).split())[:300]})") \
            from err


def _output_option(option: str, given: Any) -> str:
    """How a message names an output path: by its option, or as the option's default where none was given."""
    return option if given else f"{option} (the default)"


def default_eval_dir(model_dir: str | Path, task: str) -> Path:
    """Where ``hire evaluate`` writes by default: beside the model in its run (``RUN/eval-TASK``) when the model
    is a run's ``best/``, whose files only ``hire train`` writes; else inside the model folder (``MODEL/eval-TASK``)."""
    model = Path(model_dir).expanduser()
    run = _run_of_best(model)
    if run is not None:
        return model.parent / f"eval-{task}" if model.name == "best" else run / f"eval-{task}"
    return model / f"eval-{task}"


def _run_of_best(model_dir: str | Path) -> Path | None:
    """The run folder whose ``best/`` ``model_dir`` is (links followed); None for any other model folder."""
    model = Path(model_dir).expanduser().resolve()
    return model.parent if model.name == "best" and is_run_folder(model.parent) else None


EVALUATION = ".hire-eval"  # the marker of a folder that `hire evaluate` wrote: only such a folder is written again


# The tasks `hire evaluate` knows by name whose models are not sentence classifiers: (task name, the model's
# task_type, what such a model does). A sentence task's model "labels sentences".
_NAMED_TASKS = (("wikiqa", "ranking", "ranks passages"), ("conll2003", "token", "tags words"))


def _named_task(args: EvaluateOptions, config: dict[str, Any]) -> str | None:
    """The named task (see ``_NAMED_TASKS``) that ``--task`` or the model's task type asks for, or None for a
    sentence task.

    Raises:
        ConfigError: the task and the model are of two kinds (e.g. ``--task wikiqa`` with a model that tags
            words), naming what each does.
    """
    does = {task_type: verb for _, task_type, verb in _NAMED_TASKS}.get(config.get("task_type"), "labels sentences")
    asks = {name: verb for name, _, verb in _NAMED_TASKS}.get(args.task.lower(), "labels sentences")
    for name, task_type, _ in _NAMED_TASKS:
        of_kind = config.get("task_type") == task_type
        if args.task.lower() == name or of_kind:
            if args.task.lower() != name or not of_kind:  # what the model does, and what the task asks
                raise ConfigError(f"--task {args.task}: --model {args.model} {does}, and the task {asks}")
            return name
    return None


def _run_defaults(args: _PredictingOptions, config: dict[str, Any]) -> None:
    """``--max_length`` left out: the run's, for a run's ``best/`` (:func:`trained_max_length`), else 128."""
    if args.max_length is None:
        args.max_length = trained_max_length(args.model, config) or 128


def _cmd_evaluate(args: EvaluateOptions) -> int:
    config = check_model_folder(args.model)
    _run_defaults(args, config)
    named, options = _named_task(args, config), config.get("task_options") or {}
    if named == "wikiqa":
        return _evaluate(args, config, "WikiQA", task="wikiqa", keep=options.get("keep", "has-positive"))
    if named == "conll2003":
        return _evaluate(args, config, "CoNLL-2003", task="conll2003", tag_column=options.get("tag_column"),
                         context=options.get("context", "sentence"), subword=config.get("subword", "first"))
    try:
        spec = get_task(args.task)
    except DataError as err:
        raise ConfigError(f"--task: {err}, conll2003 or wikiqa") from None
    if saved_label_names(config) != (list(spec.labels) if spec.labels else None):
        raise ConfigError(f"--model {args.model} predicts labels {saved_label_names(config)}, "
                          f"but task {spec.name} has {list(spec.labels) if spec.labels else 'real-valued scores'}")
    trained, wanted = trained_text_columns(args.model, config), task_text_columns(spec)
    if trained is not None and len(trained) != len(wanted):
        raise ConfigError(f"--task {spec.name}: the task has {_texts(wanted)}, but --model {args.model} "
                          f"was trained on {_texts(trained)}")
    return _evaluate(args, config, spec.name, task=spec.name)


def _evaluate(args: EvaluateOptions, config: dict[str, Any], name: str, **data: Any) -> int:
    """Score (and, for GLUE, predict the test splits of) task ``name``, read with the data options ``data`` (and
    ``args``' --data_dir and --max_examples), in ``args``' folder."""
    check_max_length(args.max_length, config.get("encoder_config", {}), "--max_length")
    out = Path(args.output_dir).expanduser() if args.output_dir else default_eval_dir(args.model, name)
    option = _output_option("--output_dir", args.output_dir)
    check_output_folder(out, option)
    check_not_run_file(out, option)
    check_own_folder(out, option, "evaluate",
                     ("metrics.json", "predictions", "submission"), lambda folder: (folder / EVALUATION).is_file(),
                     f"choose a new or empty folder (one that `hire evaluate` wrote carries {EVALUATION})")
    from hire.evaluation import predict_task  # the heavy imports, once every option is checked
    from hire.tasktypes import load_task

    with data_dir_option("--data_dir"):
        task = load_task(DataConfig(data_dir=args.data_dir, max_eval_examples=args.max_examples, **data),
                         with_train=False)
    for kind in ("dev", "test"):  # a split file that is absent is an error only where it is asked for
        if args.split in (kind, "all") and kind in task.missing:
            raise DataError(f"--split {args.split}: {task.missing[kind]}")
    if config.get("ranker") == "bi":
        task.options["ranker"] = "bi"  # the ranking type encodes questions and passages apart
    if config.get("task_type") == "token":  # the model's tags, in its logit order; the data's must be among them
        from hire.data.conll import check_tags

        task.label_names = saved_label_names(config)
        for split in (*task.dev.values(), *task.held_out.values()):
            check_tags(split, task.label_names or [], f"the {name} data", "error")
    model, tokenizer, acc = _load(args.model, args.mixed_precision, words=config.get("task_type") == "token")
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
    from hire.data.files import read_table

    config = check_model_folder(args.model)
    _run_defaults(args, config)
    check_input_file(args.input, "--input")
    if config.get("task_type") == "ranking":
        return _predict_ranking(args, config)
    if args.ranking_columns:
        what = "tags words" if config.get("task_type") == "token" else "labels sentences"
        raise ConfigError(f"--ranking_columns: for a ranker; --model {args.model} {what}")
    if config.get("task_type") == "token":
        return _predict_tags(args, config)
    if args.format not in (None, "table"):
        raise ConfigError(f"--format {args.format}: for a tagger; --model {args.model} labels sentences (its input "
                          "is a table: .csv, .tsv or .jsonl with a header)")
    trained = trained_text_columns(args.model, config)
    given = args.text_columns or (",".join(trained) if trained else "sentence")
    columns = [c.strip() for c in given.split(",") if c.strip()]
    check_text_columns(columns, args.label_column, "--text_columns", "--label_column")
    if trained is not None and len(columns) != len(trained):
        raise ConfigError(f"--text_columns {given}: --model {args.model} was trained on {_texts(trained)}; "
                          f"give {len(trained)} column(s)")
    output = _predictions_file(args, config)
    num_labels = saved_num_labels(config)
    regression = num_labels == 1
    names = None if regression else (saved_label_names(config) or [str(i) for i in range(num_labels)])
    examples = read_table(args.input, columns, args.label_column, regression=regression, require_label=False,
                          labels=names, labels_from=f"the model ({args.model})")
    from hire.data.batching import Collator, encode  # the heavy imports, once every option is checked
    from hire.evaluation import eval_loader
    from hire.tasktypes.sequence import predict, write_predictions

    model, tokenizer, acc = _load(args.model, args.mixed_precision)
    encoded = encode(examples, tokenizer, args.max_length, None, labelled=False)
    preds = predict(model, acc.prepare(eval_loader(encoded, args.batch_size, Collator(tokenizer.pad_token_id))), acc)
    write_predictions(output, examples, preds, names)
    print(f"{len(examples)} examples in {preds.seconds:.2f} s: {preds.examples_per_second:.1f} examples/s "
          f"({_precision(acc)}, batch {args.batch_size}); predictions in {output}")
    return 0


def _predictions_file(args: PredictOptions, config: dict[str, Any]) -> Path:
    """Where ``hire predict`` writes, checked (never the input, a file of the model or of a run), and its
    ``--max_length`` checked against the encoder."""
    option = _output_option("--output", args.output)
    output = check_output_file(args.output or Path(args.input).with_suffix(".predictions.jsonl"), option,
                               {"--input": args.input})
    check_not_run_file(output, option)
    _check_not_in_model(output, option, args.model)
    check_own_file(output, option, "predict", _predictions_line, "choose another path with --output")
    check_max_length(args.max_length, config.get("encoder_config", {}), "--max_length")
    return output


def _predictions_line(line: str) -> bool:
    """Whether ``line`` (a file's first) is one of ``hire predict``'s JSON lines: a sentence's or a tagged
    sentence's (``guid`` first), or a ranked candidate's (``qid``, ``pid``, ``rank``, ``score``)."""
    try:
        row = json.loads(line)
    except ValueError:
        return False
    return isinstance(row, dict) and (next(iter(row), None) == "guid" or {"qid", "pid", "rank", "score"} <= row.keys())


def _run_line(line: str) -> bool:
    """Whether ``line`` (a file's first) is a line of the TREC run file that ``hire predict`` writes
    (``qid Q0 pid rank score hire``)."""
    fields = line.split()
    return len(fields) == 6 and fields[1] == "Q0" and fields[5] == "hire"


def _precision(acc: Any) -> str:
    """How ``hire predict`` names the precision it ran in: accelerate's "no" is fp32."""
    return "fp32" if acc.mixed_precision == "no" else f"{acc.mixed_precision} precision"


_CHUNK_TAG = re.compile(r"(?i)(o|[bies]-\S+)")
_SNIFF_LINES = 200  # the word lines that decide whether a .txt file is CoNLL columns


def _looks_like_conll(path: str, tags: list[str] | None) -> bool:
    """Whether a ``.txt`` input for a tagger is CoNLL columns rather than running text (CoNLL-2003 itself is
    ``*.txt``): a ``-DOCSTART-`` line, or first word lines that all have the same two or more fields (split as
    the CoNLL reader splits them) and end in a tag: one of the model's, or O / a B-, I-, E-, S- chunk tag in
    either case. A sentence per line has neither. Unreadable bytes are left to the reader that reports them."""
    from hire.data.files import iter_lines

    known = {tag.lower() for tag in tags or ()}
    counts: set[int] = set()
    separator: str | None = None
    seen = 0
    try:
        for _, line in iter_lines(path):
            if not line.strip():
                continue
            if line.startswith("-DOCSTART-"):
                return True
            separator = separator or ("\t" if "\t" in line else " ")
            fields = line.split("\t") if separator == "\t" else re.split(r"[ \t]+", line.strip(" \t"))
            counts.add(len(fields))
            last = fields[-1].strip()
            if len(counts) > 1 or len(fields) < 2 or not (last.lower() in known or _CHUNK_TAG.fullmatch(last)):
                return False
            seen += 1
            if seen >= _SNIFF_LINES:
                break
    except DataError:
        return False
    return seen > 0


def _predict_tags(args: PredictOptions, config: dict[str, Any]) -> int:
    """``hire predict`` with a tagger: every word of the input with its tag, and the entity spans. A labelled
    input (a CoNLL file or token JSON lines with tags) keeps its gold tags beside the predictions and is scored
    as ``hire evaluate`` scores: strict entity F1 (seqeval, IOB2) for a model of chunk tags, token accuracy for
    plain tags. The gold tags are read in whatever scheme they are (IOB1, IOB2, BIOES; converted to IOB2): they
    are not the model's input, so their scheme is never a reason to refuse it."""
    import warnings

    from hire.data.conll import read_token_file

    if args.text_columns is not None or args.label_column != "label":
        raise ConfigError(f"--text_columns/--label_column: for a sentence model; --model {args.model} tags words "
                          "(--format says how its input is laid out)")
    suffix = Path(args.input).suffix.lower()
    sniffed = False
    if args.format is None and suffix == ".txt":
        sniffed = _looks_like_conll(args.input, saved_label_names(config))
        layout = "conll" if sniffed else "text"
    else:
        layout = args.format or {".jsonl": "tokens"}.get(suffix, "conll")
    if layout not in ("text", "conll", "tokens"):
        raise ConfigError(f"--format {layout}: --model {args.model} tags words; give --format text (a sentence per "
                          "line), conll (a word per line, in columns) or tokens (token JSON lines)")
    output = _predictions_file(args, config)
    from hire.data.examples import TokenExample  # the heavy imports, once every option is checked
    from hire.evaluation import eval_loader
    from hire.tasktypes import TOKEN, TaskData

    options = dict(config.get("task_options") or {})
    entities = options.get("scheme", "iob2") != "none"  # the model's tags are chunks (else plain tags, as POS)
    scheme = "none"
    if layout != "text":  # read (and every bad line reported) before the model loads
        try:
            read = read_token_file(args.input, format=layout, require_tags=False,
                                   scheme="auto" if entities else "none", option="--input")
        except DataError as err:  # the gold tags fit no scheme: predict, but do not score them
            read = read_token_file(args.input, format=layout, require_tags=False, scheme="none", option="--input")
            warnings.warn(f"--input {args.input}: its tags are not scored ({err})", RuntimeWarning, stacklevel=2)
        examples, scheme = read.examples, read.scheme
        if entities and scheme == "none" and read.plain is not None:
            warnings.warn(f"--input {args.input}, line {read.plain[0]}: tag {read.plain[1]!r} is not a chunk tag, "
                          "so the file's tags are not scored (the model tags chunks: O, B-, I-)", RuntimeWarning,
                          stacklevel=2)
        if options.get("context") == "document" and all(ex.document is None for ex in examples):
            warnings.warn(f"--input {args.input}: the model reads each sentence in its document, and the file marks "
                          "none (no -DOCSTART- line or \"document\" key): each sentence is read alone",
                          RuntimeWarning, stacklevel=2)
    model, tokenizer, acc = _load(args.model, args.mixed_precision, words=True)
    if layout == "text":  # split into words as the tokenizer splits running text
        examples = [TokenExample(str(line - 1), tuple(words), line=line)
                    for line, words in _text_words(args.input, tokenizer) if words]
    if not examples:
        raise DataError(f"--input {args.input}: no sentence to tag")
    scored = all(ex.tags is not None for ex in examples) and (scheme != "none") == entities
    options["scheme"] = scheme if scored else options.get("scheme", "iob2")
    task = TaskData(Path(args.input).stem, saved_label_names(config), (), [], {}, {"input": examples},
                    options={**options, "subword": config.get("subword", "first")}, type=TOKEN)
    encoded = TOKEN.encode(task, examples, tokenizer, args.max_length, labelled=False)
    preds = TOKEN.predict(model, acc.prepare(eval_loader(encoded, args.batch_size, TOKEN.collator(
        tokenizer.pad_token_id))), encoded, acc)
    TOKEN.write_predictions(output, task, examples, preds)
    words = sum(len(ex.tokens) for ex in examples)
    if sniffed:
        print(f"{args.input}: read as CoNLL columns, a word per line (--format text reads it as raw text)")
    print(f"{len(examples)} sentences ({words} words) in {preds.seconds:.2f} s: "
          f"{preds.examples_per_second:.1f} sentences/s ({_precision(acc)}, batch {args.batch_size}); predictions "
          f"in {output}")
    if scored:
        print(json.dumps(TOKEN.score(task, preds, examples, encoded), indent=2))
    return 0


def _predict_ranking(args: PredictOptions, config: dict[str, Any]) -> int:
    """``hire predict`` with a ranker: each question's candidates ranked, as JSON lines (qid, pid, rank, score) and
    a TREC run file beside them (``OUTPUT`` with the suffix ``.run``); the metrics too when the input is
    labelled with whole-number grades."""
    from hire.data.ranking import read_ranking_file

    if args.text_columns is not None or args.label_column != "label":
        raise ConfigError(f"--text_columns/--label_column: for a sentence model; --model {args.model} ranks "
                          "passages (--ranking_columns names its input's columns)")
    if args.format not in (None, "ranking"):
        raise ConfigError(f"--format {args.format}: --model {args.model} ranks passages; its input is a ranking "
                          "file (.tsv, .csv or .jsonl rows of qid, question, pid, passage and an optional label)")
    output = _predictions_file(args, config)
    if output.suffix == ".run":  # the JSON lines and the run file (OUTPUT with the suffix .run) would be one file
        raise ConfigError(f"--output {args.output}: a ranker writes JSON lines there and its TREC run file beside "
                          "them, named with the suffix .run; give a name ending in .jsonl")
    run_option = f"the run file beside --output {output}" if args.output else f"the run file beside {output}"
    run_file = check_output_file(output.with_suffix(".run"), run_option, {"--input": args.input})
    check_not_run_file(run_file, "the run file")
    _check_not_in_model(run_file, "the run file", args.model)
    check_own_file(run_file, run_option, "predict", _run_line, "choose another --output (the run file takes its "
                   "name, with the suffix .run)")
    try:  # read (and every bad line reported) before the model loads
        examples = read_ranking_file(args.input, columns=dict(args.ranking_columns) or None, option="--input").examples
    except ValueError as err:
        if isinstance(err, DataError):
            raise
        raise ConfigError(f"--ranking_columns: {err}") from None
    from hire.evaluation import eval_loader  # the heavy imports, once every option is checked
    from hire.metrics import ranking_metrics
    from hire.tasktypes.ranking import RANKING, encode_apart, encode_pairs, write_ranking

    model, tokenizer, acc = _load(args.model, args.mixed_precision)
    encode = encode_apart if config.get("ranker") == "bi" else encode_pairs  # a bi-encoder reads each text apart
    encoded = encode(examples, tokenizer, args.max_length, labelled=False)
    preds = RANKING.predict(model, acc.prepare(eval_loader(encoded, args.batch_size, RANKING.collator(
        tokenizer.pad_token_id))), encoded, acc)
    scores = [float(s) for s in preds.logits]
    whole = all(ex.label is not None and ex.label == int(ex.label) for ex in examples)
    scored = whole and any((ex.label or 0) >= 1 for ex in examples)
    write_ranking(output, run_file, None, examples, scores, preds.layer_weights)
    questions = len({ex.qid for ex in examples})
    print(f"{questions} questions ({len(examples)} candidates) in {preds.seconds:.2f} s: "
          f"{preds.examples_per_second:.1f} candidates/s ({_precision(acc)}, batch {args.batch_size}); "
          f"ranking in {output} and {run_file}")
    if scored:
        print(json.dumps(ranking_metrics(examples, scores), indent=2))
    return 0


def _text_words(path: str, tokenizer: Any) -> list[tuple[int, list[str]]]:
    """Each line of a text file (its number, its words) split into words as the tokenizer's own pre-tokenizer
    splits running text (BERT's: at spaces and punctuation), so that a word starts where the tokenizer starts one.
    Lines end at ``\\n`` (a ``\\r`` before it dropped) and nowhere else: not at a form feed or U+2028, which
    str.splitlines takes for line ends; a UTF-8 byte-order mark is dropped, not read as part of the first word."""
    from hire.data.files import iter_lines

    pre = tokenizer.backend_tokenizer.pre_tokenizer
    lines = list(iter_lines(path))  # bytes that are not UTF-8: an error naming the line
    if pre is None:
        return [(number, line.split()) for number, line in lines]
    # The offsets name the words as written (a byte-level pre-tokenizer spells a space as "Ġ" in its pieces).
    return [(number, [w for _, (a, b) in pre.pre_tokenize_str(line) if (w := line[a:b].strip())])
            for number, line in lines]


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
    from hire.sharing import ModelCard

    tokenizer = load_tokenizer(args.model)
    model = _load_model(args.model)
    with _staged_folder(out) as staged:
        model.save_pretrained(staged, tokenizer, with_code=True, card=ModelCard(**card))
    auto = "AutoModelForTokenClassification" if type(model).__name__.endswith("ForTokenClassification") \
        else "AutoModelForSequenceClassification"
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
    from hire.heads import describe_heads, head_options

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


def _check_not_in_model(path: Path, option: str, model_dir: str) -> None:
    """Refuse an output file that is one of the model's own (its config.json, weights, tokenizer ...)."""
    model = Path(model_dir).expanduser().resolve()
    target = Path(path).expanduser().resolve()
    if target.exists() and target.is_relative_to(model):
        raise ConfigError(f"{option} {path}: a file of --model {model_dir}, which it would replace; choose another "
                          "path")


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
    task: str = option("GLUE task name, conll2003 for a tagger, or wikiqa for a ranker")
    split: Literal["dev", "test", "all"] = option("which splits", "dev")
    data_dir: str | None = option("the task's folder (default: $HIRE_GLUE_DIR or ../shared/data/glue; CoNLL-2003: "
                                  "$HIRE_CONLL2003_DIR or ../shared/data/conll2003; WikiQA: $HIRE_WIKIQA_DIR or "
                                  "../shared/data/wikiqa)", None)
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
                        "and an optional label)")
    format: Literal["table", "text", "conll", "tokens", "ranking"] | None = option(
        "the input's layout (default: table for a sentence model, ranking for a ranker; for a tagger text for "
        ".txt, tokens for .jsonl, else conll, the word in column 0)", None)
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
        typed_command("evaluate", EvaluateOptions, _cmd_evaluate, "score a saved model on a GLUE task's or "
                      "CoNLL-2003's dev or test split", "Score a saved model on a task's dev splits (metrics) or "
                      "predict its test splits (GLUE submission files); a tagger on CoNLL-2003's dev and test "
                      "(strict entity F1)."),
        typed_command("predict", PredictOptions, _cmd_predict, "predict a file of your own with a saved model",
                      "Predict every row of a CSV, TSV or JSON-lines file with a sentence model, or tag every word "
                      "of raw text, a CoNLL file or token JSON lines with a tagger; reports examples/s."),
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
