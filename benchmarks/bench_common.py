"""What the benchmark scripts share: the machine's description and the batches they time."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from hire.checks import ConfigError
from hire.data import read_glue_split
from hire.data.batching import Collator, LengthGroupedBatches, encode
from hire.data.examples import DataError
from hire.hardware import machine


def machine_info() -> dict[str, Any]:
    """hire's own description of the machine (``hire.runs.machine``, as run records have it), dated."""
    m = machine()
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": m["cpu"],
            "cores": m["cpu_count"],
            "fast_bf16_cpu": m["fast_bf16_cpu"], "torch_threads": m["torch_threads"], "torch": m["torch"],
            "transformers": m["transformers"], "python": m["python"]}
    if "gpu" in m:
        info["gpu"] = m["gpu"]
    return info


def make_batches(tokenizer: Any, length: str, batch_size: int, n: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """``n`` training batches: random tokens at a fixed length (every token real), or the first
    length-grouped batches of a real GLUE task's training set ("cola", "rte")."""
    g = torch.Generator().manual_seed(seed)
    if length.isdigit():
        t = int(length)
        ids = torch.randint(1000, tokenizer.vocab_size - 1, (n, batch_size, t), generator=g)
        ids[:, :, 0], ids[:, :, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
        labels = torch.randint(0, 2, (n, batch_size), generator=g)
        return [{"input_ids": ids[i], "attention_mask": torch.ones_like(ids[i]),
                 "token_type_ids": torch.zeros_like(ids[i]), "labels": labels[i]} for i in range(n)]
    task = {"cola": "CoLA", "rte": "RTE", "mrpc": "MRPC", "sst2": "SST-2"}[length.lower()]
    examples = read_glue_split(task, "train")
    split = encode(examples, tokenizer, 128, ["0", "1"] if task != "RTE" else ["entailment", "not_entailment"])
    sampler = LengthGroupedBatches(split.lengths, batch_size, shuffle=True, seed=seed)
    collate = Collator(tokenizer.pad_token_id)
    batches = []
    for indices in sampler:
        batch = collate([split[i] for i in indices])
        batch.pop("index")
        batches.append(batch)
        if len(batches) == n:
            break
    return batches


def reset_accelerate() -> None:
    """Accelerate keeps one global state per process; reset it before an Accelerator of other settings."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def command_main(name: str, parse_options: Callable[[list[str]], argparse.Namespace],
                 run: Callable[[argparse.Namespace, list[str]], Any], argv: Sequence[str] | None) -> int:
    """A benchmark script's command: 0 when it ran, 2 (and one line on stderr naming the fault, nothing written)
    for bad input; ``HIRE_DEBUG=1`` shows the traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_options(argv)
    try:
        run(args, argv)
    except (ConfigError, DataError, OSError, ValueError) as err:
        if os.environ.get("HIRE_DEBUG"):
            raise
        print(f"{name}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0
