"""The tokenizer of an encoder or a saved model (:func:`load_tokenizer`), padding on the right."""

from __future__ import annotations

import os
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from hire.model.encoder import local_folder, resolve_encoder

# What a tokenizer is read from: transformers' own serialization, or a vocabulary (WordPiece, BPE, SentencePiece,
# tiktoken). A folder with none of them is refused when transformers cannot build a tokenizer from it, or builds
# one with no vocabulary beyond its special tokens; a character-level tokenizer, which needs no file, loads.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model", "*.tiktoken")


def load_tokenizer(name_or_path: str | os.PathLike[str], words: bool = False) -> PreTrainedTokenizerBase:
    """The tokenizer of an encoder or of a saved model, padding on the right (the heads assume right padding).
    ``words``: for text given as words (token tasks): a byte-level BPE tokenizer (RoBERTa's) then reads each word
    as it reads a word inside running text, with the space before it (``add_prefix_space``).

    A local folder (``hire.model.encoder.local_folder``) must exist and hold a tokenizer: without one of
    :data:`TOKENIZER_FILES`, the ValueError names the folder and the files looked for, instead of
    ``transformers``' advice to install sentencepiece, or a tokenizer that reads every word as unknown.
    """
    # Imported here: this module is imported (to register "hire") as soon as transformers loads its Auto model
    # classes, which may happen while transformers is still importing its Auto tokenizer class.
    from transformers import AutoTokenizer

    path = resolve_encoder(name_or_path)
    folder = local_folder(Path(path) if isinstance(name_or_path, os.PathLike) else path, "tokenizer")
    has_files = folder is None or any(any(folder.glob(pattern)) for pattern in TOKENIZER_FILES)
    missing = ValueError(f"{os.fspath(name_or_path)}: no tokenizer files in this folder (looked for "
                         f"{', '.join(TOKENIZER_FILES)}); save the tokenizer with the model or encoder "
                         "(tokenizer.save_pretrained(folder))")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        if not has_files:
            raise missing from err
        raise
    if not has_files and len(tokenizer.get_vocab()) <= len(tokenizer.all_special_tokens):
        raise missing  # e.g. a BERT folder without vocab.txt: transformers builds an empty WordPiece
    if words and getattr(tokenizer, "add_prefix_space", None) is False:
        tokenizer = AutoTokenizer.from_pretrained(path, add_prefix_space=True)
    tokenizer.padding_side = "right"
    return tokenizer
