"""A BiLSTM tagger trained on cached word features (BERT §5.3): the encoder never runs here.

The paper feeds each feature set to "a randomly initialized two-layer 768-dimensional BiLSTM before the
classification layer" for BERT-base, whose width d is 768; here the BiLSTM has ``d`` units per direction by
default (scaled to the encoder: 384 for MiniLM), then a linear layer over the tags. Trained with cross-entropy
over words (padding masked), Adam, batches of sentences, early stopping on the dev score (strict IOB2 entity F1
with seqeval, :func:`hire.metrics.entity_scores`; token accuracy for plain tags such as parts of speech).
Sequences are packed (``pack_padded_sequence``), so padding never changes a word's logits.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from tqdm.auto import tqdm

from hire.data.examples import TokenExample
from hire.featurebased.rows import FeatureRow
from hire.lab.words import WordFeatures
from hire.metrics import entity_scores, token_accuracy

IGNORE = -100


@dataclass
class TaggerSettings:
    """How the tagger trains."""

    epochs: int = 4  # at most; early stopping may end sooner
    lr: float = 1e-3  # Adam
    batch_size: int = 32  # sentences
    patience: int = 2  # epochs without a better dev score before stopping
    dropout: float = 0.1  # on the BiLSTM's input and output (and between its layers)
    hidden_size: int | None = None  # per direction; None: the encoder's width d
    seed: int = 1
    device: str = "cpu"


class BiLSTMTagger(nn.Module):
    """row -> dropout -> 2-layer BiLSTM (``hidden_size`` per direction) -> dropout -> linear over tags."""

    def __init__(self, row: FeatureRow, num_tags: int, hidden_size: int, dropout: float = 0.1):
        super().__init__()
        self.row = row
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(row.output_dim, hidden_size, num_layers=2, bidirectional=True, batch_first=True,
                            dropout=dropout)
        self.output = nn.Linear(2 * hidden_size, num_tags)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Logits ``(B, W, tags)`` for features ``(B, W, k, d)`` of the row's layers and the word mask ``(B, W)``."""
        h = self.dropout(self.row(x, mask))  # (B, W, d_row)
        packed = pack_padded_sequence(h, mask.sum(-1).cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])  # (B, W, 2h), 0 at padding
        return self.output(self.dropout(out))  # (B, W, tags)


def gather(features: WordFeatures, sentences: Sequence[int], layers: Sequence[int],
           tags: Sequence[Sequence[int]] | None = None) -> tuple[Tensor, Tensor, Tensor | None]:
    """A right-padded batch of sentences: features ``(B, W, k, d)`` (float32) of hidden states ``layers`` (a
    contiguous range), mask ``(B, W)`` and tag ids ``(B, W)`` (-100 at padding) when ``tags`` are given."""
    lo, hi = layers[0], layers[-1] + 1
    lengths = [int(features.offsets[i + 1] - features.offsets[i]) for i in sentences]
    x = np.zeros((len(sentences), max(lengths), hi - lo, features.hidden_size), dtype=np.float32)
    mask = torch.zeros(len(sentences), max(lengths), dtype=torch.bool)
    y = torch.full((len(sentences), max(lengths)), IGNORE, dtype=torch.long) if tags is not None else None
    for b, (i, n) in enumerate(zip(sentences, lengths, strict=True)):
        x[b, :n] = features.sentence(i)[:, lo:hi]
        mask[b, :n] = True
        if y is not None:
            y[b, :n] = torch.as_tensor(tags[i])
    return torch.from_numpy(x), mask, y


def is_iob2(tags: Sequence[str]) -> bool:
    return all(tag == "O" or (len(tag) > 2 and tag[:2] in ("B-", "I-")) for tag in tags)


def score(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], entities: bool) -> dict[str, float]:
    return entity_scores(gold, pred) if entities else {"token_accuracy": token_accuracy(gold, pred)}


@torch.no_grad()
def predict(model: BiLSTMTagger, features: WordFeatures, tag_names: Sequence[str], batch_size: int = 64,
            device: str = "cpu") -> list[list[str]]:
    """Each sentence's predicted tags (batches of similar length: little padding, none of it read)."""
    model.eval()
    order = sorted(range(len(features)), key=lambda i: int(features.offsets[i + 1] - features.offsets[i]))
    out: list[list[str]] = [[] for _ in order]
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        x, mask, _ = gather(features, batch, model.row.layers)
        ids = model(x.to(device), mask.to(device)).argmax(-1).cpu()
        for b, i in enumerate(batch):
            out[i] = [tag_names[t] for t in ids[b, : int(mask[b].sum())].tolist()]
    return out


