"""Feature-based tagging (BERT Table 7, ``hire features``): one training epoch from the feature cache against the
same epoch with the frozen encoder run on every step (issue 46, item 8; target: the cache at least 5x faster on
the CPU).

Both epochs train the same BiLSTM tagger (2 layers, the encoder's width per direction, then a linear layer) from
the same seed, over the same batches of sentences in the same order, with Adam. From the cache, a step gathers
its sentences' float16 word features from the memory-mapped cache; with the encoder in the loop, it tokenizes its
sentences (``encode_tokens``), runs the frozen encoder (eval, no grad) and reads each word's first sub-token, as
the cache was made. The tagger's part of the step is the same code in both. The two epochs run interleaved, batch
by batch, so that other processes on a shared machine slow both alike; each first runs two untimed batches on a
throw-away tagger (kernels, caches).

Arithmetic ratio: the in-the-loop epoch's multiply-adds over the cached epoch's, counted from the shapes: the
encoder's matrix products per padded sub-token (``l (4 d^2 + 2 d f)``, plus ``2 n d`` per token for attention
scores and values) and the tagger's training (3x the forward: LSTM ``2 dirs x 4 h (in + h)`` per word and layer,
and the output layer). It bounds the speed-up a cache can give, whatever the machine.

``--encoder`` takes every spelling ``hire features`` takes (a hub name, a local folder, ``all-MiniLM-L6-v2``, a run
or saved model folder, ``random:<encoder>`` for an untrained twin), resolved the same way
(:func:`hire.lab.sources.resolve_source`).

    python benchmarks/bench_featurebased.py [--encoder all-MiniLM-L6-v2] [--sentences 2000] \\
        [--rows last,concat-last-4,last:128] [--out benchmarks/results/cpu-2core-featurebased]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

sys.path.insert(0, str(Path(__file__).parent))  # run as a script or imported by the tests: its neighbours
from bench_common import command_main, machine_info

from hire.checks import ConfigError, check_output_folder
from hire.config import check_max_length
from hire.data.conll import read_conll2003, tag_names
from hire.data.examples import DataError
from hire.data.tokens import encode_tokens
from hire.featurebased import ROWS
from hire.featurebased.rows import FeatureRow, row_layers
from hire.featurebased.tagger import IGNORE, BiLSTMTagger, gather
from hire.lab.checks import check_encoders
from hire.lab.sources import EncoderSource, encoder_config, resolve_source
from hire.lab.words import WordFeatures, cached_features, encode_words, encoder_key
from hire.model.encoder import Encoder
from hire.reporting import markdown_table


def tagger_macs(row: FeatureRow, hidden: int, num_tags: int, words: int) -> float:
    """Multiply-adds of one training epoch of the tagger (forward x 3) over ``words`` words."""
    per_word, size = 0, row.output_dim
    for _ in range(2):
        per_word += 2 * 4 * hidden * (size + hidden)
        size = 2 * hidden
    return 3.0 * words * (per_word + 2 * hidden * num_tags)


def encoder_macs(config: Any, windows: list[list[int]]) -> float:
    """Multiply-adds of the encoder's forward passes over batches of windows (each batch padded to its longest)."""
    d, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    total = 0.0
    for lengths in windows:
        n, tokens = max(lengths), len(lengths) * max(lengths)
        total += tokens * layers * (4 * d * d + 2 * d * f + 2 * n * d)
    return total


def paired_epoch(row_name: str, hidden: int, features: WordFeatures, num_tags: int, batches: list[list[int]],
                 sources: dict[str, Any], seed: int) -> dict[str, dict[str, Any]]:
    """One epoch per feature source, interleaved batch by batch (each batch's step from the cache, then the same
    step with the encoder in the loop, each on its own tagger from the same seed), so that both see the same
    machine (other processes' load) at the same moments. Per source: seconds getting features, seconds in the
    tagger's step, per-batch totals and the mean loss. Two batches of each are run first on throw-away taggers."""
    def tagger() -> tuple[BiLSTMTagger, torch.optim.Optimizer]:
        torch.manual_seed(seed)
        model = BiLSTMTagger(FeatureRow(row_name, features.hidden_size, features.num_hidden_states), num_tags,
                             hidden).train()
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(model: BiLSTMTagger, optimizer: Any, get: Any, batch: list[int]) -> tuple[float, float, float]:
        t0 = time.perf_counter()
        x, mask, y = get(batch, model.row.layers)
        t1 = time.perf_counter()
        loss = F.cross_entropy(model(x, mask).flatten(0, 1), y.flatten(), ignore_index=IGNORE)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return t1 - t0, time.perf_counter() - t1, loss.item()

    for get in sources.values():  # warm-up
        model, optimizer = tagger()
        for batch in batches[:2]:
            step(model, optimizer, get, batch)
    runs = {name: (*tagger(), get) for name, get in sources.items()}
    out: dict[str, dict[str, Any]] = {name: {"feature_seconds": 0.0, "tagger_seconds": 0.0, "batch_seconds": [],
                                             "losses": []} for name in sources}
    for batch in batches:
        for name, (model, optimizer, get) in runs.items():
            f, t, loss = step(model, optimizer, get, batch)
            record = out[name]
            record["feature_seconds"] += f
            record["tagger_seconds"] += t
            record["batch_seconds"].append(f + t)
            record["losses"].append(loss)
    for record in out.values():
        record["seconds"] = record["feature_seconds"] + record["tagger_seconds"]
        record["mean_loss"] = float(np.mean(record.pop("losses")))
    return out


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2",
                        help="as hire features takes it: hub name, local folder, all-MiniLM-L6-v2, a run / saved "
                             "model folder, or random:<encoder> (its untrained twin)")
    parser.add_argument("--sentences", type=int, default=2000, help="the first N CoNLL-2003 training sentences")
    parser.add_argument("--data_dir", default=None, help="CoNLL-2003's folder (default: hire's, as hire features)")
    parser.add_argument("--rows", default="last,concat-last-4,last:128",
                        help="rows to time, comma-separated; ROW:H gives the BiLSTM H units per direction (default: d)")
    parser.add_argument("--batch_size", type=int, default=32, help="sentences per step")
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/cpu-2core-featurebased")
    return parser.parse_args(argv)


