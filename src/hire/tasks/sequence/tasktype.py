"""Sequence tasks: one label (or real-valued score) per sentence or sentence pair: GLUE by name, or a user's own
tables (``--data.task custom``). Read from :mod:`hire.data` (which knows neither the run's options nor the
metrics), tokenized by :func:`hire.data.batching.encode`, predicted by :class:`hire.model.HireModel`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

from hire.checks import check_input_file, replacing, writing
from hire.config import DataConfig, RunConfig
from hire.data.batching import Collator, EncodedSplit, encode
from hire.data.examples import DataError, Example
from hire.data.files import infer_label_names, read_table
from hire.data.glue import get_task, read_glue_split, task_text_columns
from hire.evaluation import model_outputs
from hire.metrics import compute_metrics, main_score, task_metrics
from hire.tasktype import Predictions, TaskData, TaskType, read_split


class SequenceTasks(TaskType):
    has_submissions = True  # GLUE's leaderboard files

    def configure(self, model: Any, tokenizer: Any, cfg: RunConfig, from_encoder: bool) -> None:
        """The text columns the model reads: the custom table's, or the GLUE task's."""
        data = cfg.data
        columns = data.text_columns if data.task == "custom" else task_text_columns(data.task)
        model.config.text_columns = list(columns)

    # -- reader --------------------------------------------------------------------------------------
    def load(self, cfg: DataConfig, with_train: bool = True) -> TaskData:
        for option, n in (("--data.max_train_examples", cfg.max_train_examples),
                          ("--data.max_eval_examples", cfg.max_eval_examples)):
            if n is not None and n < 1:  # a negative n would drop rows from the end
                raise DataError(f"{option}: must be >= 1, not {n}")
        if cfg.task.lower() == "custom":
            return _load_custom(cfg, with_train)
        spec = get_task(cfg.task)
        read = lambda split: read_glue_split(spec, split, cfg.data_dir)  # noqa: E731
        train = read("train")[:cfg.max_train_examples] if with_train and "train" in spec.splits else []
        missing: dict[str, str] = {}
        found = {(kind, s): read_split(read, s, kind, with_train, missing)
                 for kind, splits in (("dev", spec.dev_splits), ("test", spec.test_splits)) for s in splits}
        dev = {s: rows[:cfg.max_eval_examples] for (kind, s), rows in found.items()
               if kind == "dev" and rows is not None}
        test = {s: rows[:cfg.max_eval_examples] for (kind, s), rows in found.items()
                if kind == "test" and rows is not None}
        submission_files = dict(spec.submission_files)
        if spec.name == "MNLI":  # the diagnostic set is predicted with the MNLI model
            ax = get_task("AX")
            try:
                test["ax"] = read_glue_split(ax, "test", cfg.data_dir)[:cfg.max_eval_examples]
                submission_files["ax"] = ax.submission_files["test"]
            except DataError:
                pass  # no diagnostic file beside MNLI: nothing to predict
        labels = list(spec.labels) if spec.labels is not None else None
        return TaskData(spec.name, labels, spec.metrics, train, dev, test, submission_files, missing=missing)

    # -- tokenization and collation ------------------------------------------------------------------
    def encode(self, task: TaskData, examples: Sequence[Example], tokenizer: Any, max_length: int,
               labelled: bool = True) -> EncodedSplit:
        return encode(examples, tokenizer, max_length, task.label_names, labelled)

    def collator(self, pad_token_id: int) -> Collator:
        return Collator(pad_token_id)

    # -- predictions, metrics, files -----------------------------------------------------------------
    def predict(self, model: Any, loader: DataLoader, split: Any, accelerator: Accelerator,
                desc: str = "predict") -> Predictions:
        return predict(model, loader, accelerator, desc)

    def score(self, task: TaskData, preds: Predictions, examples: Sequence[Example],
              split: EncodedSplit) -> dict[str, float]:
        """The task's metrics on a labelled split, plus ``score``: their mean (the GLUE convention)."""
        assert split.labels is not None
        predicted = preds.logits if task.regression else preds.logits.argmax(-1)
        result = compute_metrics(task.metrics, predicted.tolist(), split.labels)
        result["score"] = main_score(result)
        return result

    def write_predictions(self, path: Path, task: TaskData, examples: Sequence[Example], preds: Predictions) -> None:
        write_predictions(path, examples, preds, task.label_names)

    def write_submission(self, path: Path, task: TaskData, examples: Sequence[Example], preds: Predictions) -> None:
        """A GLUE leaderboard file: ``index<TAB>prediction``, labels spelled as in the training files."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with writing(path), replacing(path) as tmp, tmp.open("w") as f:
            f.write("index\tprediction\n")
            for i, ex in enumerate(examples):
                if task.label_names is None:  # STS-B: scores live in [0, 5]
                    value = f"{min(5.0, max(0.0, float(preds.logits[i]))):.3f}"
                else:
                    value = task.label_names[int(preds.logits[i].argmax())]
                f.write(f"{ex.guid}\t{value}\n")


def predict(model: Any, loader: DataLoader, accelerator: Accelerator, desc: str = "predict") -> Predictions:
    """Run a sequence model over a (prepared) loader; logits and layer weights in the split's example order."""
    def take(batch: dict[str, torch.Tensor], out: Any) -> tuple[torch.Tensor, ...]:
        lw = out.layer_weights if out.layer_weights is not None else out.logits.new_zeros(len(batch["index"]), 0)
        return batch["index"], out.logits, lw

    (indices, logits, weights), seconds = model_outputs(model, loader, accelerator, take, desc)
    order = torch.cat(indices).argsort()
    q = torch.cat(logits)[order].numpy()
    lw = torch.cat(weights)[order].numpy()
    return Predictions(q, lw if lw.shape[1] else None, seconds)


