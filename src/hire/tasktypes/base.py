"""The seam where a kind of task plugs in: :class:`TaskType`, the split data it reads (:class:`TaskData`), its
predictions (:class:`Predictions`) and the registry that finds a type from the run's ``data`` options.

Training (:mod:`hire.training`), evaluation (:func:`hire.evaluation.predict_task`) and the commands ask a task's
type five things and nothing else:

- **reader**: :meth:`TaskType.load` reads every split (and so reports every bad row) before training starts;
- **tokenization and collation**: :meth:`TaskType.encode` and :meth:`TaskType.collator`;
- **output layer and loss**: :attr:`TaskType.model_type`, the ``task_type`` of :class:`hire.model.HireConfig`
  (a sentence classifier or regressor, a tagger, or a ranker), with what the loss reads from the training options
  (:meth:`TaskType.loss_options`);
- **training batches**: :meth:`TaskType.train_batches` (length-grouped by default; a pairwise ranker's keep each
  question's candidates together);
- **metrics**: :meth:`TaskType.score`;
- **prediction writer**: :meth:`TaskType.predict` (outputs in example order) and
  :meth:`TaskType.write_predictions`.

A new kind of task is a module that subclasses :class:`TaskType` and calls :func:`register_task_type`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, Dataset
    from transformers import PreTrainedTokenizerBase

    from hire.config import DataConfig, TrainConfig


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
    """One kind of task; see the module docstring for what each method answers."""

    name: str  # what --data options select it by, e.g. "sequence", "token"
    model_type: str  # HireConfig.task_type of its models

    @abstractmethod
    def handles(self, cfg: DataConfig) -> bool:
        """Whether the run's ``data`` options name a task of this type."""

    @abstractmethod
    def load(self, cfg: DataConfig, with_train: bool = True) -> TaskData:
        """Read every split the options name; bad data is a ``DataError`` naming file and line."""

    def model_options(self, task: TaskData) -> dict[str, Any]:
        """What :func:`hire.model.build_model` needs beside the head and labels (a tagger's ``subword``)."""
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

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        """A task this type reads by name (``--data.task``, not ``custom``): its canonical spelling and the metrics
        whose mean is its ``score`` (what picks the best model: GLUE's rule), or None when the name is not one of
        its tasks."""
        return None

    def task_names(self) -> tuple[str, ...]:
        """The tasks this type reads by name, for messages."""
        return ()

    def write_submission(self, path: Path, task: TaskData, examples: Sequence[Any], preds: Predictions) -> None:
        """A leaderboard file for an unlabelled split (types with ``has_submissions``)."""
        raise NotImplementedError


_TYPES: dict[str, TaskType] = {}


def register_task_type(task_type: TaskType) -> TaskType:
    """Add a task type; the types registered later are asked first (:func:`task_type_for`)."""
    _TYPES[task_type.name] = task_type
    return task_type


def task_types() -> dict[str, TaskType]:
    return dict(_TYPES)


def task_type_for(cfg: DataConfig) -> TaskType:
    """The type whose tasks the ``data`` options name (the last registered that handles them)."""
    for task_type in reversed(list(_TYPES.values())):
        if task_type.handles(cfg):
            return task_type
    raise ValueError(f"no task type handles --data.task {cfg.task}")  # the sequence type handles every other name


def named_task(name: str) -> tuple[str, tuple[str, ...]]:
    """The canonical spelling of a task named by ``--data.task`` (a GLUE task, ``conll2003``, ...) and its
    metrics, whatever its type; a ``ValueError`` listing every named task for an unknown one."""
    for task_type in reversed(list(_TYPES.values())):
        found = task_type.named_task(name)
        if found is not None:
            return found
    names = [n for t in _TYPES.values() for n in t.task_names()]
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
