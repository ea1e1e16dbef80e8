"""What training and evaluation ask of a multiple-choice task (:data:`CHOICES`): read CODAH, DREAM, SWAG or JSON
lines; encode each (context, choice) pair; a batch of questions is padded to its most choices (``choice_mask``)
and its longest pair, and neither padding changes a score (:class:`hire.model.HireForMultipleChoice`); accuracy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

from hire.checks import check_input_file, replacing, writing
from hire.evaluation import model_outputs
from hire.tasks.choice import CHOICE_TASKS
from hire.tasks.choice.data import ChoiceExample, read_choice_file, read_named
from hire.tasktype import DataConfig, Predictions, TaskData, TaskType, read_split


@dataclass
class ChoiceSplit(Dataset):
    """A tokenized split: one item per question, its choices' token ids (each pair cut to ``max_length``)."""

    features: list[dict[str, Any]]
    labels: list[int] | None

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item = {"index": i, **self.features[i]}
        if self.labels is not None:
            item["labels"] = self.labels[i]
        return item

    @property
    def lengths(self) -> list[int]:
        return [max(map(len, f["input_ids"])) * len(f["input_ids"]) for f in self.features]


def encode_choices(examples: Sequence[ChoiceExample], tokenizer: Any, max_length: int,
                   labelled: bool = True) -> ChoiceSplit:
    """Each question's (context, question + choice) pairs, cut to ``max_length`` tokens (the longer text first)."""
    if not examples:
        raise ValueError("no examples to encode (an empty split)")
    firsts = [ex.context or ex.question for ex in examples for _ in ex.choices]
    seconds = [ex.second(c) if ex.context else c for ex in examples for c in ex.choices]
    enc = tokenizer(firsts, seconds, truncation=True, max_length=max_length)
    keys = [k for k in ("input_ids", "token_type_ids") if k in enc]
    features, at = [], 0
    for ex in examples:
        n = len(ex.choices)
        features.append({k: [enc[k][j] for j in range(at, at + n)] for k in keys})
        at += n
    labels = [int(ex.label) for ex in examples] if labelled else None  # type: ignore[arg-type]
    if labels is not None and any(ex.label is None for ex in examples):
        raise ValueError("a labelled split needs a label on every question")
    return ChoiceSplit(features, labels)


