"""Does the output layer recognise every hidden layer? Per-layer input reconstruction (Kao et al.).

Each hidden state ``H_j`` (``j = 0 .. l``; ``H_0`` is the embedding output) of an encoder is fed, as it is,
to the model's own output layer, and we count how often its top-1 prediction is the input token itself,
at every real position (padding and the tokenizer's special tokens, ``[CLS]``, ``[SEP]``, ``[UNK]`` ...,
left out). As in the study the input is not masked: does a layer's representation still name its token?

The output layer (``decoder``) is:

- ``mlm-head``: the checkpoint's trained masked-LM head (``AutoModelForMaskedLM``), used only when every
  one of its weights was read from the checkpoint (no missing key outside the encoder), so a head that
  transformers had to initialise at random is never mistaken for the trained one;
- ``tied-embeddings``: otherwise (all-MiniLM-L6-v2 and the sentence-transformers models, ELECTRA or
  DeBERTa-v3 discriminators, fine-tuned ``hire`` models): the input embedding matrix ``E`` as the output
  layer, ``logits = H_j E^T``, the weight a masked-LM head's decoder is tied to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from hire.config import ConfigError
from hire.data.batching import Collator, LengthGroupedBatches, encode
from hire.data.examples import Example
from hire.lab.sources import EncoderSource, load_source

DECODERS = ("auto", "mlm-head", "tied-embeddings")

# model_type -> the masked-LM head of ``AutoModelForMaskedLM``'s class, applied to hidden states (T, d).
MLM_HEADS: dict[str, Callable[[nn.Module, Tensor], Tensor]] = {
    "bert": lambda m, h: m.cls(h),
    "roberta": lambda m, h: m.lm_head(h),
    "xlm-roberta": lambda m, h: m.lm_head(h),
    "mpnet": lambda m, h: m.lm_head(h),
    "electra": lambda m, h: m.generator_lm_head(m.generator_predictions(h)),
    "deberta": lambda m, h: m.cls(h) if m.legacy else m.lm_predictions(h, m.deberta.embeddings.word_embeddings),
    "deberta-v2": lambda m, h: m.cls(h) if m.legacy else m.lm_predictions(h, m.deberta.embeddings.word_embeddings),
}


@dataclass
class Decoder:
    kind: str  # "mlm-head" or "tied-embeddings"
    note: str  # why this one, in words
    logits: Callable[[Tensor], Tensor]  # (T, d) hidden states -> (T, V) vocabulary scores


@dataclass
class ReconstructionModel:
    encoder: nn.Module  # a transformers base model (returns hidden states)
    tokenizer: PreTrainedTokenizerBase
    decoder: Decoder
    model_type: str


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report: what matters from it (missing head weights) we report ourselves."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def tied_embeddings(encoder: nn.Module, note: str, where: str) -> Decoder:
    """``logits = H E^T`` with the encoder's input embedding matrix ``E`` (V, d)."""
    weight = encoder.get_input_embeddings().weight  # (V, d_e)
    hidden = encoder.config.hidden_size
    if weight.shape[1] != hidden:
        raise ConfigError(f"{where}: hidden size {hidden} differs from the input embeddings' {weight.shape[1]} "
                          "and the checkpoint has no masked-LM head; there is no output layer to decode with")
    return Decoder("tied-embeddings", note, lambda h: h @ weight.T)


def _head_status(model_type: str, missing: list[str], prefix: str) -> str | None:
    """None when the masked-LM head was read whole from the checkpoint, else why it cannot be used."""
    if model_type not in MLM_HEADS:
        return f"hire reconstruct reads masked-LM heads of {', '.join(MLM_HEADS)} only, not {model_type!r}"
    head_missing = sorted(k for k in missing if not k.startswith(f"{prefix}."))
    if head_missing:
        shown = ", ".join(head_missing[:3]) + (", ..." if len(head_missing) > 3 else "")
        return f"the checkpoint has no trained masked-LM head (missing: {shown})"
    return None