def parse_row_specs(text: str) -> list[tuple[str, int | None]]:
    """``--rows``: ``ROW`` or ``ROW:H``, comma-separated -> (row, BiLSTM units or None for the encoder's width)."""
    specs = []
    for spec in (s.strip() for s in text.split(",")):
        row, colon, units = spec.partition(":")
        if row not in ROWS:
            raise ConfigError(f"--rows: unknown row {row!r}; choose from {', '.join(ROWS)}")
        if colon and not (units.isdigit() and int(units) >= 1):
            raise ConfigError(f"--rows {spec}: BiLSTM units must be a whole number, at least 1")
        specs.append((row, int(units) if colon else None))
    return specs


def check_options(args: argparse.Namespace) -> None:
    """Every option that needs no encoder, checked before anything is read or built."""
    for option in ("sentences", "batch_size", "max_length"):
        if getattr(args, option) < 1:
            raise ConfigError(f"--{option} {getattr(args, option)}: must be at least 1")
    args.row_specs = parse_row_specs(args.rows)
    check_output_folder(args.out, "--out")
    check_encoders([args.encoder])  # as hire features: every spelling it takes, random:<encoder> included


def load_encoder(source: EncoderSource) -> tuple[Encoder, PreTrainedTokenizerBase, str]:
    """What ``hire features`` reads from a resolved ``--encoder`` (:func:`hire.lab.sources.resolve_source`): the
    encoder (eval mode; a ``random:`` twin's weights drawn under its fixed seed, never the trained ones), its
    tokenizer for text given as words, and its cache key."""
    return source.encoder(), source.tokenizer(words=True), encoder_key(source)