class ChoiceCollator:
    """Pads a list of questions to (questions, most choices, longest pair): token ids with the pad id, the attention
    mask and ``choice_mask`` 0 at padding; a padded choice is one pad token (never encoded by the model)."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        C = max(len(it["input_ids"]) for it in items)
        n = max(len(ids) for it in items for ids in it["input_ids"])
        B = len(items)
        ids = torch.full((B, C, n), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros(B, C, n, dtype=torch.long)
        types = torch.zeros(B, C, n, dtype=torch.long)
        choice_mask = torch.zeros(B, C, dtype=torch.long)
        for b, it in enumerate(items):
            for c, row in enumerate(it["input_ids"]):
                ids[b, c, :len(row)] = torch.tensor(row)
                mask[b, c, :len(row)] = 1
                if "token_type_ids" in it:
                    types[b, c, :len(row)] = torch.tensor(it["token_type_ids"][c])
                choice_mask[b, c] = 1
        batch = {"input_ids": ids, "attention_mask": mask, "choice_mask": choice_mask,
                 "index": torch.tensor([it["index"] for it in items])}
        if "token_type_ids" in items[0]:
            batch["token_type_ids"] = types
        if "labels" in items[0]:
            batch["labels"] = torch.tensor([it["labels"] for it in items])
        return batch


class ChoiceTasks(TaskType):
    """Multiple choice (see the module docstring)."""

    def load(self, cfg: DataConfig, with_train: bool = True) -> TaskData:
        task = cfg.task.lower()
        missing: dict[str, str] = {}
        held = test = None
        if task in CHOICE_TASKS:
            name = CHOICE_TASKS[task]
            read = lambda split: read_named(task, cfg.data_dir, split)  # noqa: E731
            train = read("train") if with_train else []
            dev = read_split(read, "dev", "dev", with_train, missing)
        else:
            name = "custom"

            def read_file(path: str | None, option: str, require: bool = True) -> list[ChoiceExample] | None:
                if path is None:
                    return None
                check_input_file(path, option)
                return read_choice_file(path, option, require_labels=require)

            train = read_file(cfg.train_file, "--data.train_file") if with_train or cfg.train_file else []
            dev = read_file(cfg.dev_file, "--data.dev_file")
            given = read_file(cfg.test_file, "--data.test_file", require=False)
            labelled = given is not None and all(ex.label is not None for ex in given)
            held, test = (given, None) if labelled else (None, given)
        return TaskData(name, None, ("accuracy",), (train or [])[:cfg.max_train_examples],
                        {"dev": dev[:cfg.max_eval_examples]} if dev else {},
                        {"test": test[:cfg.max_eval_examples]} if test else {},
                        held_out={"test": held[:cfg.max_eval_examples]} if held else {}, missing=missing)

    def encode(self, task: TaskData, examples: Sequence[ChoiceExample], tokenizer: Any, max_length: int,
               labelled: bool = True) -> ChoiceSplit:
        return encode_choices(examples, tokenizer, max_length, labelled and all(e.label is not None for e in examples))

    def collator(self, pad_token_id: int) -> ChoiceCollator:
        return ChoiceCollator(pad_token_id)

    def predict(self, model: Any, loader: DataLoader, split: ChoiceSplit, accelerator: Accelerator,
                desc: str = "predict") -> Predictions:
        """Each question's choice scores (its own number of choices), and its layer weights averaged over its
        choices."""
        def take(batch: dict[str, torch.Tensor], out: Any) -> tuple[torch.Tensor, ...]:
            q = accelerator.pad_across_processes(out.logits, dim=1, pad_index=-1e30)
            lw = out.layer_weights
            lw = lw if lw is not None else q.new_zeros(len(batch["index"]), q.shape[1], 0)
            return batch["index"], q, accelerator.pad_across_processes(lw, dim=1)

        (indices, logits, weights), seconds = model_outputs(model, loader, accelerator, take, desc)
        scores: list[np.ndarray | None] = [None] * len(split)
        layer: list[np.ndarray | None] = [None] * len(split)
        for index, q, w in zip(indices, logits, weights, strict=True):
            for row, i in enumerate(index.tolist()):
                n = len(split.features[i]["input_ids"])
                scores[i] = q[row, :n].numpy()
                layer[i] = w[row, :n].mean(0).numpy() if w.shape[-1] else None
        weights_out = np.stack(layer) if layer and layer[0] is not None else None  # type: ignore[arg-type]
        return Predictions(scores, weights_out, seconds)

    def score(self, task: TaskData, preds: Predictions, examples: Sequence[ChoiceExample],
              split: ChoiceSplit) -> dict[str, float]:
        """Accuracy (``score``) over every question."""
        right = [int(np.argmax(s)) == ex.label for s, ex in zip(preds.logits, examples, strict=True)]
        accuracy = float(np.mean(right))
        return {"accuracy": accuracy, "questions": float(len(examples)), "score": accuracy}

    def write_predictions(self, path: Path, task: TaskData, examples: Sequence[ChoiceExample],
                          preds: Predictions) -> None:
        """One JSON line per question: id, context, question, choices, gold label, predicted index, probabilities,
        layer weights."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with writing(path), replacing(path) as tmp, tmp.open("w") as f:
            for i, ex in enumerate(examples):
                s = np.asarray(preds.logits[i], dtype=np.float64)
                probs = np.exp(s - s.max())
                probs /= probs.sum()
                row: dict[str, Any] = {"id": ex.qid, "context": ex.context, "question": ex.question,
                                       "choices": list(ex.choices), "label": ex.label,
                                       "prediction": int(np.argmax(s)), "probabilities": [round(float(p), 6)
                                                                                          for p in probs]}
                if preds.layer_weights is not None:
                    row["layer_weights"] = [round(float(w), 6) for w in preds.layer_weights[i]]
                f.write(json.dumps(row) + "\n")


CHOICES = ChoiceTasks()

__all__ = ["CHOICES", "ChoiceCollator", "ChoiceSplit", "ChoiceTasks", "encode_choices"]
