"""The bi-encoder ranker (:class:`BiEncoder`): one encoder reads a question and each passage apart."""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import PretrainedConfig, PreTrainedTokenizerBase
from transformers.modeling_outputs import SequenceClassifierOutput

from hire.model.batch import check_batch, describe
from hire.model.encoder import Encoder
from hire.model.heads import build_head
from hire.model.heads.baselines import pool
from hire.model.losses import BI_SCALE, in_batch_negatives_loss, pairwise_hinge_loss, scaled_cosine
from hire.model.sequence import own_memory
from hire.model.sharing import BI_ENCODER_FILE, ModelCard, write_bi_encoder_card

BI_RANK_LOSSES = ("in-batch", "pairwise")  # a bi-encoder's loss (BiEncoderConfig.rank_loss)
BI_HEADS = ("last-layer", "pool-mean")  # both are the last layer mean-pooled over real tokens in a bi-encoder


# What every bi-encoder is: its vector is the mean over real tokens of the last hidden state, a pair's score the
# cosine times the scale. Not choices (not fields of BiEncoderConfig): bi_encoder.json states them for a reader who
# loads the encoder with AutoModel, and a file that says otherwise is not one of hire's.
BI_ENCODER_IS = {"ranker": "bi", "task_type": "ranking", "pooling": "mean", "layer": "last", "similarity": "cosine"}


@dataclass
class BiEncoderConfig:
    """What a bi-encoder is, saved as ``bi_encoder.json`` beside its encoder: one encoder shared by questions and
    passages, each text encoded apart, its vector the mean over real tokens of the encoder's last hidden state, a
    pair scored by cosine similarity times ``scale`` (:data:`BI_ENCODER_IS`: what every bi-encoder is).
    ``head`` is the head it was asked for (:data:`BI_HEADS`), ``rank_loss`` (:data:`BI_RANK_LOSSES`) and
    ``rank_margin`` its training loss, ``task_options`` how its evaluation data was read, ``encoder`` the encoder it
    was fine-tuned from."""

    encoder: str = ""
    head: str = "last-layer"
    rank_loss: str = "in-batch"
    rank_margin: float = 1.0
    scale: float = BI_SCALE
    task_options: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        choices = {"head": BI_HEADS, "rank_loss": BI_RANK_LOSSES}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"a bi-encoder's {name} must be {' or '.join(map(repr, allowed))}, not "
                                 f"{getattr(self, name)!r}")
        for name in ("scale", "rank_margin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < float("inf"):
                raise ValueError(f"a bi-encoder's {name} must be a finite number > 0, not {value!r}")
        self.task_options = dict(self.task_options or {})

    def to_dict(self) -> dict[str, Any]:
        return {**BI_ENCODER_IS, "scale": float(self.scale), "head": self.head, "encoder": self.encoder,
                "rank_loss": self.rank_loss, "rank_margin": float(self.rank_margin),
                "task_options": dict(self.task_options or {})}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> BiEncoderConfig:
        """From a ``bi_encoder.json``: the fields of :data:`BI_ENCODER_IS` may be there (every folder has them)
        and must say what every bi-encoder is."""
        values = dict(values)
        for name, only in BI_ENCODER_IS.items():
            given = values.pop(name, only)
            if given != only:
                raise ValueError(f"a bi-encoder's {name} must be {json.dumps(only)}, not {given!r}")
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"a bi-encoder configuration has no field {', '.join(map(repr, unknown))}")
        return cls(**values)


@dataclass
class BiEncoderOutput(SequenceClassifierOutput):
    """``loss``; ``logits``: each candidate's score (B,) where questions were given; ``embeddings``: each text's
    vector (B, d) where only texts were given."""

    embeddings: Tensor | None = None


