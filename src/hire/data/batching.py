"""Tokenization, dynamic padding, and batches grouped by length."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler
from transformers import PreTrainedTokenizerBase

from hire.data.examples import DataError, Example

# Keys a batch carries for bookkeeping, never passed to the model: each item's index in its split, and (token
# tasks) the positions where a word is scored.
BOOKKEEPING_KEYS = ("index", "scored")


@dataclass
class EncodedSplit(Dataset):
    """A tokenized split: one dict of token lists per example, with its label id (or value)."""

    features: list[dict[str, list[int]]]
    labels: list[int | float] | None

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item = {"index": i, **self.features[i]}
        if self.labels is not None:
            item["labels"] = self.labels[i]
        return item

    @property
    def lengths(self) -> list[int]:
        return [len(f["input_ids"]) for f in self.features]


def encode(examples: Sequence[Example], tokenizer: PreTrainedTokenizerBase, max_length: int,
           label_names: Sequence[str] | None, labelled: bool = True) -> EncodedSplit:
    """Tokenize sentences or pairs (truncated to ``max_length``, which must leave room for a token of each text
    beside the special tokens: the tokenizer would otherwise not truncate at all, or drop every word); map labels
    to ids."""
    if not examples:
        raise ValueError("no examples to encode (an empty split)")
    pairs = any(e.text_b is not None for e in examples)
    shortest = tokenizer.num_special_tokens_to_add(pair=pairs) + (2 if pairs else 1)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < shortest:
        raise ValueError(f"max_length must be an integer >= {shortest} (the special tokens and one token of "
                         f"{'each text' if pairs else 'the text'}), not {max_length!r}")
    text_a = [e.text_a for e in examples]
    text_b = [e.text_b or "" for e in examples] if pairs else None
    enc = tokenizer(text_a, text_b, truncation=True, max_length=max_length)
    keys = [k for k in ("input_ids", "token_type_ids") if k in enc]
    features = [{k: enc[k][i] for k in keys} for i in range(len(examples))]
    labels = None
    if labelled:
        if label_names is None:
            labels = [float(e.label) for e in examples]  # type: ignore[arg-type]
        else:
            ids = {name: i for i, name in enumerate(label_names)}
            unknown = sorted({str(e.label) for e in examples if str(e.label) not in ids})
            if unknown:
                raise DataError(f"labels {unknown} are not in the model's label set {list(label_names)}")
            labels = [ids[str(e.label)] for e in examples]
    return EncodedSplit(features, labels)


class Collator:
    """Pads a list of items to the batch's longest example (right padding, mask 0 at padding): input ids with the
    pad id, and each key of ``PADS`` present in the items with its own value."""

    PADS: tuple[tuple[str, int], ...] = (("token_type_ids", 0),)

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Tensor]:
        if not items:
            raise ValueError("an empty batch: no examples to pad")
        empty = [it.get("index", i) for i, it in enumerate(items) if not it["input_ids"]]
        if empty:
            raise ValueError(f"example(s) {empty[:10]} have no tokens: every example needs at least one")
        n = max(len(it["input_ids"]) for it in items)
        batch: dict[str, Tensor] = {}
        for key, pad in (("input_ids", self.pad_token_id), *self.PADS):
            if key in items[0]:
                batch[key] = torch.tensor([it[key] + [pad] * (n - len(it[key])) for it in items])
        batch["attention_mask"] = torch.tensor([[1] * len(it["input_ids"]) + [0] * (n - len(it["input_ids"]))
                                                for it in items])
        batch["index"] = torch.tensor([it["index"] for it in items])
        if "labels" in items[0] and "labels" not in batch:  # one label (or score) per example
            batch["labels"] = torch.tensor([it["labels"] for it in items])
        return batch


class LengthGroupedBatches(Sampler[list[int]]):
    """Batches of similar length, in an order fixed by (seed, epoch), so a resumed run sees the same.

    Shuffled: examples are shuffled, cut into pools of ``pool`` batches, sorted by length inside each
    pool and cut into batches, and the batches shuffled. Not shuffled (evaluation): sorted by length.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int = 0,
                 group_by_length: bool = True, pool: int = 50):
        for name, value in (("batch_size", batch_size), ("pool", pool)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
        self.lengths, self.batch_size, self.shuffle = list(lengths), batch_size, shuffle
        self.seed, self.group, self.pool, self.epoch = seed, group_by_length, pool, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        n, bs = len(self.lengths), self.batch_size
        if not self.shuffle:
            order = sorted(range(n), key=lambda i: -self.lengths[i]) if self.group else list(range(n))
            yield from (order[i : i + bs] for i in range(0, n, bs))
            return
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(n, generator=g).tolist()
        if self.group:
            size = bs * self.pool
            order = [i for s in range(0, n, size)
                     for i in sorted(order[s : s + size], key=lambda i: -self.lengths[i])]
        batches = [order[i : i + bs] for i in range(0, n, bs)]
        if self.group:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
        yield from batches
