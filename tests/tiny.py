"""Tiny random encoders saved as ordinary Hugging Face folders, for end-to-end tests (no download)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_bert_config(vocab_size: int = 99, layers: int = 2) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=160)


def save_tiny_encoder(directory: Path, texts: Iterable[str], layers: int = 2, max_words: int = 2000,
                      dropout: float = 0.1) -> Path:
    """A random 32-wide BERT with a word-level vocabulary built from ``texts`` (the rest is [UNK])."""
    words = Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    vocab = SPECIALS + [w for w, _ in words.most_common(max_words)]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(directory / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    config = tiny_bert_config(len(vocab), layers)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = dropout
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
