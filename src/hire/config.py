"""Typed run configuration: dataclasses whose field comments are the command line's ``--help``.

A run is data: its resolved configuration is written to the run folder as ``config.yaml``, and any
such file (or a named one in ``configs/``) can be passed back with ``--config``. Command-line options
(``--train.lr 3e-5``) override the file, which overrides the defaults: :mod:`hire.options` parses them
(jsonargparse), the fields' ``help`` is ``hire train --help``.

:meth:`RunConfig.validate` checks every option (type, range, the files and folders it names, the encoder,
the head and its options) before anything on disk changes, and raises :class:`ConfigError` with a message
that starts with the option at fault: ``--train.lr: must be >= 0, not -1.0``.
"""

from __future__ import annotations

import dataclasses
import difflib
import filecmp
import os
import re
import types
import typing
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

import yaml
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveFloat, restricted_number_type

from hire.checks import (
    UNUSABLE,
    ConfigError,
    check_input_file,
    check_output_folder,
    check_saved_model,
    check_text_columns,
    path_kind,
    real_path,
)
from hire.optiontypes import value_problem

MIN_MAX_LENGTH = 8  # tokens: room for a pair's special tokens (4 for RoBERTa) and some text of each side


def ranged(base: type, *bounds: tuple[str, int | float], name: str | None = None) -> Any:
    """``Annotated[base, R]``: a number of type ``base`` within ``bounds`` (``(">=", 1)``, ``("<", 1)``), where
    ``R`` is jsonargparse's restricted number type, so that the parser checks the range where it reads the
    value, and :func:`value_problem` where a value comes from Python (a configuration built in
    code); ``typing.get_type_hints`` reads ``base``."""
    return Annotated[base, restricted_number_type(name, base, list(bounds))]


AtLeast1 = ranged(int, (">=", 1), name="AtLeast1")
NonNegativeInt = ranged(int, (">=", 0), name="NonNegativeInt")
Positive = Annotated[float, PositiveFloat]
NonNegative = Annotated[float, NonNegativeFloat]
Probability = ranged(float, (">=", 0.0), ("<", 1.0), name="Probability")  # dropout rates and Adam's betas
UnitInterval = Annotated[float, ClosedUnitInterval]
Seed = ranged(int, (">=", 0), ("<", 2**32), name="Seed")
MaxLength = ranged(int, (">=", MIN_MAX_LENGTH), name="MaxLength")  # room for the special tokens and some text


