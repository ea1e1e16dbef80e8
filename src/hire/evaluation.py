"""Prediction over a split, scores, per-example outputs and GLUE submission files.

:func:`predict_task` is the one prediction pipeline: training's final evaluation and ``hire evaluate`` both
predict a task's splits with it, score the labelled ones and write the same files.
"""

from __future__ import annotations

import json
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from hire.checks import writing
from hire.data.batching import Collator, EncodedSplit, LengthGroupedBatches, encode
from hire.data.examples import Example
from hire.metrics import compute_metrics, main_score
from hire.model import HireModel
from hire.runs import replacing
from hire.tasks import TaskData


@dataclass
class Predictions:
    logits: np.ndarray  # (N, m), or (N,) for regression; in the split's example order
    layer_weights: np.ndarray | None  # (N, l + 1)
    seconds: float  # wall time of the prediction loop

    def labels(self, regression: bool) -> np.ndarray:
        return self.logits if regression else self.logits.argmax(-1)

    @property
    def examples_per_second(self) -> float:
        return len(self.logits) / max(self.seconds, 1e-9)


def eval_loader(split: EncodedSplit, batch_size: int, pad_token_id: int) -> DataLoader:
    sampler = LengthGroupedBatches(split.lengths, batch_size, shuffle=False)
    return DataLoader(split, batch_sampler=sampler, collate_fn=Collator(pad_token_id))


@torch.no_grad()
def predict(model: HireModel | torch.nn.Module, loader: DataLoader, accelerator: Accelerator,
            desc: str = "predict") -> Predictions:
    """Run the model over a (prepared) loader; outputs come back in the split's original order."""
    model.eval()
    indices, logits, weights = [], [], []
    start = time.perf_counter()
    for batch in tqdm(loader, desc=desc, leave=False, disable=not accelerator.is_local_main_process):
        index = batch.pop("index")
        batch.pop("labels", None)
        with accelerator.autocast():
            out = model(**batch)
        lw = out.layer_weights if out.layer_weights is not None else out.logits.new_zeros(len(index), 0)
        q, lw = (t.to(torch.promote_types(t.dtype, torch.float32)) for t in (out.logits, lw))  # fp64 stays
        index, q, lw = accelerator.gather_for_metrics((index, q, lw))
        indices.append(index.cpu())
        logits.append(q.cpu())
        weights.append(lw.cpu())
    seconds = time.perf_counter() - start
    order = torch.cat(indices).argsort()
    q = torch.cat(logits)[order].numpy()
    lw = torch.cat(weights)[order].numpy()
    return Predictions(q, lw if lw.shape[1] else None, seconds)


@dataclass
class TaskPredictions:
    results: dict[str, dict[str, Any]]  # split -> its metrics (labelled), or its example count and submission file
    layer_weights: list[float] | None  # each hidden state's mean weight over the labelled splits' examples


def predict_task(model: torch.nn.Module, task: TaskData, splits: Sequence[str], tokenizer: PreTrainedTokenizerBase,
                 accelerator: Accelerator, *, max_length: int, batch_size: int, predictions_dir: Path,
                 submission_dir: Path, encoded: Mapping[str, EncodedSplit] | None = None) -> TaskPredictions:
    """Predict ``splits`` of ``task`` (a prepared model): score the labelled (dev) splits, write each example's
    prediction to ``predictions_dir/<split>.jsonl`` and, for unlabelled (test) splits, a GLUE submission file in
    ``submission_dir`` with their zip. ``encoded`` holds splits already tokenized. Only the main process writes.
    """
    results: dict[str, dict[str, Any]] = {}
    weights: list[np.ndarray] = []
    write = accelerator.is_main_process
    for split in splits:
        labelled = split in task.dev
        examples = task.dev[split] if labelled else task.test[split]
        data = encoded[split] if encoded is not None and split in encoded else encode(
            examples, tokenizer, max_length, task.label_names, labelled)
        loader = accelerator.prepare(eval_loader(data, batch_size, tokenizer.pad_token_id))
        preds = predict(model, loader, accelerator, desc=f"predict {task.name} {split}")
        if write:
            write_predictions(predictions_dir / f"{split}.jsonl", examples, preds, task.label_names)
        if labelled:
            results[split] = score(task.metrics, preds, data, task.regression)
            if preds.layer_weights is not None:
                weights.append(preds.layer_weights)
        else:
            file = submission_dir / task.submission_files.get(split, f"{task.name}-{split}.tsv")
            if write:
                write_submission(file, examples, preds, task.label_names)
            results[split] = {"examples": len(examples), "submission": str(file)}
    if write and any(split not in task.dev for split in splits):
        zip_submission(submission_dir)
    mean = np.concatenate(weights).mean(0).tolist() if weights else None
    return TaskPredictions(results, mean)


def score(metrics: Sequence[str], preds: Predictions, split: EncodedSplit, regression: bool) -> dict[str, float]:
    """The task's metrics on a labelled split, plus ``score``: their mean (the GLUE convention)."""
    assert split.labels is not None
    result = compute_metrics(metrics, preds.labels(regression).tolist(), split.labels)
    result["score"] = main_score(result)
    return result


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


def write_submission(path: Path, examples: Sequence[Example], preds: Predictions,
                     label_names: Sequence[str] | None) -> None:
    """A GLUE leaderboard file: ``index<TAB>prediction``, labels spelled as in the training files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with writing(path), replacing(path) as tmp, tmp.open("w") as f:
        f.write("index\tprediction\n")
        for i, ex in enumerate(examples):
            if label_names is None:  # STS-B: scores live in [0, 5]
                value = f"{min(5.0, max(0.0, float(preds.logits[i]))):.3f}"
            else:
                value = label_names[int(preds.logits[i].argmax())]
            f.write(f"{ex.guid}\t{value}\n")


def zip_submission(directory: Path, name: str = "glue_submission.zip") -> Path:
    """Zip every ``*.tsv`` of ``directory`` together, as the leaderboard takes them."""
    archive = directory / name
    with writing(archive), replacing(archive) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for tsv in sorted(directory.glob("*.tsv")):
            z.write(tsv, tsv.name)
    return archive
