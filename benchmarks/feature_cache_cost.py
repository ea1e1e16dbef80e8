"""What caching an encoder's token-level hidden states would cost for feature-based training.

``--model.freeze_encoder`` trains a head on fixed hidden states by running the frozen encoder forward (no
backward, no dropout) in every step rather than caching them: on MiniLM the forward pass is about a third of a
fine-tuning step, and the cache of every token of every hidden state would hold
``tokens x (l + 1) x d x bytes`` per data set. This prints that size for the GLUE training sets.

    python benchmarks/feature_cache_cost.py [--encoder all-MiniLM-L6-v2] [--max_length 128]
"""

from __future__ import annotations

import argparse

from transformers import AutoConfig

from hire.data import read_glue_split
from hire.model import load_tokenizer
from hire.model.encoder import resolve_encoder
from hire.reporting import markdown_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2")
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--tasks", default="CoLA,SST-2,MRPC,STS-B,RTE")
    args = parser.parse_args()
    config = AutoConfig.from_pretrained(resolve_encoder(args.encoder))
    states, width = config.num_hidden_layers + 1, config.hidden_size
    tokenizer = load_tokenizer(args.encoder)
    rows = []
    for task in args.tasks.split(","):
        examples = read_glue_split(task, "train")
        first = [r.text_a for r in examples]
        second = [r.text_b or "" for r in examples] if examples[0].text_b is not None else None
        ids = tokenizer(first, second, truncation=True, max_length=args.max_length)["input_ids"]
        tokens = sum(map(len, ids))
        size = tokens * states * width / 2**30
        rows.append([f"{task} train", str(len(examples)), str(tokens), f"{tokens / len(examples):.1f}",
                     f"{2 * size:.2f} GiB", f"{4 * size:.2f} GiB"])
    print("\n".join(markdown_table([args.encoder, "examples", "tokens", "tokens/example", "cache, bf16", "cache, fp32"],
                                   rows, align="lr")))
    print(f"\n{states} hidden states x {width} per token; padding not counted (a padded cache costs more).")


if __name__ == "__main__":
    main()