def _f(default: Any, help: str) -> Any:
    """A field with its ``--help`` text (its type, a range included, is the field's annotation)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class DataConfig:
    task: str = _f("RTE", "GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI), conll2003 (a tag "
                   "per word: NER, chunks or parts of speech), wikiqa (answer ranking), or 'custom' for your own "
                   "files (--data.train_file ...)")
    data_dir: str | None = _f(None, "the task's folder, as the official download: GLUE's (one sub-folder per "
                              "task; default: $HIRE_GLUE_DIR, else ../shared/data/glue beside the repository), "
                              "CoNLL-2003's (default: $HIRE_CONLL2003_DIR, else ../shared/data/conll2003) or "
                              "WikiQA's (default: $HIRE_WIKIQA_DIR, else ../shared/data/wikiqa)")
    train_file: str | None = _f(None, "custom task: training file (.csv, .tsv or .jsonl with a header)")
    dev_file: str | None = _f(None, "custom task: labelled evaluation file")
    test_file: str | None = _f(None, "custom task: file to predict (labels optional)")
    text_columns: list[str] = _f(["sentence"], "custom task: one or two text column names, comma-separated")
    label_column: str = _f("label", "custom task: the label column")
    regression: bool = _f(False, "custom task: the label is a real number (else: classes)")
    max_length: MaxLength = _f(128, "maximum tokens per example (longer ones are truncated)")
    max_train_examples: AtLeast1 | None = _f(None, "use only the first N training examples (quick runs; for a "
                                                   "ranking task, N questions with all their candidates)")
    max_eval_examples: AtLeast1 | None = _f(None, "use only the first N examples of each evaluation split (for a "
                                                  "ranking task, N questions)")
    # Token tasks (a tag per word): conll2003, or custom files in --data.format conll or tokens.
    format: Literal["table", "conll", "tokens", "ranking"] = _f(
        "table", "custom task: the files' layout: table (.csv/.tsv/.jsonl rows, a label per row), conll (a word per "
        "line in columns, a blank line after each sentence), tokens (JSON lines with 'tokens' and 'tags') or "
        "ranking (.tsv/.csv/.jsonl rows of qid, question, pid, passage, label: candidates to rank per question)")
    token_column: NonNegativeInt = _f(0, "conll files: the word's column (0-based)")
    tag_column: NonNegativeInt | Literal["ner", "chunk", "pos"] | None = _f(
        None, "token tasks: the tag column: ner, chunk or pos for conll2003 (default ner); a conll file's 0-based "
        "column (default: the last)")
    separator: str | None = _f(None, "conll files: the column separator (default: a tab where the lines have "
                               "one, else runs of spaces)")
    scheme: Literal["auto", "iob1", "iob2", "bioes", "none"] = _f(
        "auto", "token tasks: the tags' scheme, detected by default; iob1, iob2 and bioes are read as IOB2 and "
        "scored as entities; none: plain tags (parts of speech), scored by accuracy")
    subword: Literal["first", "last", "mean"] = _f(
        "first", "token tasks: where a word is read: its first sub-token (BERT), its last, or their mean")
    context: Literal["sentence", "document"] = _f(
        "sentence", "token tasks: document: the neighbouring sentences of the same document are read as context "
        "(predictions only for the sentence itself)")
    unknown_tags: Literal["error", "o"] = _f(
        "error", "token tasks: a dev/test tag that training never saw is an error, or (o) read as O")
    # Ranking tasks: wikiqa, or custom files in --data.format ranking.
    keep: Literal["has-positive", "has-both", "all"] = _f(
        "has-positive", "ranking tasks: the evaluation questions that count: those with a relevant candidate "
        "(WikiQA's usual evaluation), those with a relevant one and two different grades (0/1 labels: a relevant "
        "and an irrelevant one), or all (training reads every question)")
    ranking_columns: dict[str, Any] = _f(
        {}, "ranking files: the column of each field (qid, question, pid, passage, label) where it is not the "
        "field's name, e.g. qid=QuestionID,passage=Sentence; or 0-based indices for files without a header")

    def is_ranking(self) -> bool:
        """Whether the options name a ranking task (wikiqa, or custom files in --data.format ranking)."""
        return self.task.lower() == "wikiqa" or (self.task.lower() == "custom" and self.format == "ranking")

    def validate(self) -> None:
        """The task and the files it names; a GLUE task takes none of the custom task's options."""
        from hire.data.examples import DataError
        from hire.data.glue import get_task

        ranking = self.is_ranking()
        if not ranking:
            _only_for(self, "data", _RANKING_OPTIONS, _RANKING_TASKS)
        token_task = self.task.lower() == "conll2003" or (self.task.lower() == "custom" and self.format not in
                                                          ("table", "ranking"))
        if not token_task:
            _only_for(self, "data", _TOKEN_OPTIONS, "token tasks (--data.task conll2003, or custom files in "
                      "--data.format conll or tokens)")
        check_separator(self.separator)
        if self.task.lower() == "custom" and (token_task or ranking):
            _only_for(self, "data", ("text_columns", "label_column", "regression"),
                      "--data.format table (a label per row)")
        if self.task.lower() != "custom":
            own_files = f"--data.task custom ({self.task} has its own files)"
            _only_for(self, "data", ("format",), own_files)
            if not token_task and not ranking:
                try:
                    get_task(self.task)
                except DataError as err:
                    raise ConfigError(f"--data.task: {err}, conll2003, wikiqa, or 'custom' for your own files") \
                        from None
            elif isinstance(self.tag_column, int):
                raise ConfigError(f"--data.tag_column: conll2003's tag columns are ner, chunk and pos, not "
                                  f"{self.tag_column}")
            _only_for(self, "data", ("train_file", "dev_file", "test_file", "text_columns", "label_column",
                                     "regression"), own_files)
            kind = None if self.data_dir is None else path_kind(self.data_dir)
            if self.data_dir is not None and kind != "a folder":
                what = f"{kind}, not a folder" if kind else "no such folder"
                raise ConfigError(f"--data.data_dir {self.data_dir}: {what}")
            return
        if not self.train_file:
            raise ConfigError("--data.train_file: --data.task custom needs a training file")
        if not self.dev_file:
            raise ConfigError("--data.dev_file: --data.task custom needs a labelled file to pick the best model")
        for name in ("train_file", "dev_file", "test_file"):
            if getattr(self, name) is not None:
                check_input_file(getattr(self, name), f"--data.{name}")
        if ranking:
            check_ranking_columns(self.ranking_columns)
        elif not token_task:
            check_text_columns(self.text_columns, self.label_column, "--data.text_columns", "--data.label_column")
        elif isinstance(self.tag_column, str):
            raise ConfigError(f"--data.tag_column {self.tag_column}: names are for conll2003; give a custom conll "
                              "file's tag column by its 0-based index")
        if _same_content(self.train_file, self.dev_file) and (self.train_file, self.dev_file) not in _WARNED:
            _WARNED.add((self.train_file, self.dev_file))  # once, though a run validates its options twice
            warnings.warn(f"--data.dev_file {self.dev_file} holds the same rows as --data.train_file "
                          f"{self.train_file}: the best model is picked, and scored, on its own training data",
                          RuntimeWarning, stacklevel=2)


