"""The seam where a kind of task plugs in: :class:`TaskKind` (what the options know of it: its own options, how
they are checked, which ``--data`` options name it) and :class:`TaskType` (what training, evaluation and prediction
ask of it), the split data it reads (:class:`TaskData`), its predictions (:class:`Predictions`) and the registry.

A kind of task is one package (hire's own are those of :mod:`hire.tasks`; another library's plug in the same way),
named by an entry point of the ``hire.task_kinds`` group: its ``__init__`` defines a :class:`TaskKind` and
registers it (:func:`register_task_kind`); the kind names the module that holds its :class:`TaskType`, imported
only when a run needs it (the options, ``--help`` and a bad option never import torch). The generic modules
(:mod:`hire.config`, :mod:`hire.training`, :mod:`hire.evaluation`, :mod:`hire.commands` ...) ask the registered
kinds and types and never name one, nor import a kind's package: the kinds stand above the core, this seam below
it.

**The kind** (light) owns:

- its options: dataclasses of ``--data``, ``--model`` and ``--train`` options (:attr:`TaskKind.data_options` ...)
  that :mod:`hire.config` composes into the run's sections, so that ``--data.scheme`` parses and saves as any
  other option; another kind's option given a value is refused, naming the kind it is for
  (:attr:`TaskKind.only_for`);
- which tasks it reads: :meth:`TaskKind.handles`, its named tasks (:meth:`TaskKind.named_task`) and custom file
  layouts (:attr:`TaskKind.formats`), and what ``--data.task``, ``--data.data_dir`` and ``--data.format`` say of
  it in ``--help``;
- the checks of its options: :meth:`TaskKind.check_data` and :meth:`TaskKind.check_run` (across sections).

**The type** (:class:`TaskType`, heavy) answers:

- **reader**: :meth:`TaskType.load` reads every split (and so reports every bad row) before training starts;
- **model and tokenizer**: :meth:`TaskType.build` (the model class its ``model_type`` registered in
  :mod:`hire.model`, with what the loss reads from the training options: :meth:`TaskType.loss_options`);
- **tokenization and collation**: :meth:`TaskType.encode` and :meth:`TaskType.collator`;
- **training batches**: :meth:`TaskType.train_batches` (length-grouped by default; a pairwise ranker's keep each
  question's candidates together);
- **metrics**: :meth:`TaskType.score`;
- **prediction writer**: :meth:`TaskType.predict` (outputs in example order) and
  :meth:`TaskType.write_predictions`;
- **hire predict**: :meth:`TaskType.predict_file` reads a user's file for a saved model and writes its outputs.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hire.checks import ConfigError

# The run's options (hire.config.DataConfig, RunConfig, TrainConfig), which hire.config composes from the kinds'
# own: named here by what they are, not imported (the seam stands below the configuration).
DataConfig = RunConfig = TrainConfig = Any

if TYPE_CHECKING:
    import numpy as np
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, Dataset
    from transformers import PreTrainedTokenizerBase



@dataclass
class TaskData:
    """A task's splits, labels and metrics, as its type read them."""

    name: str
    label_names: list[str] | None  # class or tag names in logit order; None: regression
    metrics: tuple[str, ...]
    train: list[Any]
    dev: dict[str, list[Any]]  # labelled evaluation splits; the first one picks the best model
    test: dict[str, list[Any]] = field(default_factory=dict)  # unlabelled prediction splits
    submission_files: dict[str, str] = field(default_factory=dict)  # test split -> GLUE file name
    held_out: dict[str, list[Any]] = field(default_factory=dict)  # labelled splits scored once, at the end
    options: dict[str, Any] = field(default_factory=dict)  # the type's own settings (a tagger's scheme, subword)
    # Evaluation only (load's with_train False): "dev" / "test" -> why a named data set's split of that kind was
    # not read (its file is absent). An error only where a command asks for that kind (hire evaluate --split).
    missing: dict[str, str] = field(default_factory=dict)
    type: TaskType = field(default=None, repr=False)  # type: ignore[assignment]  # set by load_task

    @property
    def regression(self) -> bool:
        return self.label_names is None

    @property
    def num_labels(self) -> int:
        return 1 if self.label_names is None else len(self.label_names)