def run(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    check_options(args)
    started = time.perf_counter()
    load_before = os.getloadavg()
    try:
        examples = read_conll2003(args.data_dir, "train").examples[: args.sentences]
    except DataError as err:  # the reader names the hire command's option; this script's is --data_dir
        raise DataError(str(err).replace("--data.data_dir", "--data_dir")) from None
    names = tag_names(examples)
    ids = {t: i for i, t in enumerate(names)}
    tags = [[ids[t] for t in e.tags] for e in examples]
    source = resolve_source(args.encoder)
    config = encoder_config(source)  # checked before any weights are loaded or drawn
    check_max_length(args.max_length, config, "--max_length")
    for row, _ in args.row_specs:
        try:
            row_layers(row, config.num_hidden_layers + 1)
        except ValueError as err:
            raise ConfigError(f"--rows: {err}") from None
    encoder, tokenizer, key = load_encoder(source)
    cache_dir = Path(tempfile.mkdtemp(prefix="bench-featurebased-"))
    try:
        t0 = time.perf_counter()
        cache = cached_features(examples, tokenizer, encoder, key, cache_dir, "bench", args.max_length)
        cache_seconds = time.perf_counter() - t0
        rng = np.random.default_rng(args.seed)
        order = rng.permutation(len(examples)).tolist()
        batches = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
        windows = [encode_tokens([examples[i] for i in b], tokenizer, args.max_length, None, labelled=False).lengths
                   for b in batches]

        def from_cache(batch: list[int], layers: tuple[int, ...]) -> Any:
            return gather(cache, batch, layers, tags)

        def from_encoder(batch: list[int], layers: tuple[int, ...]) -> Any:
            sub = [examples[i] for i in batch]
            offsets = np.concatenate([[0], np.cumsum([len(e.tokens) for e in sub])]).astype(np.int64)
            out = np.empty((int(offsets[-1]), encoder.num_hidden_states, encoder.hidden_size), dtype=np.float16)
            encode_words(encoder, tokenizer, sub, out, offsets, args.max_length, batch_size=len(sub), desc=None)
            return gather(WordFeatures(out, offsets, cache_dir, False, 0.0), list(range(len(sub))), layers,
                          [tags[i] for i in batch])

        words = int(cache.offsets[-1])
        records = []
        for row_name, units in args.row_specs:
            hidden = units or encoder.hidden_size
            row = FeatureRow(row_name, cache.hidden_size, cache.num_hidden_states)
            both = paired_epoch(row_name, hidden, cache, len(names), batches,
                                {"cache": from_cache, "encoder_in_loop": from_encoder}, args.seed)
            cached, loop = both["cache"], both["encoder_in_loop"]
            ratios = np.array(loop["batch_seconds"]) / np.array(cached["batch_seconds"])
            print(f"{row_name}:{hidden}: from the cache {cached['seconds']:.1f} s, encoder in the loop "
                  f"{loop['seconds']:.1f} s", file=sys.stderr)
            tag_macs = tagger_macs(row, hidden, len(names), words)
            enc_macs = encoder_macs(encoder.config, windows)
            records.append({"row": row_name, "hidden": hidden, "cache": cached, "encoder_in_loop": loop,
                            "speedup": loop["seconds"] / cached["seconds"],
                            "median_batch_speedup": float(np.median(ratios)),
                            "arithmetic_ratio": (tag_macs + enc_macs) / tag_macs,
                            "tagger_gmacs": tag_macs / 1e9, "encoder_gmacs": enc_macs / 1e9})
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    result = {"machine": machine_info(), "encoder": args.encoder, "encoder_source": source.describe(),
              "sentences": len(examples), "words": words,
              "batch_size": args.batch_size, "max_length": args.max_length, "cache_write_seconds": cache_seconds,
              "load_average_before": load_before, "load_average_after": os.getloadavg(),
              "command": " ".join(["python benchmarks/bench_featurebased.py", *argv]),
              "minutes": (time.perf_counter() - started) / 60, "records": records}
    out = Path(args.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "report.md").write_text(report(result))
    print(report(result))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """The command: 0 when the benchmark ran, 2 (and one line on stderr, nothing written) for bad input."""
    return command_main("bench_featurebased", parse_options, run, argv)


def report(r: dict[str, Any]) -> str:
    """The Markdown report, from ``results.json``'s content only."""
    m = r["machine"]
    rows = [[x["row"], str(x["hidden"]), f"{x['cache']['seconds']:.1f} ({x['cache']['feature_seconds']:.1f} + "
             f"{x['cache']['tagger_seconds']:.1f})", f"{x['encoder_in_loop']['seconds']:.1f} "
             f"({x['encoder_in_loop']['feature_seconds']:.1f} + {x['encoder_in_loop']['tagger_seconds']:.1f})",
             f"{x['speedup']:.2f}", f"{x['median_batch_speedup']:.2f}", f"{x['arithmetic_ratio']:.2f}",
             "yes" if x["speedup"] >= 5 else "**no**", "yes" if x["arithmetic_ratio"] >= 5 else "no"]
            for x in r["records"]]
    load = ", ".join(f"{v:.1f}" for v in r["load_average_before"])
    return "\n".join([
        "# Feature-based tagging: an epoch from the cache vs. the encoder in the loop", "",
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['torch_threads']} torch threads); torch {m['torch']}, "
        f"transformers {m['transformers']}; {m['date']}; load average before (1, 5, 15 min): {load}. "
        f"The run took {r['minutes']:.1f} min: `{r['command']}`.", "",
        f"{r['encoder']}; the first {r['sentences']} CoNLL-2003 training sentences ({r['words']} words), batches of "
        f"{r['batch_size']} sentences, one epoch each, the same batches and seed in both columns, run interleaved "
        "batch by batch (so that other processes' load falls on both alike). Writing the cache (every word's l + 1 "
        f"hidden states, float16) took {r['cache_write_seconds']:.1f} s, once. Seconds: total (getting features + "
        "the tagger's forward, backward and Adam step); speed-up: the epochs' ratio; median per batch: the median "
        "over batches of the two steps' ratio, which a burst of load on the machine moves least. Arithmetic ratio: "
        "(encoder forward + tagger training) multiply-adds over the tagger's, from the shapes (see the script): the "
        "most a cache can save, on any machine.", "",
        *markdown_table(["row", "BiLSTM units", "epoch from the cache, s", "encoder in the loop, s", "speed-up",
                         "median per batch", "arithmetic ratio", "≥ 5x", "5x possible by arithmetic"], rows,
                        align="llrrrrrll"), "",
        "Where the arithmetic ratio is below 5, the tagger's own training costs more than a quarter of the encoder's "
        "forward pass, and no cache can make the epoch 5x faster: the speed-up it can give grows as the tagger "
        "narrows or the encoder gets deeper (per word, the tagger costs O(d²) and the encoder O(l d²)).", ""])


if __name__ == "__main__":
    sys.exit(main())