# What a user types for a tab or for spaces that reaches the program as other characters (the shell keeps a
# backslash; no shell turns a word into a tab).
_SEPARATOR_WORDS = {"\\t": "a tab", "\\\\t": "a tab", "tab": "a tab", "\\s": "spaces", "\\s+": "spaces",
                    "space": "a space", "spaces": "spaces", "whitespace": "spaces"}


def check_separator(separator: str | None, option: str = "--data.separator") -> None:
    """A CoNLL file's column separator: one exact string that the lines are split at. Refused, with what to type
    instead: an empty one; the two characters backslash and t (or the word ``tab``), typed for a tab; several
    spaces or other blanks, which would split only where exactly that run of them stands (leaving the option out
    splits at runs of spaces, or at a tab where the lines have one). These would otherwise fail later at the first
    word line, blamed on the tag column."""
    if separator is None:
        return
    default = "leave the option out to split at a tab where the lines have one, else at runs of spaces"
    if separator == "":
        raise ConfigError(f"{option}: empty; {default}")
    meant = _SEPARATOR_WORDS.get(separator.strip().lower())
    if meant == "a tab":
        raise ConfigError(f"{option} '{separator}': these characters themselves, not a tab; type a real tab "
                          f"(--data.separator $'\\t' in bash, separator: \"\\t\" in a --config file), or {default}")
    if meant is not None:
        raise ConfigError(f"{option} '{separator}': these characters themselves, not {meant}; type the character "
                          f"itself in quotes (--data.separator ' '), or {default}")
    if separator.isspace() and separator not in (" ", "\t"):
        raise ConfigError(f"{option} {separator!r}: would split only where exactly these {len(separator)} blanks "
                          f"stand; give one space (' ') or one tab, or {default}")


def _only_for(section: Any, name: str, options: Iterable[str], where: str) -> None:
    """``--NAME.OPTION: only for WHERE`` for the first of ``options`` that ``section`` (the options of section
    ``name``) gives another value than the default."""
    default = type(section)()
    for option in options:
        if getattr(section, option) != getattr(default, option):
            raise ConfigError(f"--{name}.{option}: only for {where}")


_RANKING_TASKS = "ranking tasks (--data.task wikiqa, or custom files in --data.format ranking)"
_TOKEN_OPTIONS = ("token_column", "tag_column", "separator", "scheme", "subword", "context", "unknown_tags")
_RANKING_OPTIONS = ("keep", "ranking_columns")
_RANKING_TRAIN_OPTIONS = ("rank_loss", "rank_margin")


