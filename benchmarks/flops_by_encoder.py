"""The arithmetic of a training step, by encoder and head: multiply-adds counted by ``torch.utils.flop_counter``.

    python benchmarks/flops_by_encoder.py                  # all-MiniLM-L6-v2 and all-mpnet-base-v2, 128 tokens
    python benchmarks/flops_by_encoder.py --encoders all-MiniLM-L6-v2,roberta-base --heads hire --lengths 32,128

Nothing is timed and no pre-trained weight is read: each model is built from its encoder's configuration with
random weights (the count depends on shapes alone) and counted on one batch of ``--count_batch`` examples whose
tokens are all real, as in ``bench_heads.py``'s fixed lengths. Every part's arithmetic is linear in the batch
size, so the counts per example, and their ratios, are those of any batch size (batch 32 included: the
default encoder's counts here equal those in ``benchmarks/results/cpu-2core``). Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from transformers import AutoConfig

sys.path.insert(0, str(Path(__file__).parent))
from bench_heads import count_flops

from hire import build_model
from hire.model.encoder import resolve_encoder
from hire.reporting import markdown_table


def count(encoder: str, heads: list[str], length: int, batch: int) -> list[dict]:
    config = AutoConfig.from_pretrained(resolve_encoder(encoder))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, config.vocab_size, (batch, length), generator=g)  # (B, n), every token real
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.zeros(batch, dtype=torch.long)}
    records = []
    for head in heads:
        torch.manual_seed(0)
        model = build_model(config, head=head, num_labels=2)
        params = sum(p.numel() for p in model.parameters())
        records.append({"encoder": encoder, "layers": config.num_hidden_layers, "hidden": config.hidden_size,
                        "head": head, "tokens": length, "parameters": params, **count_flops(model, inputs)})
    base = next(r for r in records if r["head"] == "last-layer")["macs_train_step"]
    for r in records:
        r["arithmetic_ratio"] = r["macs_train_step"] / base
    return records


def table(records: list[dict]) -> str:
    rows = []
    for r in records:
        head_fwd = r["macs_extractor"] + r["macs_fusion"] + r["macs_head_other"] + r["macs_output"]
        rows.append([r["encoder"], f"{r['layers']}, {r['hidden']}", r["head"], str(r["tokens"]),
                     f"{r['parameters'] / 1e6:.1f}M", f"{r['macs_encoder'] / 1e9:.2f} G", f"{head_fwd / 1e9:.2f} G",
                     f"{r['macs_train_step'] / 1e9:.2f} G", f"{r['arithmetic_ratio']:.2f}"])
    return "\n".join(markdown_table(["encoder", "l, d", "head", "tokens", "parameters", "encoder fwd", "head fwd",
                                     "training step", "ratio"], rows, align="lllr"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoders", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    parser.add_argument("--heads", default="last-layer,hire,hire-lite", help="comma-separated; last-layer is added")
    parser.add_argument("--lengths", default="128", help="comma-separated token counts")
    parser.add_argument("--count_batch", type=int, default=2, help="examples in the counted batch")
    parser.add_argument("--json", help="also write the records to this file")
    args = parser.parse_args()
    heads = ["last-layer", *[h for h in args.heads.split(",") if h != "last-layer"]]
    records = [r for encoder in args.encoders.split(",") for length in map(int, args.lengths.split(","))
               for r in count(encoder, heads, length, args.count_batch)]
    print("Multiply-adds per example (a training step is forward + backward); ratio: to the last-layer step.\n")
    print(table(records))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