def load_for_reconstruction(source: EncoderSource, choice: str = "auto") -> ReconstructionModel:
    """The encoder, its tokenizer and the output layer ``choice`` (``auto``: the trained MLM head if any)."""
    from transformers import AutoModelForMaskedLM

    from hire.model import load_tokenizer

    where = f"--encoder {source.spec}"
    if source.kind == "hire-model":  # a fine-tuned hire model: its encoder has no MLM head any more
        encoder, tokenizer = load_source(source)
        reason = "a fine-tuned hire model keeps no masked-LM head"
        return _choose(encoder.model, tokenizer, None, reason, choice, where)
    if source.kind == "random":  # random:<encoder>: its weights are drawn, never read; no trained head either
        encoder, tokenizer = load_source(source)
        return _choose(encoder.model, tokenizer, None, "a random: encoder has no trained masked-LM head", choice,
                       where)
    try:
        with _quiet_transformers():
            model, info = AutoModelForMaskedLM.from_pretrained(source.path, output_loading_info=True)
    except ValueError:  # no masked-LM class for this model type: the bare encoder
        encoder, tokenizer = load_source(source)
        return _choose(encoder.model, tokenizer, None, "transformers has no masked-LM class for it", choice, where)
    except OSError as err:
        raise ValueError(f"{where}: could not be loaded: {err}") from err
    prefix = model.base_model_prefix
    base_missing = sorted(k for k in info["missing_keys"] if k.startswith(f"{prefix}."))
    if base_missing:
        raise ValueError(f"{where}: encoder weights missing from the checkpoint ({', '.join(base_missing[:3])}"
                         f"{', ...' if len(base_missing) > 3 else ''}); its hidden states would be random")
    reason = _head_status(model.config.model_type, info["missing_keys"], prefix)
    return _choose(model.base_model, load_tokenizer(source.path), None if reason else model, reason, choice, where)


def _choose(encoder: nn.Module, tokenizer: PreTrainedTokenizerBase, mlm: nn.Module | None, reason: str | None,
            choice: str, where: str) -> ReconstructionModel:
    model_type = encoder.config.model_type
    if mlm is not None and choice != "tied-embeddings":
        head = MLM_HEADS[model_type]
        decoder = Decoder("mlm-head", "the checkpoint's trained masked-LM head", lambda h: head(mlm, h))
    elif choice == "mlm-head":
        raise ConfigError(f"--decoder mlm-head: {where.removeprefix('--encoder ')}: {reason}")
    else:
        note = "asked for with --decoder" if mlm is not None else str(reason)
        decoder = tied_embeddings(encoder, f"input embeddings as the output layer: {note}", where)
    return ReconstructionModel(encoder.eval(), tokenizer, decoder, model_type)


def count_correct(decoder: Decoder, hidden: Tensor, target: Tensor, chunk: int = 512) -> int:
    """How many rows of ``hidden`` (T, d) the decoder maps (top-1) to their ``target`` token (T,); in chunks,
    so the (chunk, V) logits stay small whatever the vocabulary."""
    return sum(int((decoder.logits(hidden[i : i + chunk]).argmax(-1) == target[i : i + chunk]).sum())
               for i in range(0, len(target), chunk))


@torch.no_grad()
def reconstruction_counts(model: ReconstructionModel, examples: list[Example], max_length: int, batch_size: int,
                          device: str = "cpu", desc: str = "reconstructing") -> dict[str, Any]:
    """Per hidden state ``H_0 .. H_l``: how many real input tokens the decoder recovers, out of ``tokens``."""
    encoded = encode(examples, model.tokenizer, max_length, None, labelled=False)
    batches = LengthGroupedBatches(encoded.lengths, batch_size, shuffle=False)
    loader = DataLoader(encoded, batch_sampler=batches, collate_fn=Collator(model.tokenizer.pad_token_id))
    encoder = model.encoder.to(device)
    special = torch.tensor(sorted(set(model.tokenizer.all_special_ids)), device=device)
    correct = torch.zeros(encoder.config.num_hidden_layers + 1, dtype=torch.long)
    tokens = 0
    for batch in tqdm(loader, desc=desc, unit="batch", dynamic_ncols=True):
        ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)  # (B, n)
        extra = {"token_type_ids": batch["token_type_ids"].to(device)} if "token_type_ids" in batch else {}
        out = encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True, return_dict=True, **extra)
        real = mask.bool() & ~torch.isin(ids, special)  # (B, n)
        target = ids[real]  # (T,)
        tokens += len(target)
        for j, states in enumerate(out.hidden_states):  # l + 1 tensors (B, n, d)
            correct[j] += count_correct(model.decoder, states[real], target)
    accuracy = [c / tokens if tokens else 0.0 for c in correct.tolist()]
    return {"tokens": tokens, "correct": correct.tolist(), "accuracy": accuracy}