def check_ranking_columns(columns: Any) -> None:
    """``--data.ranking_columns``: known fields, all names (non-empty strings) or all 0-based indices, no column
    read twice (:func:`hire.data.ranking.read_ranking_file`'s own check, as a ConfigError naming the option)."""
    from hire.data.ranking import FIELDS

    if not isinstance(columns, dict):
        raise ConfigError(f"--data.ranking_columns: a mapping of fields to columns, not {columns!r}")
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise ConfigError(f"--data.ranking_columns: unknown field(s) {unknown}; the fields are {list(FIELDS)}")
    kinds = {isinstance(v, int) and not isinstance(v, bool) for v in columns.values()}
    if kinds == {True}:
        missing = [name for name in FIELDS[:4] if name not in columns]
        if missing:
            raise ConfigError(f"--data.ranking_columns: columns given as indices (a file without a header) must "
                              f"give {missing} too")
        if any(v < 0 for v in columns.values()):
            raise ConfigError(f"--data.ranking_columns: column indices are 0-based and >= 0, not {columns}")
    elif kinds == {False}:
        bad = {k: v for k, v in columns.items() if not isinstance(v, str) or not v.strip()}
        if bad:
            raise ConfigError(f"--data.ranking_columns: column names must be non-empty strings, not {bad}")
    elif columns:
        raise ConfigError(f"--data.ranking_columns: all names (a file with a header) or all indices (one without), "
                          f"not {columns}")
    resolved = {**{name: name for name in FIELDS}, **columns} if kinds != {True} else dict(columns)
    if len(set(resolved.values())) < len(resolved):
        raise ConfigError(f"--data.ranking_columns: two fields read the same column: {resolved}")
_WARNED: set[tuple[str, str]] = set()  # (train file, dev file) pairs already warned about


