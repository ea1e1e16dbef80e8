"""Our last-layer training loop against Hugging Face ``Trainer`` on the same model, batches and precision.

Both train the same encoder with a dense-tanh-linear classifier on the first token (ours: the
``last-layer`` head; theirs: ``AutoModelForSequenceClassification``, whose pooler is that same layer)
on identical batches in identical order. Both run AdamW, gradient clipping and a linear schedule.
Timed: the optimizer steps after a warm-up, as training examples per second.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import torch
from bench_common import make_batches, reset_accelerate
from torch.utils.data import SequentialSampler
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    get_linear_schedule_with_warmup,
)

from hire import build_model
from hire.model.encoder import resolve_encoder
from hire.training import make_optimizer, training_step

WARMUP = 2


def ours(encoder: str, batches: list[dict], precision: str) -> float:
    from accelerate import Accelerator

    reset_accelerate()
    accelerator = Accelerator(mixed_precision="bf16" if precision == "bf16" else "no")
    torch.manual_seed(0)
    model = build_model(encoder, head="last-layer", num_labels=2)
    optimizer = make_optimizer([{"params": list(model.parameters()), "weight_decay": 0.1}], 2e-5, (0.9, 0.98), 1e-6)
    scheduler = get_linear_schedule_with_warmup(optimizer, 0, len(batches))
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    model.train()
    for i, batch in enumerate(batches):
        if i == WARMUP:
            start = time.perf_counter()
        training_step(model, {k: v.to(accelerator.device) for k, v in batch.items()}, accelerator, optimizer,
                      scheduler, 1.0)
    return sum(len(b["input_ids"]) for b in batches[WARMUP:]) / (time.perf_counter() - start)


class _Clock(TrainerCallback):
    def __init__(self) -> None:
        self.start = self.end = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if state.global_step == WARMUP:
            self.start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.end = time.perf_counter()


class _InOrder(Trainer):
    def _get_train_sampler(self, *args: Any, **kwargs: Any) -> SequentialSampler:
        return SequentialSampler(self.train_dataset)


def theirs(encoder: str, batches: list[dict], precision: str, tokenizer: Any) -> float:
    reset_accelerate()
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(resolve_encoder(encoder), num_labels=2)
    rows = []
    for b in batches:  # the same batches, as examples in order
        for i in range(len(b["input_ids"])):
            n = int(b["attention_mask"][i].sum())
            rows.append({"input_ids": b["input_ids"][i, :n].tolist(), "token_type_ids": [0] * n,
                         "attention_mask": [1] * n, "labels": int(b["labels"][i])})
    clock = _Clock()
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=len(batches[0]["input_ids"]),
                                 max_steps=len(batches), learning_rate=2e-5, weight_decay=0.1, adam_beta2=0.98,
                                 adam_epsilon=1e-6, max_grad_norm=1.0, bf16=precision == "bf16",
                                 use_cpu=not torch.cuda.is_available(), save_strategy="no", logging_strategy="no",
                                 report_to=[], disable_tqdm=True, dataloader_drop_last=False, seed=0)
        trainer = _InOrder(model=model, args=args, train_dataset=rows, callbacks=[clock],
                           data_collator=DataCollatorWithPadding(tokenizer))
        trainer.train()
    return sum(len(b["input_ids"]) for b in batches[WARMUP:]) / (clock.end - clock.start)


def compare_with_trainer(args: argparse.Namespace, tokenizer: Any, steps: int = 12) -> list[dict[str, Any]]:
    records = []
    for precision in args.precisions.split(","):
        for length in ("32", "128", "cola"):
            batches = make_batches(tokenizer, length, args.batch_size, steps + WARMUP, seed=1)
            hf = theirs(args.encoder, batches, precision, tokenizer)
            mine = ours(args.encoder, batches, precision)
            records.append({"precision": precision, "seq_len": length, "hire_examples_per_second": mine,
                            "trainer_examples_per_second": hf, "speedup": mine / hf})
            print(f"trainer {precision:5s} {length:>5s}: hire {mine:6.1f} ex/s, Trainer {hf:6.1f} ex/s "
                  f"(x{mine / hf:.2f})", flush=True)
    return records