class BiEncoder(nn.Module):
    """A bi-encoder ranker: ONE encoder encodes a question and each passage apart; each text's vector is the mean
    of the encoder's last hidden state over its real tokens (:func:`hire.model.heads.baselines.pool`, the pooling of the
    heads and probes), and a (question, passage) pair scores ``scale * cos(q, p)`` (:func:`scaled_cosine`).

    Cosine rather than a dot product: the score is bounded (``[-scale, scale]``), so the hinge's margin and the
    softmax's temperature mean the same throughout training and across encoders, and the loss cannot be lowered by
    growing the vectors' norms; mean-pooled sentence encoders (all-MiniLM-L6-v2 among them) are trained for it.

    Saved (:meth:`save_pretrained`), the folder is the encoder as ``transformers`` saves it (``AutoModel`` loads
    it, no hire needed: mean-pool its ``last_hidden_state``), its tokenizer, and ``bi_encoder.json``
    (:class:`BiEncoderConfig`). Weights are named ``encoder.model.*`` as in :class:`HireModel`."""

    def __init__(self, config: BiEncoderConfig, encoder: Encoder):
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.head = build_head(config.head, encoder.hidden_size, encoder.num_hidden_states)  # no weights

    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.model.get_input_embeddings()

    def embed(self, input_ids: Tensor, attention_mask: Tensor | None = None,
              token_type_ids: Tensor | None = None) -> Tensor:
        """Each text's vector (N, d), float32: the last hidden state mean-pooled over the real tokens (padding never
        changes it). A right-padded batch of token ids, checked as :meth:`HireModel.forward` checks its own."""
        mask = check_batch(input_ids, attention_mask, token_type_ids, None, 1,
                           self.get_input_embeddings().num_embeddings)
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        last = self.encoder.model(input_ids=input_ids, attention_mask=mask, return_dict=True,
                                  **kwargs).last_hidden_state
        return pool(last.float(), mask, "mean")

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,  # type: ignore[override]
                token_type_ids: Tensor | None = None, query_input_ids: Tensor | None = None,
                query_attention_mask: Tensor | None = None, query_token_type_ids: Tensor | None = None,
                query_index: Tensor | None = None, passage_index: Tensor | None = None,
                labels: Tensor | None = None, groups: Tensor | None = None) -> BiEncoderOutput:
        """Texts alone (``input_ids`` ...): their vectors (``embeddings``). With questions (``query_*``): the
        ``input_ids`` are passages, and each candidate pairs question row ``query_index[b]`` with passage row
        ``passage_index[b]`` (default: row b with row b); ``logits`` are the candidates' scores (B,). With
        ``labels`` (grades >= 0) and ``groups`` (each candidate's question), ``loss`` is the configuration's
        ``rank_loss``: ``in-batch`` (:func:`in_batch_negatives_loss`) or ``pairwise``
        (:func:`pairwise_hinge_loss`)."""
        passages = self.embed(input_ids, attention_mask, token_type_ids)
        if query_input_ids is None:
            if labels is not None:
                raise ValueError("labels need questions (query_input_ids): a bi-encoder scores (question, passage) "
                                 "pairs")
            return BiEncoderOutput(embeddings=passages)
        queries = self.embed(query_input_ids, query_attention_mask, query_token_type_ids)
        Q, P = len(queries), len(passages)
        default = torch.arange(P, device=passages.device)
        if query_index is None and Q != P:
            raise ValueError(f"query_index is needed where the questions ({Q}) and passages ({P}) are not one each")
        query_index = default if query_index is None else query_index
        passage_index = default if passage_index is None else passage_index
        for name, index, rows in (("query_index", query_index, Q), ("passage_index", passage_index, P)):
            if not isinstance(index, Tensor) or index.dim() != 1 or index.is_floating_point() or \
                    index.dtype == torch.bool or len(index) != len(query_index) or \
                    bool(((index < 0) | (index >= rows)).any()):
                raise ValueError(f"{name} must be an integer tensor of row indices below {rows}, one per candidate "
                                 f"(as many as query_index), not {describe(index)}")
        similarity = scaled_cosine(queries, passages, self.config.scale, matrix=True)  # (Q, P)
        scores = similarity[query_index, passage_index]  # (B,)
        loss = None
        if labels is not None:
            B = len(scores)
            if not isinstance(labels, Tensor) or tuple(labels.shape) != (B,) or bool((labels < 0).any()):
                raise ValueError(f"labels must be relevance grades >= 0, one per candidate ({B}), not "
                                 f"{describe(labels)}")
            groups = query_index if groups is None else groups
            if self.config.rank_loss == "in-batch":
                loss = in_batch_negatives_loss(similarity, query_index, passage_index, labels.float(), groups)
            else:
                loss = pairwise_hinge_loss(scores, labels.float(), groups, float(self.config.rank_margin))
        return BiEncoderOutput(loss=loss, logits=scores)

    def save_pretrained(self, save_directory: str | Path, tokenizer: PreTrainedTokenizerBase | None = None, *,
                        card: ModelCard | None = None, **kwargs: Any) -> None:
        """The encoder as ``transformers`` saves it (``config.json``, ``model.safetensors``: ``AutoModel`` loads
        it), the tokenizer (when given), ``bi_encoder.json`` and a model card (``README.md``)."""
        directory = Path(save_directory)
        self.encoder.model.save_pretrained(directory, **kwargs)
        if not kwargs.get("is_main_process", True):
            return
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)
        (directory / BI_ENCODER_FILE).write_text(json.dumps(self.config.to_dict(), indent=2) + "\n")
        self.write_card(directory, card or ModelCard())

    def write_card(self, directory: str | Path, card: ModelCard) -> Path:
        """The model card (``README.md``): what the model is, how to get its vectors, what ``card`` holds."""
        return write_bi_encoder_card(directory, self.config.to_dict(), self.encoder.config.to_dict(), card)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> BiEncoder:
        """A saved bi-encoder (in eval mode): its encoder through ``AutoModel``, its ``bi_encoder.json``."""
        folder = Path(directory).expanduser()
        config = BiEncoderConfig.from_dict(json.loads((folder / BI_ENCODER_FILE).read_text()))
        model = cls(config, Encoder.from_pretrained(folder))
        own_memory(model)
        return model.eval()


def build_bi_encoder(encoder: str | os.PathLike[str] | PretrainedConfig, head: str = "last-layer",
                     rank_loss: str = "in-batch", rank_margin: float = 1.0,
                     task_options: Mapping[str, Any] | None = None) -> BiEncoder:
    """A bi-encoder over ``encoder`` (hub name, local path, or a ``transformers`` config for random weights); the
    arguments are checked (:class:`BiEncoderConfig`) before the encoder loads."""
    name = f"<random {encoder.model_type}>" if isinstance(encoder, PretrainedConfig) else os.fspath(encoder)
    config = BiEncoderConfig(encoder=name, head=head, rank_loss=rank_loss, rank_margin=rank_margin,
                             task_options=dict(task_options or {}))
    enc = Encoder.from_config(encoder) if isinstance(encoder, PretrainedConfig) else Encoder.from_pretrained(encoder)
    return BiEncoder(config, enc)


def is_bi_encoder(directory: str | Path) -> bool:
    """Whether a saved model folder holds a bi-encoder (its ``bi_encoder.json``)."""
    return (Path(directory).expanduser() / BI_ENCODER_FILE).is_file()
