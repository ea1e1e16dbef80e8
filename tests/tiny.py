"""Tiny random encoders saved as ordinary Hugging Face folders, for end-to-end tests (no download), and the
code that hides hire from a fresh Python process (what a user without hire installed has)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_bert_config(vocab_size: int = 99, layers: int = 2, max_positions: int = 160,
                     initializer_range: float = 0.02) -> BertConfig:
    """A random BERT 32 wide (4 heads, feed-forward 37) with ``layers`` layers: the one tiny encoder of the
    tests, saved as a folder here and built in memory by ``conftest.py`` (3 layers, a larger init range)."""
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=max_positions,
                      initializer_range=initializer_range)


def save_tiny_encoder(directory: Path, texts: Iterable[str], layers: int = 2, max_words: int = 2000,
                      dropout: float = 0.1) -> Path:
    """A random 32-wide BERT with a word-level vocabulary built from ``texts`` (the rest is [UNK])."""
    words = Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    vocab = SPECIALS + [w for w, _ in words.most_common(max_words)]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # The vocabulary path by position: transformers 5 ignores the vocab_file keyword (every word became [UNK]).
    tokenizer = BertTokenizerFast(str(directory / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    config = tiny_bert_config(len(vocab), layers)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = dropout
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# Run first in a fresh ``python -c``: every later ``import hire`` fails, as where hire is not installed.
HIDE_HIRE = """
import importlib.abc, sys
class NoHire(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "hire" or name.startswith("hire."):
            raise ModuleNotFoundError(f"No module named {name!r} (the test hides hire)", name=name)
sys.meta_path.insert(0, NoHire())
"""