@dataclass
class Predictions:
    """A split's predictions in example order: ``logits`` (N, m) (or (N,) for regression) for one label per
    example, a list of (words, m) arrays for a tag per word; each example's layer weights where the head has them."""

    logits: Any
    layer_weights: np.ndarray | None  # (N, l + 1)
    seconds: float  # wall time of the prediction loop

    @property
    def examples_per_second(self) -> float:
        return len(self.logits) / max(self.seconds, 1e-9)


class TaskType(ABC):
    """What training, evaluation and prediction ask of one kind of task; see the module docstring."""

    kind: TaskKind  # its options and names (set by TaskKind.task_type)

    name = property(lambda self: self.kind.name, doc="its kind's name (``sequence``, ``token`` ...)")
    model_type = property(lambda self: self.kind.model_type,
                          doc="``HireConfig.task_type`` of its models (the class :mod:`hire.model` registered for it)")

    @abstractmethod
    def load(self, cfg: DataConfig, with_train: bool = True) -> TaskData:
        """Read every split the options name; bad data is a ``DataError`` naming file and line."""

    def model_options(self, task: TaskData) -> dict[str, Any]:
        """What :func:`hire.model.build_model` needs beside the head and labels (a tagger's ``subword``)."""
        return {}

    def build(self, cfg: RunConfig, task: TaskData) -> tuple[Any, Any]:
        """The model to train and its tokenizer: the encoder and head of ``cfg.model`` (or the fine-tuned model of
        ``--model.init_from``) with the model class of :attr:`model_type` (:func:`build_model_for`)."""
        return build_model_for(self, cfg, task)

    def tokenizer_words(self) -> bool:
        """Whether its text comes as words (token tasks: :func:`hire.model.load_tokenizer`'s ``words``)."""
        return False

    def configure(self, model: Any, tokenizer: Any, cfg: RunConfig, from_encoder: bool) -> None:
        """Set what a model built by :meth:`build` records of its task (``from_encoder``: built from the encoder,
        not loaded from ``--model.init_from``); by default that it reads no text columns of a table."""
        model.config.text_columns = None

    def prepare_evaluation(self, task: TaskData, config: dict[str, Any]) -> None:  # noqa: B027 (a hook)
        """Before ``hire evaluate`` scores a saved model (``config``: its ``config.json``, as
        :func:`hire.saved_model.check_model_folder` reads it) on ``task``: what the model fixes of how the task is
        read and scored (a tagger's tags, a bi-encoder's way of encoding); nothing by default."""

    def final_options(self, task: TaskData) -> dict[str, Any]:
        """What the evaluation of a finished run chose on dev that its saved model must keep (added to the
        ``task_options`` of ``best/config.json``: a span model's no-answer threshold); nothing by default."""
        return {}

    def final_record(self, model: Any) -> dict[str, Any]:
        """What a finished run's ``metrics.json`` says of its saved ``model`` beyond the common fields."""
        return {}

    def loss_options(self, train: TrainConfig) -> dict[str, Any]:
        """The training options the model's loss reads, recorded in its ``HireConfig.task_options`` (a ranker's
        ``rank_loss`` and ``rank_margin``); none by default."""
        return {}

    def train_batches(self, task: TaskData, split: Dataset, train: TrainConfig) -> Any:
        """The batch sampler of the training split: lists of item indices, in an order that is a function of
        (``train.seed``, epoch) (``set_epoch``), the same number of batches every epoch (``len``), so that a
        resumed run sees the same batches. By default :class:`hire.data.batching.LengthGroupedBatches`."""
        from hire.data.batching import LengthGroupedBatches

        return LengthGroupedBatches(split.lengths, train.batch_size, shuffle=True,  # type: ignore[attr-defined]
                                    seed=train.seed, group_by_length=train.group_by_length)

    @abstractmethod
    def encode(self, task: TaskData, examples: Sequence[Any], tokenizer: PreTrainedTokenizerBase, max_length: int,
               labelled: bool = True) -> Dataset:
        """Tokenize a split (with a ``lengths`` attribute, tokens per item, for length-grouped batches)."""

    @abstractmethod
    def collator(self, pad_token_id: int) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
        """Pads a list of items into a batch for the model (right padding)."""

    @abstractmethod
    def predict(self, model: Any, loader: DataLoader, split: Dataset, accelerator: Accelerator,
                desc: str = "predict") -> Predictions:
        """Run the (prepared) model over a (prepared) loader of ``split``; outputs in example order."""

    @abstractmethod
    def score(self, task: TaskData, preds: Predictions, examples: Sequence[Any], split: Dataset) -> dict[str, float]:
        """The task's metrics on a labelled split, with ``score``: the number that picks the best model."""

    @abstractmethod
    def write_predictions(self, path: Path, task: TaskData, examples: Sequence[Any], preds: Predictions) -> None:
        """Each example's prediction, one JSON line per example."""

    has_submissions: bool = False  # whether unlabelled splits get a leaderboard file (write_submission)

    def write_submission(self, path: Path, task: TaskData, examples: Sequence[Any], preds: Predictions) -> None:
        """A leaderboard file for an unlabelled split (types with ``has_submissions``)."""
        raise NotImplementedError


