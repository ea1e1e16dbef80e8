"""One view of a task, whether a GLUE task or a user's own files: its splits, labels and metrics, from the
run configuration's ``data`` section. Outside :mod:`hire.data`, which reads files and knows neither the
configuration nor the metrics.

Every split is read (and so every bad row reported) before any training starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hire.checks import check_input_file
from hire.config import DataConfig
from hire.data.examples import DataError, Example
from hire.data.files import infer_label_names, read_table
from hire.data.glue import get_task, read_glue_split


@dataclass
class TaskData:
    name: str
    label_names: list[str] | None  # None: regression
    metrics: tuple[str, ...]
    train: list[Example]
    dev: dict[str, list[Example]]  # labelled evaluation splits; the first one picks the best model
    test: dict[str, list[Example]] = field(default_factory=dict)  # unlabelled prediction splits
    submission_files: dict[str, str] = field(default_factory=dict)  # test split -> GLUE file name

    @property
    def regression(self) -> bool:
        return self.label_names is None

    @property
    def num_labels(self) -> int:
        return 1 if self.label_names is None else len(self.label_names)


def _head(examples: list[Example], n: int | None) -> list[Example]:
    return examples if n is None else examples[:n]


def load_task(cfg: DataConfig, with_train: bool = True) -> TaskData:
    """Read the task's splits as ``cfg`` says (GLUE by name, or ``task='custom'`` with files)."""
    for option, n in (("--data.max_train_examples", cfg.max_train_examples),
                      ("--data.max_eval_examples", cfg.max_eval_examples)):
        if n is not None and n < 1:  # a negative n would drop rows from the end
            raise DataError(f"{option}: must be >= 1, not {n}")
    if cfg.task.lower() == "custom":
        return _load_custom(cfg, with_train)
    spec = get_task(cfg.task)
    read = lambda split: read_glue_split(spec, split, cfg.data_dir)  # noqa: E731
    train = _head(read("train"), cfg.max_train_examples) if with_train and "train" in spec.splits else []
    dev = {s: _head(read(s), cfg.max_eval_examples) for s in spec.dev_splits}
    test = {s: _head(read(s), cfg.max_eval_examples) for s in spec.test_splits}
    submission_files = dict(spec.submission_files)
    if spec.name == "MNLI":  # the diagnostic set is predicted with the MNLI model
        ax = get_task("AX")
        try:
            test["ax"] = _head(read_glue_split(ax, "test", cfg.data_dir), cfg.max_eval_examples)
            submission_files["ax"] = ax.submission_files["test"]
        except DataError:
            pass  # no diagnostic file beside MNLI: nothing to predict
    labels = list(spec.labels) if spec.labels is not None else None
    return TaskData(spec.name, labels, spec.metrics, train, dev, test, submission_files)


def _load_custom(cfg: DataConfig, with_train: bool) -> TaskData:
    from hire.metrics import task_metrics

    if not 1 <= len(cfg.text_columns) <= 2:
        raise DataError(f"--data.text_columns: give one or two column names, not {cfg.text_columns}")
    if with_train and not cfg.train_file:
        raise DataError("--data.task custom needs --data.train_file (and --data.dev_file to evaluate)")
    if with_train and not cfg.dev_file:
        raise DataError("--data.task custom needs --data.dev_file: a labelled file to pick the best model")

    def read(path: str | None, option: str, labelled: bool, labels: list[str] | None,
             labels_from: str = "") -> list[Example]:
        if path is None:
            return []
        check_input_file(path, option)
        return read_table(path, cfg.text_columns, cfg.label_column, regression=cfg.regression,
                          require_label=labelled, labels=labels, labels_from=labels_from)

    # The labels are the training file's; those of the evaluation files must be among them.
    train = _head(read(cfg.train_file, "--data.train_file", True, None), cfg.max_train_examples) if with_train else []
    labels = None if cfg.regression or not train else list(infer_label_names(train))
    labels_from = str(cfg.train_file) + (f" (its first {len(train)} rows)" if cfg.max_train_examples else "")
    if labels is not None and len(labels) < 2:  # a classifier of one class learns nothing, and cannot be scored
        rows = f"{'its first' if cfg.max_train_examples else 'its'} {len(train)} row{'s' * (len(train) > 1)}"
        raise DataError(f"--data.train_file {cfg.train_file}: only one label ({labels[0]!r}) in {rows}; a classifier "
                        "needs examples of at least two labels (for real-valued labels: --data.regression true)")
    dev = _head(read(cfg.dev_file, "--data.dev_file", True, labels, labels_from), cfg.max_eval_examples)
    if cfg.regression and dev and len({example.label for example in dev}) < 2:  # correlations would be NaN
        rows = f"{'its first' if cfg.max_eval_examples else 'its'} {len(dev)} row{'s' * (len(dev) > 1)}"
        raise DataError(f"--data.dev_file {cfg.dev_file}: one score ({dev[0].label!r}) in {rows}; the Pearson and "
                        "Spearman correlations that pick the best model need at least two different scores")
    if labels is None and not cfg.regression and dev:
        labels, labels_from = list(infer_label_names(dev)), str(cfg.dev_file)
    test = _head(read(cfg.test_file, "--data.test_file", False, labels, labels_from), cfg.max_eval_examples)
    name = Path(cfg.train_file or cfg.dev_file or "custom").stem
    metrics = task_metrics(None, cfg.regression, len(labels or [None]))
    return TaskData(name, labels, metrics, train, {"dev": dev} if dev else {},
                    {"test": test} if test else {})