@dataclass
class ModelArgs:
    encoder: str = _f("all-MiniLM-L6-v2", "encoder: Hugging Face hub name or local path")
    head: str = _f("hire", "head by name; `hire heads` lists them")
    head_options: dict[str, Any] = _f({}, "head options as JSON or key=value,key=value (e.g. fusion_layers=1)")
    init_from: str | None = _f(None, "start from an earlier fine-tuned model folder (e.g. MNLI before RTE); "
                               "a new output layer is made when the label set differs")
    classifier_dropout: Probability = _f(0.1, "dropout before each product of the output layer")
    freeze_encoder: bool = _f(False, "feature-based use: train only the head and output layer on the encoder's "
                              "fixed hidden states (no gradient into the encoder, no dropout in it)")
    ranker: Literal["cross", "bi"] = _f(
        "cross", "ranking tasks: cross (a cross-encoder: question and passage read together, any head) or bi (a "
        "bi-encoder: one encoder reads each apart, mean-pooled last layer, cosine x 20; head last-layer or pool-mean, "
        "the default last-layer; --train.rank_loss in-batch, the default, or pairwise)")

    def validate(self, given: Iterable[str] | None = None) -> None:
        """The encoder (or the model to start from) exists; the head takes the options given. With
        ``init_from``, the options the loaded model fixes take its values (:meth:`take_from_loaded_model`)."""

        if self.init_from is not None:
            check_saved_model(self.init_from, "--model.init_from")
            self.take_from_loaded_model(given)
        else:
            check_encoder(self.encoder, "--model.encoder")
            check_head(self.head, self.head_options)

    def take_from_loaded_model(self, given: Iterable[str] | None = None) -> None:
        """Starting from a saved model (``init_from``), its encoder, head, head options and classifier dropout
        are what trains: the model fixes them. An option left out means "as the loaded model" and takes the
        model's value, so that the run's ``config.yaml`` records what really ran; an option given with another
        value than the model's would be silently ignored, and is an error naming both values.

        ``given``: the names of the options that were given (``encoder``, ``head`` ...: the command line and its
        ``--config`` file, :func:`hire.options.parse_options` records them); where it is None (a configuration
        built in Python), an option counts as given when its value is not the default."""
        from hire.heads import head_option_defaults
        from hire.heads import head_options as options_of
        from hire.saved_model import saved_model_config

        assert self.init_from is not None
        saved, default = saved_model_config(self.init_from, "--model.init_from"), ModelArgs()
        names = set(given) if given is not None else {
            f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(default, f.name)}
        where = f"--model.init_from {self.init_from}"
        head = str(saved.get("head") or default.head)
        if "head" in names and self.head != head:
            raise ConfigError(f"--model.head {self.head}: {where} has head {head!r}, which it keeps; leave "
                              f"--model.head out, or train a new {self.head} head from an encoder (--model.encoder "
                              "without --model.init_from)")
        check_head(head, self.head_options)
        theirs = {k: v for k, v in dict(saved.get("head_options") or {}).items() if k in options_of(head)}
        defaults = head_option_defaults(head)
        for key, value in self.head_options.items() if "head_options" in names else ():
            if value != theirs.get(key, defaults.get(key)):
                raise ConfigError(f"--model.head_options: {key}={value}, but {where} has {key}="
                                  f"{theirs.get(key, defaults.get(key))} (its {head} head is fixed); leave "
                                  f"--model.head_options out, or give its values")
        encoder = str(saved.get("encoder") or "")
        if "encoder" in names and self.encoder != encoder and (
                not encoder or real_path(self.encoder) != real_path(encoder)):
            raise ConfigError(f"--model.encoder {self.encoder}: {where} was fine-tuned from encoder "
                              f"{encoder or '(not recorded)'}, which it keeps; leave --model.encoder out")
        dropout = saved.get("classifier_dropout", default.classifier_dropout)
        if "classifier_dropout" in names and self.classifier_dropout != dropout:
            raise ConfigError(f"--model.classifier_dropout {self.classifier_dropout}: {where} has classifier "
                              f"dropout {dropout}, which it keeps; leave --model.classifier_dropout out")
        self.head, self.head_options, self.classifier_dropout = head, theirs, dropout
        self.encoder = encoder or self.encoder


@dataclass
class TrainConfig:
    epochs: AtLeast1 = _f(10, "maximum training epochs (paper: 3-27, with early stopping)")
    batch_size: AtLeast1 = _f(32, "examples per optimizer step, the global batch: split evenly over the processes "
                         "when several train together (paper: 16, 32 or 48)")
    lr: NonNegative = _f(2e-5, "peak learning rate (paper: 1e-5 or 2e-5; small encoders want more)")
    head_lr: Positive | None = _f(None, "learning rate of the head and output layer (default: --train.lr)")
    weight_decay: NonNegative = _f(0.1, "decoupled weight decay (not on biases and LayerNorm weights)")
    adam_beta1: Probability = _f(0.9, "Adam beta1")
    adam_beta2: Probability = _f(0.98, "Adam beta2")
    adam_eps: Positive = _f(1e-6, "Adam epsilon")
    warmup_ratio: UnitInterval = _f(0.06, "linear warm-up over this fraction of the steps, then linear decay")
    max_grad_norm: Positive = _f(1.0, "gradient-norm clipping")
    eval_every: AtLeast1 | None = _f(None, "evaluate every N optimizer steps (default: at the end of each "
                                     "epoch)")
    patience: AtLeast1 | None = _f(None, "early stopping: stop after N evaluations without improvement")
    checkpoint_every: AtLeast1 = _f(100, "save a resumable checkpoint every N steps (and at each evaluation)")
    seed: Seed = _f(42, "random seed (data order, dropout, new weights)")
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = _f(
        "auto", "auto: bf16 where the hardware has fast bf16 (this CPU, recent GPUs), else fp32")
    group_by_length: bool = _f(True, "batch examples of similar length together (less padding)")
    max_steps: AtLeast1 | None = _f(None, "stop after N optimizer steps (overrides epochs)")
    rank_loss: Literal["pointwise", "pairwise", "in-batch"] = _f(
        "pointwise", "ranking tasks: pointwise (binary cross-entropy of each pair's score; cross-encoder only), "
        "pairwise (the rank hinge loss over every relevant/irrelevant pair of a question; batches hold whole "
        "questions) or in-batch (bi-encoder only, its default: each relevant passage against every other passage "
        "of the batch, cross-entropy)")
    rank_margin: Positive = _f(1.0, "ranking tasks, pairwise: the hinge's margin, max(0, margin - s_pos + s_neg)")