class TaskKind:
    """One kind of task as the options know it (light: nothing here imports torch); see the module docstring.

    A subclass sets the class attributes and overrides the methods that its kind needs; :attr:`implementation`
    names its :class:`TaskType` as ``"package.module:NAME"`` (imported on first use), or is the type itself."""

    name: str = ""  # e.g. "sequence", "token", "ranking"
    model_type: str = ""  # HireConfig.task_type of its models (default: the kind's name)
    implementation: Any = None  # "hire.tasks.sequence.tasktype:SEQUENCE", or a TaskType
    data_options: type | None = None  # a dataclass of --data options, composed into hire.config.DataConfig
    model_options: type | None = None  # ... of --model options (ModelArgs)
    train_options: type | None = None  # ... of --train options (TrainConfig)
    # Custom file layouts it reads (--data.format): name -> what --help says of it.
    formats: Mapping[str, str] = MappingProxyType({})
    predict_formats: tuple[str, ...] = ()  # the input layouts of `hire predict` with its models (--format)
    named_help: str = ""  # what --data.task's help says of its named tasks, e.g. "wikiqa (answer ranking)"
    data_dir_help: str = ""  # what --data.data_dir's help says of its named tasks' folder
    only_for: str = ""  # "ranking tasks (...)": where its options belong, for the error that refuses them elsewhere
    custom_only: tuple[str, ...] = ()  # its data options that describe custom files (a named task has its own)
    options_first: bool = False  # its data options stand right after the files, before --data.max_length
    order: int = 100  # where it stands among the kinds (hire's own: 0, 1, 2; the first is the default kind)

    def __init__(self) -> None:
        self.model_type = self.model_type or self.name
        self._type: TaskType | None = None

    def handles(self, cfg: DataConfig) -> bool:
        """Whether the run's ``data`` options name a task of this kind: one of its named tasks, or custom files in
        one of its :attr:`formats`."""
        if cfg.task.lower() == "custom":
            return cfg.format in self.formats
        return self.named_task(cfg.task) is not None

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        """A task this kind reads by name (``--data.task``, not ``custom``): its canonical spelling and the metrics
        whose mean is its ``score`` (what picks the best model: GLUE's rule), or None when the name is not one of
        its tasks."""
        return None

    def task_names(self) -> tuple[str, ...]:
        """The tasks this kind reads by name, for messages."""
        return ()

    def check_options(self, cfg: DataConfig) -> None:
        """Its data options on their own, before any file is looked at (a separator typed wrongly): a
        ``ConfigError`` naming the option."""

    def check_data(self, cfg: DataConfig) -> None:
        """Its data options, for a named task and custom files alike (``cfg.task``): a ``ConfigError`` naming the
        option. Called after the other kinds' options were refused and, for custom files, after the files were
        checked."""

    def check_run(self, cfg: RunConfig, owner: bool) -> None:
        """Checks across sections (``owner``: the run is a task of this kind; else what of its options a run of
        another kind must not give), and options it resolves from others (a bi-encoder's head and loss)."""

    def describe(self) -> str:
        """What its models do, as messages say it (e.g. "ranks passages")."""
        return ""

    def evaluation_data(self, task: str, model: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """``hire evaluate --task TASK --model MODEL`` of one of its models (``config``: its ``config.json``): the
        name the results are filed under and the ``--data`` options that read the task as the model was trained to
        read it; a ``ConfigError`` where the model cannot be scored on it (its labels are not the task's)."""
        raise ConfigError(f"--task {task}: hire evaluate reads no {self.name} task by name")

    def predict_file(self, args: Any, config: dict[str, Any]) -> int:
        """``hire predict`` with one of its models (``args``: :class:`hire.commands.PredictOptions`; ``config``: the
        model's ``config.json``): read the user's input, write the predictions; by default the function
        ``predict_file`` of the module :attr:`predictor` names."""
        module, _, attribute = self.predictor.partition(":")
        return getattr(importlib.import_module(module), attribute or "predict_file")(args, config)

    predictor: str = ""  # "hire.tasks.sequence.predict": where hire predict's reader and writer are

    def own_layout(self, folder: Path) -> str | None:
        """What a saved model folder is, where it holds one of this kind's models saved in a layout of its own (not
        hire's ``config.json``: a bi-encoder is an encoder as ``transformers`` saves it); None for any other."""
        return None

    def read_own_layout(self, folder: str | Path, option: str) -> dict[str, Any]:
        """Such a folder's description, as :func:`hire.saved_model.check_model_folder` returns a ``config.json``
        (with ``task_type`` and ``encoder_config``), each field checked."""
        raise NotImplementedError

    @property
    def task_type(self) -> TaskType:
        """Its :class:`TaskType`, imported on first use."""
        if self._type is None:
            found = self.implementation
            if isinstance(found, str):
                module, _, attribute = found.partition(":")
                found = getattr(importlib.import_module(module), attribute)
            found.kind = self
            self._type = found
        return self._type


_KINDS: dict[str, TaskKind] = {}
KIND_PLUGINS = "hire.task_kinds"  # the entry-point group of the kinds of task: hire's own (hire.tasks) and others'
_loaded = False


def register_task_kind(kind: TaskKind) -> TaskKind:
    """Add a kind of task (a kind's package does it when imported); in :func:`task_kinds`, by :attr:`TaskKind.order`
    then as registered; the kinds that come later are asked first (:func:`task_kind_for`)."""
    _KINDS[kind.name] = kind
    return kind


def task_kinds() -> dict[str, TaskKind]:
    """The kinds of task: those of the ``hire.task_kinds`` entry points (each names a package that registers its
    kind when imported: hire's own in ``pyproject.toml``), imported on first use, and any registered since; by
    :attr:`TaskKind.order`, then as registered."""
    global _loaded
    if not _loaded:
        from importlib.metadata import entry_points

        _loaded = True
        for entry in entry_points(group=KIND_PLUGINS):
            entry.load()
        if not _KINDS:
            raise RuntimeError(f"no kind of task is registered: the {KIND_PLUGINS} entry points are missing (install "
                               "hire: pip install -e .)")
    return dict(sorted(_KINDS.items(), key=lambda item: item[1].order))


def task_kind_for(cfg: DataConfig) -> TaskKind:
    """The kind whose tasks the ``data`` options name (the last registered that handles them)."""
    for kind in reversed(list(task_kinds().values())):
        if kind.handles(cfg):
            return kind
    raise ValueError(f"no kind of task handles --data.task {cfg.task}")  # the sequence kind takes every other name


def task_type_for(cfg: DataConfig) -> TaskType:
    """The type of the task that the ``data`` options name."""
    return task_kind_for(cfg).task_type


def task_kind_of_model(model_type: str | None) -> TaskKind:
    """The kind of task whose models have ``HireConfig.task_type`` ``model_type`` (a saved model's; None, as in a
    folder saved before task types: the kind registered first, sentence tasks)."""
    if model_type is None:
        return next(iter(task_kinds().values()))
    for kind in reversed(list(task_kinds().values())):
        if kind.model_type == model_type:
            return kind
    raise ValueError(f"no kind of task makes models of task_type {model_type!r}; the kinds: "
                     f"{', '.join(task_kinds())}")


def task_type_of_model(model_type: str | None) -> TaskType:
    """The type of the tasks whose models have ``HireConfig.task_type`` ``model_type``."""
    return task_kind_of_model(model_type).task_type


def named_task(name: str) -> tuple[str, tuple[str, ...]]:
    """The canonical spelling of a task named by ``--data.task`` (a GLUE task, ``conll2003``, ...) and its
    metrics, whatever its kind; a ``ValueError`` listing every named task for an unknown one."""
    for kind in reversed(list(task_kinds().values())):
        found = kind.named_task(name)
        if found is not None:
            return found
    names = [n for k in task_kinds().values() for n in k.task_names()]
    raise ValueError(f"unknown task {name!r}; the tasks read by name: {', '.join(names)} (or custom)")


def read_split(read: Callable[[str], Any], split: str, kind: str, with_train: bool,
               missing: dict[str, str]) -> Any | None:
    """``read(split)`` of a named data set; for evaluation alone (``with_train`` False) a split whose file is
    absent (:class:`hire.data.examples.MissingData`) is None, and why is kept in ``missing[kind]``."""
    from hire.data.examples import MissingData

    try:
        return read(split)
    except MissingData as err:
        if with_train:
            raise
        missing.setdefault(kind, str(err))
        return None


def load_task(cfg: DataConfig, with_train: bool = True) -> TaskData:
    """Read the task that ``cfg`` names, whatever its type (every split, before any training starts)."""
    task_type = task_type_for(cfg)
    task = task_type.load(cfg, with_train)
    task.type = task_type
    return task


# -- building a run's model ----------------------------------------------------------------------------------


def load_tokenizer_for(name: str, option: str, words: bool = False) -> Any:
    """The tokenizer of the encoder or model that ``option`` names; a folder without one is an error naming it.
    ``words``: for text given as words (:func:`hire.model.load_tokenizer`)."""
    from hire.model import load_tokenizer

    try:
        return load_tokenizer(name, words)
    except ValueError as err:
        message = str(err).removeprefix(f"{name}: ")  # the folder is named once, after its option
        raise ConfigError(f"{option} {name}: {message}") from None


def build_model_for(task_type: TaskType, cfg: RunConfig, task: TaskData) -> tuple[Any, Any]:
    """The model to train and its tokenizer (see the module docstring)."""
    from hire.model import HireModel, build_model
    from hire.model.heads import head_options

    m, words = cfg.model, task_type.tokenizer_words()
    loss = task_type.loss_options(cfg.train)  # what the loss reads from the training options (a ranker's)
    if m.init_from:  # e.g. MNLI before RTE: a new output layer when the label set differs
        model = HireModel.from_pretrained(m.init_from, num_labels=task.num_labels, label_names=task.label_names)
        if model.config.task_type != task_type.model_type:
            raise ConfigError(f"--model.init_from {m.init_from}: a {model.config.task_type} model, but task "
                              f"{task.name} is a {task_type.model_type} task")
        model.config.task_options = {**model.config.task_options, **loss}
        model.freeze_encoder(m.freeze_encoder)
        tokenizer = load_tokenizer_for(m.init_from, "--model.init_from", words)
        task_type.configure(model, tokenizer, cfg, from_encoder=False)
        return model, tokenizer
    options = dict(m.head_options)
    if "seed" in head_options(m.head) and "seed" not in options:
        options["seed"] = cfg.train.seed  # Table 5's random scores: a new draw for every run seed
    extra = task_type.model_options(task)
    if loss:
        extra["task_options"] = {**extra.get("task_options", {}), **loss}
    model = build_model(m.encoder, m.head, task.num_labels, options, task.label_names, m.classifier_dropout,
                        freeze_encoder=m.freeze_encoder, task_type=task_type.model_type, **extra)
    tokenizer = load_tokenizer_for(m.encoder, "--model.encoder", words)
    task_type.configure(model, tokenizer, cfg, from_encoder=True)
    return model, tokenizer