def write_predictions(path: Path, examples: Sequence[Example], preds: Predictions,
                      label_names: Sequence[str] | None) -> None:
    """One JSON line per example: id, texts, gold label, prediction, probabilities, layer weights."""
    path.parent.mkdir(parents=True, exist_ok=True)
    regression = label_names is None
    probs = None if regression else torch.softmax(torch.from_numpy(preds.logits), -1).numpy()
    with writing(path), replacing(path) as tmp, tmp.open("w") as f:
        for i, ex in enumerate(examples):
            row = {"guid": ex.guid, "text_a": ex.text_a, "text_b": ex.text_b, "label": ex.label}
            if regression:
                row["prediction"] = float(preds.logits[i])
            else:
                row["prediction"] = label_names[int(preds.logits[i].argmax())]  # type: ignore[index]
                row["probabilities"] = dict(zip(label_names, map(float, probs[i]), strict=True))  # type: ignore
            if preds.layer_weights is not None:
                row["layer_weights"] = [round(float(w), 6) for w in preds.layer_weights[i]]
            f.write(json.dumps(row) + "\n")


def _load_custom(cfg: DataConfig, with_train: bool) -> TaskData:
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
    train = read(cfg.train_file, "--data.train_file", True, None)[:cfg.max_train_examples] if with_train else []
    labels = None if cfg.regression or not train else list(infer_label_names(train))
    labels_from = str(cfg.train_file) + (f" (its first {len(train)} rows)" if cfg.max_train_examples else "")
    if labels is not None and len(labels) < 2:  # a classifier of one class learns nothing, and cannot be scored
        rows = f"{'its first' if cfg.max_train_examples else 'its'} {len(train)} row{'s' * (len(train) > 1)}"
        raise DataError(f"--data.train_file {cfg.train_file}: only one label ({labels[0]!r}) in {rows}; a classifier "
                        "needs examples of at least two labels (for real-valued labels: --data.regression true)")
    dev = read(cfg.dev_file, "--data.dev_file", True, labels, labels_from)[:cfg.max_eval_examples]
    if cfg.regression and dev and len({example.label for example in dev}) < 2:  # correlations would be NaN
        rows = f"{'its first' if cfg.max_eval_examples else 'its'} {len(dev)} row{'s' * (len(dev) > 1)}"
        raise DataError(f"--data.dev_file {cfg.dev_file}: one score ({dev[0].label!r}) in {rows}; the Pearson and "
                        "Spearman correlations that pick the best model need at least two different scores")
    if labels is None and not cfg.regression and dev:
        labels, labels_from = list(infer_label_names(dev)), str(cfg.dev_file)
    test = read(cfg.test_file, "--data.test_file", False, labels, labels_from)[:cfg.max_eval_examples]
    name = "custom"  # not the training file's name ("train" for train.csv): the task is the user's
    metrics = task_metrics(None, cfg.regression, len(labels or [None]))
    return TaskData(name, labels, metrics, train, {"dev": dev} if dev else {},
                    {"test": test} if test else {})


SEQUENCE = SequenceTasks()