@dataclass
class RunConfig:
    output_dir: str = _f("runs/run", "run folder: configuration, metrics, best model, predictions, logs")
    overwrite: bool = _f(False, "replace a finished run, or one of another configuration, already in --output_dir "
                         "(on the command line only: --overwrite, or --overwrite true)")
    predict_test: bool = _f(True, "after training, also predict the task's unlabelled test splits and write its GLUE "
                            "submission files (later: `hire evaluate --model RUN/best --task T --split test`)")
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelArgs = field(default_factory=ModelArgs)
    train: TrainConfig = field(default_factory=TrainConfig)

    # The dotted names of the options that were given (not left at their defaults), where known: set by
    # hire.options.parse_options; None for a configuration built in Python. Not an option, not saved.
    given: frozenset[str] | None = field(default=None, repr=False, compare=False, metadata={"internal": True})

    def to_dict(self) -> dict[str, Any]:
        """The configuration as it is saved (``config.yaml``, a model card's recipe, ``--print_config``): every
        option but the one-shot actions (``ONE_SHOT``), which act on this command alone and must never come
        back from a file (a saved ``overwrite: true`` would let a later ``--config`` replace a finished run)."""
        values = dataclasses.asdict(self)
        for name in (*ONE_SHOT, "given"):
            values.pop(name, None)
        return values

    def save(self, path: Path) -> None:
        path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def from_dict(cls, values: Any) -> RunConfig | None:
        """A configuration from what :meth:`to_dict` wrote (a run's ``config.yaml``), options left out at their
        defaults; None where ``values`` is not one: not a mapping, an unknown option, a value of the wrong type
        or out of range (:func:`value_problem`). Hand-written option files go through ``hire.options``."""
        sections = {"data": DataConfig, "model": ModelArgs, "train": TrainConfig}
        if not isinstance(values, dict) or not all(isinstance(values.get(s, {}), dict | type(None)) for s in sections):
            return None
        try:
            cfg = cls(**{k: v for k, v in values.items() if k not in sections},
                      **{s: kind(**(values.get(s) or {})) for s, kind in sections.items()})
        except TypeError:  # an option this version does not have
            return None
        if any(value_problem(cfg.get(name), tp) is not None for name, tp, _ in option_fields(RunConfig)):
            return None
        return cfg

    def validate(self) -> None:
        """Check every option before anything on disk changes; :class:`ConfigError` names the first bad one.

        Types and ranges (each field's annotation, :func:`value_problem`) first, then the task and
        its files, the output folder, the encoder and the head (which imports the heads, and with them torch).
        """

        for name, tp, _ in option_fields(RunConfig):
            problem = value_problem(self.get(name), tp)
            if problem is not None:
                raise ConfigError(f"--{name}: {problem}")
        self.data.validate()
        if not self.data.is_ranking():
            _only_for(self.train, "train", _RANKING_TRAIN_OPTIONS, _RANKING_TASKS)
        self._resolve_ranker()
        check_output_folder(self.output_dir, "--output_dir")
        out = Path(real_path(self.output_dir))
        for option, value in (("--model.init_from", self.model.init_from), ("--model.encoder", self.model.encoder)):
            path = Path(value).expanduser() if value else None
            if path is not None and path.exists() and Path(real_path(path)).is_relative_to(out):
                raise ConfigError(f"{option} {value}: inside --output_dir {self.output_dir}, whose contents the "
                                  "run replaces; choose another --output_dir")
        given = None if self.given is None else [n.partition(".")[2] for n in self.given if n.startswith("model.")]
        self.model.validate(given)

    def is_given(self, name: str) -> bool:
        """Whether option ``name`` (dotted) was given: as recorded (:attr:`given`), or, for a configuration built in
        Python, whether its value differs from the default."""
        return name in self.given if self.given is not None else self.get(name) != RunConfig().get(name)

    def _resolve_ranker(self) -> None:
        """``--model.ranker`` and the options it decides. A cross-encoder takes any head and the pointwise or
        pairwise loss, never ``in-batch``. A bi-encoder (ranking tasks only) trains its encoder (no frozen encoder,
        no ``init_from``: a saved bi-encoder is an encoder folder, given as ``--model.encoder``), has no head or
        output layer of its own (no head options, no classifier dropout), takes the heads of
        :data:`hire.model.BI_HEADS` (the last layer, mean-pooled; ``last-layer`` where no head is given) and the
        losses ``in-batch`` (where none is given) or ``pairwise``. The options left out take those values here, so
        that ``config.yaml`` records what trains."""
        from hire.model import BI_HEADS, BI_RANK_LOSSES

        m, t = self.model, self.train
        if m.ranker != "bi":
            if t.rank_loss == "in-batch":
                raise ConfigError("--train.rank_loss in-batch: for the bi-encoder only (--model.ranker bi); a "
                                  "cross-encoder trains pointwise or pairwise")
            return
        if not self.data.is_ranking():
            raise ConfigError(f"--model.ranker bi: only for {_RANKING_TASKS}")
        if m.init_from is not None:
            raise ConfigError(f"--model.init_from {m.init_from}: not for the bi-encoder (--model.ranker bi); a saved "
                              "bi-encoder is an encoder folder: start from it with --model.encoder FOLDER")
        if m.freeze_encoder:
            raise ConfigError("--model.freeze_encoder: the bi-encoder trains its encoder (it has no head or output "
                              "layer of its own to train)")
        if m.head_options:
            raise ConfigError(f"--model.head_options {m.head_options}: the bi-encoder's heads "
                              f"({', '.join(BI_HEADS)}) take no options")
        if m.classifier_dropout != ModelArgs().classifier_dropout:
            raise ConfigError("--model.classifier_dropout: the bi-encoder has no output layer (its score is the "
                              "cosine of two vectors)")
        if not self.is_given("model.head"):
            m.head = BI_HEADS[0]
        elif m.head not in BI_HEADS:
            raise ConfigError(f"--model.head {m.head}: the bi-encoder takes {' or '.join(BI_HEADS)} (the last "
                              "layer mean-pooled over real tokens: questions and passages are encoded apart, one "
                              "vector each); other heads are for the cross-encoder (--model.ranker cross)")
        if not self.is_given("train.rank_loss"):
            t.rank_loss = BI_RANK_LOSSES[0]
        elif t.rank_loss not in BI_RANK_LOSSES:
            raise ConfigError(f"--train.rank_loss {t.rank_loss}: the bi-encoder trains with "
                              f"{' or '.join(BI_RANK_LOSSES)}")

    def get(self, name: str) -> Any:
        """An option's value by its dotted name (``train.lr``)."""
        value: Any = self
        for part in name.split("."):
            value = getattr(value, part)
        return value