def _write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def train_tagger(row: str, train: tuple[WordFeatures, Sequence[TokenExample]],
                 dev: tuple[WordFeatures, Sequence[TokenExample]],
                 test: tuple[WordFeatures, Sequence[TokenExample]] | None, tag_names: Sequence[str],
                 settings: TaggerSettings, output_dir: str | Path, config: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """Train the tagger on one row's features and write its run folder; returns ``metrics.json``'s content.

    The folder: ``config.json`` (``config`` and the settings), ``epochs.jsonl`` (one line per epoch: train loss,
    dev scores, seconds), ``metrics.json`` (the best epoch's dev and test scores, times, the machine; written
    last) and ``predictions/dev.jsonl`` / ``predictions/test.jsonl``, laid out as ``hire train`` writes them
    (per sentence: ``guid``, ``tokens``, gold ``tags``, ``prediction``), so that one script reads both.
    """
    from hire.hardware import machine

    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").unlink(missing_ok=True)
    train_features, train_examples = train
    entities = is_iob2(tag_names)
    metric = "f1" if entities else "token_accuracy"
    ids = {tag: i for i, tag in enumerate(tag_names)}
    train_tags = [[ids[t] for t in e.tags or ()] for e in train_examples]
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    feature_row = FeatureRow(row, train_features.hidden_size, train_features.num_hidden_states, settings.dropout)
    model = BiLSTMTagger(feature_row, len(tag_names), settings.hidden_size or train_features.hidden_size,
                         settings.dropout).to(settings.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    (folder / "config.json").write_text(json.dumps({**(config or {}), "row": row, "layers": list(feature_row.layers),
                                                    "tags": list(tag_names), "settings": asdict(settings)},
                                                   indent=2) + "\n")
    epochs: list[dict[str, Any]] = []
    best, best_state, waited, train_seconds = -1.0, None, 0, 0.0
    for epoch in range(1, settings.epochs + 1):
        model.train()
        start, losses = time.perf_counter(), []
        order = rng.permutation(len(train_features)).tolist()
        for b in tqdm(range(0, len(order), settings.batch_size), desc=f"{row} epoch {epoch}", unit="batch",
                      dynamic_ncols=True, leave=False):
            x, mask, y = gather(train_features, order[b:b + settings.batch_size], feature_row.layers, train_tags)
            logits = model(x.to(settings.device), mask.to(settings.device))
            loss = F.cross_entropy(logits.flatten(0, 1), y.to(settings.device).flatten(), ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        seconds = time.perf_counter() - start
        train_seconds += seconds
        dev_scores = score([e.tags for e in dev[1]], predict(model, dev[0], tag_names, device=settings.device),
                           entities)
        epochs.append({"epoch": epoch, "train_loss": float(np.mean(losses)), "train_seconds": round(seconds, 3),
                       "dev": dev_scores})
        _write_jsonl(folder / "epochs.jsonl", epochs)
        if dev_scores[metric] > best:
            best, best_state, waited = dev_scores[metric], copy.deepcopy(model.state_dict()), 0
        else:
            waited += 1
            if waited >= settings.patience:
                break
    assert best_state is not None
    model.load_state_dict(best_state)
    best_epoch = max(epochs, key=lambda e: e["dev"][metric])["epoch"]  # the first of the best
    metrics: dict[str, Any] = {"row": row, "metric": metric, "best_epoch": best_epoch, "epochs_run": len(epochs)}
    for name, split in (("dev", dev), ("test", test)):
        if split is None:
            continue
        predicted = predict(model, split[0], tag_names, device=settings.device)
        metrics[name] = score([e.tags for e in split[1]], predicted, entities)
        (folder / "predictions").mkdir(exist_ok=True)
        _write_jsonl(folder / "predictions" / f"{name}.jsonl",
                     [{"guid": e.guid, "tokens": list(e.tokens), "tags": list(e.tags) if e.tags is not None else None,
                       "prediction": p} for e, p in zip(split[1], predicted, strict=True)])
    metrics.update(train_seconds=round(train_seconds, 3), parameters=sum(p.numel() for p in model.parameters()),
                   machine=machine(), finished=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


__all__ = ["BiLSTMTagger", "TaggerSettings", "gather", "predict", "score", "train_tagger"]
