"""Prediction over a task's splits, whatever its type: :func:`predict_task` is the one prediction pipeline.

Training's final evaluation and ``hire evaluate`` both predict a task's splits with it; the task's type
(:class:`hire.tasktype.TaskType`) tokenizes, predicts, scores and writes each split's files. :func:`model_outputs`
is the loop every type's ``predict`` runs.
"""

from __future__ import annotations

import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from hire.checks import replacing, writing
from hire.data.batching import BOOKKEEPING_KEYS, LengthGroupedBatches

if TYPE_CHECKING:
    from hire.tasktype import TaskData


def eval_loader(split: Dataset, batch_size: int, collate: Callable[[list[dict[str, Any]]], Any]) -> DataLoader:
    """Batches of similar length (longest first), in a fixed order; ``collate`` is the task type's collator."""
    sampler = LengthGroupedBatches(split.lengths, batch_size, shuffle=False)  # type: ignore[attr-defined]
    return DataLoader(split, batch_sampler=sampler, collate_fn=collate)


@torch.no_grad()
def model_outputs(model: torch.nn.Module, loader: DataLoader, accelerator: Accelerator,
                  take: Callable[[dict[str, torch.Tensor], Any], tuple[torch.Tensor, ...]],
                  desc: str = "predict") -> tuple[list[list[torch.Tensor]], float]:
    """Run the (prepared) model over a (prepared) loader in eval mode. ``take(batch, output)`` picks the tensors to
    keep from each batch (the batch still holds ``index`` and whatever the model does not read); they are gathered
    from every process, moved to the CPU in float32 at least, and returned one list per tensor, with the loop's
    wall time."""
    model.eval()
    kept: list[list[torch.Tensor]] = []
    start = time.perf_counter()
    for batch in tqdm(loader, desc=desc, leave=False, disable=not accelerator.is_local_main_process):
        inputs = {k: v for k, v in batch.items() if k not in (*BOOKKEEPING_KEYS, "labels")}
        with accelerator.autocast():
            out = model(**inputs)
        parts = tuple(t.to(torch.promote_types(t.dtype, torch.float32)) if t.is_floating_point() else t
                      for t in take(batch, out))  # fp64 stays
        parts = accelerator.gather_for_metrics(parts)
        if not kept:
            kept = [[] for _ in parts]
        for store, t in zip(kept, parts, strict=True):
            store.append(t.cpu())
    return kept, time.perf_counter() - start


@dataclass
class TaskPredictions:
    results: dict[str, dict[str, Any]]  # split -> its metrics (labelled), or its example count and submission file
    layer_weights: list[float] | None  # each hidden state's mean weight over the labelled splits' examples


def predict_task(model: torch.nn.Module, task: TaskData, splits: Sequence[str], tokenizer: PreTrainedTokenizerBase,
                 accelerator: Accelerator, *, max_length: int, batch_size: int, predictions_dir: Path,
                 submission_dir: Path, encoded: Mapping[str, Dataset] | None = None) -> TaskPredictions:
    """Predict ``splits`` of ``task`` (a prepared model): score the labelled (dev) splits, write each example's
    prediction to ``predictions_dir/<split>.jsonl`` and, for unlabelled (test) splits where the task has one, a
    leaderboard file in ``submission_dir`` with their zip. ``encoded`` holds splits already tokenized. Only the
    main process writes.
    """
    kind = task.type
    results: dict[str, dict[str, Any]] = {}
    weights: list[np.ndarray] = []
    write = accelerator.is_main_process
    submitted = False
    for split in splits:
        labelled = split in task.dev or split in task.held_out
        examples = (task.dev.get(split) or task.held_out[split]) if labelled else task.test[split]
        data = encoded[split] if encoded is not None and split in encoded else kind.encode(
            task, examples, tokenizer, max_length, labelled)
        loader = accelerator.prepare(eval_loader(data, batch_size, kind.collator(tokenizer.pad_token_id)))
        preds = kind.predict(model, loader, data, accelerator, desc=f"predict {task.name} {split}")
        if labelled:  # scored first: what a dev split chooses (a threshold) holds for its own predictions file
            results[split] = kind.score(task, preds, examples, data)
            if preds.layer_weights is not None:
                weights.append(preds.layer_weights)
        if write:
            kind.write_predictions(predictions_dir / f"{split}.jsonl", task, examples, preds)
        if labelled:
            continue
        results[split] = {"examples": len(examples)}
        if kind.has_submissions:
            file = submission_dir / task.submission_files.get(split, f"{task.name}-{split}.tsv")
            if write:
                kind.write_submission(file, task, examples, preds)
            results[split]["submission"] = str(file)
            submitted = True
    if write and submitted:
        zip_submission(submission_dir)
    mean = np.concatenate(weights).mean(0).tolist() if weights else None
    return TaskPredictions(results, mean)


def zip_submission(directory: Path, name: str = "glue_submission.zip") -> Path:
    """Zip every ``*.tsv`` of ``directory`` together, as the GLUE leaderboard takes them."""
    archive = directory / name
    with writing(archive), replacing(archive) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for tsv in sorted(directory.glob("*.tsv")):
            z.write(tsv, tsv.name)
    return archive