ONE_SHOT = ("overwrite",)  # options that act on one command and are never saved (RunConfig.to_dict)


def _same_content(a: str | None, b: str | None) -> bool:
    """Whether files ``a`` and ``b`` are one file, or hold the same bytes."""
    if not a or not b:
        return False
    try:
        return os.path.samefile(a, b) or filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def option_fields(cls: type, prefix: str = "") -> list[tuple[str, Any, dataclasses.Field]]:
    """``(dotted name, type, field)`` of every option of dataclass ``cls``, sections flattened; the type keeps
    its range (``Annotated[int, AtLeast1]``)."""
    hints, out = get_type_hints(cls, include_extras=True), []
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            out += option_fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, hints[f.name], f))
    return out


def parser_type(tp: Any) -> Any:
    """``tp`` as jsonargparse checks it: ``Annotated[int, R]`` is R, the restricted number type (in a union
    too), so that the parser refuses a value out of range where it reads it."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return next((a for a in args[1:] if isinstance(a, type) and hasattr(a, "_restrictions")), args[0])
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(parser_type(a) for a in args)]  # noqa: UP007 (built from a tuple)
    return tp


# Encoders whose position ids start after the padding id (RoBERTa's offset of pad + 1).
_POSITIONS_AFTER_PAD = {"roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text", "xmod",
                        "roberta-prelayernorm", "ibert", "mpnet"}


_HUB_NAME = re.compile(r"\w[\w.-]*(/\w[\w.-]*)?")


def check_encoder(name: str, option: str) -> None:
    """A local model folder, a short name (the default encoder's, or one installed by ``hire install-encoder``),
    or a hub name (already cached when offline)."""
    path = Path(name).expanduser()
    kind = path_kind(path)
    if kind is not None and kind.startswith(UNUSABLE):
        raise ConfigError(f"{option} {name}: {kind}")
    if kind is not None:
        if not (path / "config.json").is_file():
            raise ConfigError(f"{option} {name}: not a Hugging Face model folder (no config.json)")
        return
    if not _HUB_NAME.fullmatch(name) or ".." in name or "--" in name:
        raise ConfigError(f"{option} {name}: no such folder, and not a Hugging Face hub name")
    from huggingface_hub import constants, try_to_load_from_cache

    from hire.encoder import DEFAULT_ENCODER
    from hire.installed_encoders import installed_encoder

    try:
        installed = installed_encoder(name)  # all-mpnet-base-v2 not installed: the command that installs it
    except ValueError as err:
        raise ConfigError(f"{option}: {err}") from None
    if (installed is not None or name in (DEFAULT_ENCODER, f"sentence-transformers/{DEFAULT_ENCODER}")
            or not constants.HF_HUB_OFFLINE):
        return  # resolved by hire.encoder.resolve_encoder, or downloaded
    if not isinstance(try_to_load_from_cache(name, "config.json"), str):
        raise ConfigError(f"{option} {name}: no such folder, and not a known name or a model in the Hugging "
                          "Face cache (HF_HUB_OFFLINE is set, so nothing is downloaded)")


def check_head(head: str, options: dict[str, Any]) -> None:
    """The head exists, and takes each of ``options`` with a value of its type and range (as the head declares
    them: :func:`hire.heads.check_head_options`)."""
    from hire.heads import check_head_options, head_options

    try:
        head_options(head)
    except ValueError as err:
        raise ConfigError(f"--model.head: {err}") from None
    try:
        check_head_options(head, options)
    except ValueError as err:
        raise ConfigError(f"--model.head_options: {str(err).removeprefix(f'head {head!r}: option ')}") from None


def encoder_max_length(encoder_config: Any) -> int | None:
    """The most tokens an encoder takes (from a ``transformers`` config or its dict); None if unbounded."""
    values = encoder_config if isinstance(encoder_config, dict) else encoder_config.to_dict()
    model_type = values.get("model_type", "")
    if model_type.startswith("deberta") and not values.get("position_biased_input", True):
        return None  # relative positions only
    positions = values.get("max_position_embeddings")
    if not isinstance(positions, int):
        return None
    if model_type in _POSITIONS_AFTER_PAD:
        pad = values.get("pad_token_id")
        positions -= (1 if pad is None else pad) + 1
    return positions


def check_max_length(max_length: int, encoder_config: Any, option: str = "--data.max_length") -> None:
    """``max_length`` fits the encoder's position embeddings (call once the encoder's config is known)."""
    limit = encoder_max_length(encoder_config)
    if limit is not None and max_length > limit:
        raise ConfigError(f"{option}: must be <= {limit}, the most tokens the encoder takes, not {max_length}")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'train.lr'?)"`` for the closest of ``choices``, or ``""``."""
    choices = list(choices)
    close = [c for c in choices if "." in c and c.rpartition(".")[2] == name.rpartition(".")[2].lstrip("-")]
    close = close or difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
