"""Prediction over a split, scores, per-example outputs and GLUE submission files."""

from __future__ import annotations

import json
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from hire.checks import writing
from hire.data.batching import Collator, EncodedSplit, LengthGroupedBatches
from hire.data.examples import Example
from hire.metrics import compute_metrics, main_score
from hire.model import HireModel


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
        index, q, lw = accelerator.gather_for_metrics((index, out.logits.float(), lw.float()))
        indices.append(index.cpu())
        logits.append(q.cpu())
        weights.append(lw.cpu())
    seconds = time.perf_counter() - start
    order = torch.cat(indices).argsort()
    q = torch.cat(logits)[order].numpy()
    lw = torch.cat(weights)[order].numpy()
    return Predictions(q, lw if lw.shape[1] else None, seconds)


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
    with writing(path), path.open("w") as f:
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
    with writing(path), path.open("w") as f:
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
    with writing(archive), zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for tsv in sorted(directory.glob("*.tsv")):
            z.write(tsv, tsv.name)
    return archive
