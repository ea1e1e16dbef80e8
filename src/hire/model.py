"""Encoder + head + output layer (eq. 8-9) + loss (eq. 10-11): a ``transformers`` model of type ``"hire"``.

``build_model("all-MiniLM-L6-v2", head="hire", num_labels=2)`` makes one. :class:`HireConfig` and
:class:`HireModel` are a ``PretrainedConfig`` and a ``PreTrainedModel``, registered with ``AutoConfig`` and
``AutoModelForSequenceClassification``, so a saved folder (``model.save_pretrained(dir, tokenizer)``: config,
weights, tokenizer, model card) loads with ``HireModel.from_pretrained(dir)``, with
``AutoModelForSequenceClassification.from_pretrained(dir)`` and with ``pipeline("text-classification", dir)``,
all giving identical outputs. Saved ``with_code=True``, the folder also carries this modelling code (see
:mod:`hire.sharing`) and loads with ``trust_remote_code=True`` where hire is not installed.

This module, :mod:`hire.encoder`, :mod:`hire.heads`, :mod:`hire.recurrent` and :mod:`hire.sharing` are that code:
they import nothing else from hire.
"""

from __future__ import annotations

import contextlib
import json
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput

from hire.encoder import Encoder, local_folder, resolve_encoder
from hire.heads import build_head, check_head_options
from hire.heads.baselines import pool
from hire.sharing import BI_ENCODER_FILE, ModelCard, export_code, write_bi_encoder_card, write_model_card

CONFIG_NAME = "config.json"
TASK_TYPES = ("sequence", "token", "ranking")  # HireModel, HireForTokenClassification, HireModel (one score)
RANK_LOSSES = ("pointwise", "pairwise")  # a cross-encoder's loss (HireConfig.task_options["rank_loss"])
BI_RANK_LOSSES = ("in-batch", "pairwise")  # a bi-encoder's loss (BiEncoderConfig.rank_loss)
BI_HEADS = ("last-layer", "pool-mean")  # both are the last layer mean-pooled over real tokens in a bi-encoder
BI_SCALE = 20.0  # a bi-encoder's score: cosine similarity times this (sentence-transformers' MNRL scale)
SUBWORDS = ("first", "last", "mean")  # where a token model reads a word


class HireConfig(PretrainedConfig):
    """Everything needed to rebuild a model; saved as ``config.json``.

    Beside ``transformers``' own fields (``id2label``/``label2id``, ``problem_type``: ``"regression"`` when
    there is one label, else ``"single_label_classification"``), it records the encoder's configuration (a
    dict), the head and its options, the class names in logit order (``label_names``, as spelled in the data;
    None for regression), the text columns the model was trained on and whether the encoder is frozen
    (``freeze_encoder``: the feature-based use of BERT's paper; the head learns from fixed hidden states),
    and what is predicted (``task_type``: ``"sequence"``, one label or score per sentence or pair, ``"token"``,
    one tag per word, read at a word's ``subword``: its ``first`` or ``last`` sub-token, or their ``mean``, or
    ``"ranking"``, one relevance score per (question, passage) pair read together: a cross-encoder, one output,
    whose loss ``task_options`` name: ``rank_loss`` ``"pointwise"`` or ``"pairwise"``, and ``rank_margin``).
    """

    model_type = "hire"

    def __init__(self, encoder: str = "", head: str = "hire", head_options: dict[str, Any] | None = None,
                 label_names: list[str] | None = None, classifier_dropout: float = 0.1,
                 encoder_config: dict[str, Any] | None = None, text_columns: list[str] | None = None,
                 freeze_encoder: bool = False, task_type: str = "sequence", subword: str = "first",
                 task_options: dict[str, Any] | None = None, **kwargs: Any):
        if task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {', '.join(TASK_TYPES)}, not {task_type!r}")
        if subword not in SUBWORDS:
            raise ValueError(f"subword must be one of {', '.join(SUBWORDS)}, not {subword!r}")
        self.task_type, self.subword = task_type, subword
        # How a tagger's data was read (tag column, scheme, context); a ranker's loss (rank_loss, rank_margin).
        self.task_options = dict(task_options or {})
        self.encoder = encoder  # the hub name or path the encoder came from (for the record)
        self.head = head
        self.head_options = dict(head_options or {})
        self.classifier_dropout = classifier_dropout
        self.encoder_config = dict(encoder_config or {})
        self.text_columns = list(text_columns) if text_columns else None  # one text column, or a pair
        self.freeze_encoder = bool(freeze_encoder)
        new_label_set = False
        if "num_labels" in kwargs:
            kwargs["num_labels"] = check_num_labels(kwargs["num_labels"])
            # transformers' from_pretrained(folder, num_labels=n) asks for another label set than the one saved:
            # the saved class names no longer apply (build_model and HireModel.from_pretrained check the pair).
            new_label_set = label_names is not None and _count(label_names) != kwargs["num_labels"]
            label_names = None if new_label_set else label_names
        super().__init__(**kwargs)  # num_labels, id2label, label2id, problem_type, ...
        if label_names is not None:
            self.set_labels(_count(label_names), label_names)
        else:
            self.label_names = None
            if self.problem_type is None or new_label_set:
                self.problem_type = "regression" if self.num_labels == 1 else "single_label_classification"
        check_num_labels(self.num_labels)  # e.g. a config.json whose id2label is empty
        if task_type == "ranking":
            if self.num_labels != 1:
                raise ValueError(f"a ranking model has one output (a relevance score), not num_labels="
                                 f"{self.num_labels}")
            check_rank_loss(self.task_options.get("rank_loss", "pointwise"),
                            self.task_options.get("rank_margin", 1.0))

    @property
    def regression(self) -> bool:
        return self.num_labels == 1

    def set_labels(self, num_labels: int, label_names: list[str] | None = None) -> None:
        """The label set: ``num_labels`` outputs (1 = regression), named ``label_names`` in logit order."""
        num_labels = check_num_labels(num_labels)
        self.label_names = check_label_names(label_names, num_labels)
        names = self.label_names or [f"LABEL_{i}" for i in range(num_labels)]
        self.id2label = dict(enumerate(names))
        self.label2id = {name: i for i, name in self.id2label.items()}
        self.problem_type = "regression" if num_labels == 1 else "single_label_classification"


def check_rank_loss(rank_loss: Any, margin: Any) -> None:
    """A ranker's loss: ``rank_loss`` one of :data:`RANK_LOSSES`, ``margin`` a finite number > 0."""
    if rank_loss not in RANK_LOSSES:
        raise ValueError(f"rank_loss must be one of {', '.join(RANK_LOSSES)}, not {rank_loss!r}")
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 < float(margin) < float("inf"):
        raise ValueError(f"rank_margin must be a finite number > 0, not {margin!r}")


def pointwise_loss(scores: Tensor, labels: Tensor) -> Tensor:
    """Binary cross-entropy of each pair's score (a logit) against relevant (label > 0) or not, mean over pairs."""
    return F.binary_cross_entropy_with_logits(scores, (labels > 0).to(scores.dtype))


def pairwise_hinge_loss(scores: Tensor, labels: Tensor, groups: Tensor, margin: float = 1.0) -> Tensor:
    """The rank hinge loss ``max(0, margin - s_i + s_j)`` over every pair (i, j) of one question (the same
    ``groups`` value) where ``labels[i] > labels[j]`` (a positive and a negative, or a higher grade and a lower),
    mean over those pairs. A batch without such a pair gives 0, still connected to ``scores`` (its gradient is 0).

    ``scores``, ``labels`` and ``groups`` have one value per candidate, shape (B,)."""
    same = groups.unsqueeze(1) == groups.unsqueeze(0)  # (B, B)
    ordered = same & (labels.unsqueeze(1) > labels.unsqueeze(0))  # (i, j): i should rank above j
    hinge = torch.clamp(margin - scores.unsqueeze(1) + scores.unsqueeze(0), min=0)
    pairs = ordered.sum()
    if int(pairs) == 0:
        return scores.sum() * 0.0
    return (hinge * ordered).sum() / pairs


def check_num_labels(num_labels: Any) -> int:
    """``num_labels`` as an int: 1 (regression) or the number of classes (at least 2)."""
    if isinstance(num_labels, bool) or not isinstance(num_labels, numbers.Integral) or num_labels < 1:
        raise ValueError(f"num_labels must be an integer >= 1 (1 = regression, 2 or more = classes), "
                         f"not {num_labels!r}")
    return int(num_labels)


def check_label_names(label_names: Any, num_labels: int) -> list[str] | None:
    """``label_names`` as a list: ``num_labels`` distinct, non-empty strings in logit order (the class names
    as spelled in the data), or None. Regression (one label) has no class names."""
    if label_names is None:
        return None
    if isinstance(label_names, (str, bytes)) or not isinstance(label_names, Sequence):
        raise ValueError(f"label_names must be a list of class names in logit order, not {label_names!r}")
    names = list(label_names)
    bad = [name for name in names if not isinstance(name, str) or not name.strip()]
    if bad:
        raise ValueError(f"label_names must be non-empty strings (the classes as spelled in the data), "
                         f"not {bad[0]!r}")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"label_names: {', '.join(map(repr, twice))} given twice; each class needs a name of "
                         "its own")
    if num_labels == 1:
        raise ValueError(f"label_names {names}: num_labels=1 is regression, which has no class names (a "
                         "classifier has at least 2 classes)")
    if len(names) != num_labels:
        raise ValueError(f"label_names: {len(names)} label names for {num_labels} labels (num_labels)")
    return names


@dataclass
class ModelOutput(SequenceClassifierOutput):
    """``transformers``' classifier output (``loss``, ``logits``: (B, m), or (B,) for regression), plus
    ``layer_weights`` (B, l + 1) for heads that weight hidden states."""

    layer_weights: Tensor | None = None


class OutputLayer(nn.Module):
    """eq. 8: q = W2 tanh(W1 c + b1) + b2, with dropout before each product (as RoBERTa's head)."""

    def __init__(self, input_dim: int, hidden_size: int, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(input_dim, hidden_size)  # W1, b1
        self.out = nn.Linear(hidden_size, num_labels)  # W2, b2

    def forward(self, c: Tensor) -> Tensor:
        """(B, m), or (B, n, m) at every token. In float32 at least and outside autocast: under bf16 (or fp16) mixed
        precision, a score rounded to 8 bits of mantissa ties with its neighbours, and a ranking metric would
        then order tied candidates by their ids, not by the model (issue 73). Two small products; the encoder and
        the head keep the autocast precision."""
        dtype = torch.promote_types(c.dtype, torch.float32)
        with torch.autocast(device_type=c.device.type, enabled=False):
            h = torch.tanh(F.linear(self.dropout(c.to(dtype)), self.dense.weight.to(dtype), self.dense.bias.to(dtype)))
            return F.linear(self.dropout(h), self.out.weight.to(dtype), self.out.bias.to(dtype))


class HireModel(PreTrainedModel):
    """An encoder, a head over its ``l + 1`` hidden states, and the output layer; weights are named
    ``encoder.model.*``, ``head.*`` and ``output.*``."""

    config_class = HireConfig
    config: HireConfig

    def __init__(self, config: HireConfig, encoder: Encoder | None = None):
        super().__init__(config)
        self.encoder = Encoder.from_config(config.encoder_config) if encoder is None else encoder
        config.encoder_config = self.encoder.config.to_dict()
        d = self.encoder.hidden_size
        self.head = build_head(config.head, d, self.encoder.num_hidden_states, config.head_options)
        self.output = OutputLayer(self.head.output_dim, d, config.num_labels, config.classifier_dropout)
        self.post_init()
        self.freeze_encoder(config.freeze_encoder)

    def freeze_encoder(self, frozen: bool = True) -> None:
        """Feature-based use (``frozen``): the encoder's weights take no gradient and it runs without dropout,
        so only the head and output layer learn, from fixed hidden states. Recorded in the configuration."""
        if not isinstance(frozen, bool):
            raise ValueError(f"freeze_encoder must be True or False, not {frozen!r}")
        self.config.freeze_encoder = frozen
        self.encoder.requires_grad_(not frozen)
        self.train(self.training)

    def train(self, mode: bool = True) -> HireModel:
        """As ``nn.Module.train``, except that a frozen encoder always runs as at inference (no dropout): its
        hidden states are fixed features of the input, the same in every epoch."""
        super().train(mode)
        if self.config.freeze_encoder:
            self.encoder.eval()
        return self

    def init_weights(self) -> None:
        """Nothing to draw at construction: the encoder arrives initialised (pre-trained, or by its own class)
        and the head and output layer drew PyTorch's defaults when built, so a seed gives the same model as it
        always did. :meth:`_init_weights` serves only the weights a checkpoint lacks."""

    def _init_weights(self, module: nn.Module) -> None:
        """PyTorch's default initialisation (the one the head and output layer are built with) for a module
        whose weights a checkpoint lacks, e.g. a new label set loaded with ``ignore_mismatched_sizes``."""
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()

    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.model.get_input_embeddings()

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                labels: Tensor | None = None, groups: Tensor | None = None) -> ModelOutput:  # type: ignore[override]
        """eq. 8-11 on a right-padded batch: ``input_ids`` (B, n) token ids, ``attention_mask`` (B, n) of 0 and 1
        (default: all tokens real), ``token_type_ids`` (B, n), ``labels`` (B,): class indices (-100: ignored,
        as in ``transformers``), or real targets for regression. Anything else is a ValueError naming the
        argument (:func:`check_batch`).

        A ranker (``task_type="ranking"``) scores each (question, passage) pair; ``labels`` are relevance grades
        (>= 0) and the loss is the configuration's ``rank_loss``: ``pointwise`` (:func:`pointwise_loss`) or
        ``pairwise`` (:func:`pairwise_hinge_loss` over the pairs of each question, which ``groups`` (B,) names:
        the same integer for the candidates of one question)."""
        attention_mask = check_batch(input_ids, attention_mask, token_type_ids, labels, self.config.num_labels,
                                     self.get_input_embeddings().num_embeddings)
        ranker = self.config.task_type == "ranking"
        if groups is not None and (not isinstance(groups, Tensor) or tuple(groups.shape) != tuple(input_ids.shape[:1])
                                   or groups.is_floating_point() or groups.dtype == torch.bool):
            raise ValueError(f"groups must be an integer tensor of shape ({input_ids.shape[0]},), one question "
                             f"index per example, not {_describe(groups)}")
        if ranker and labels is not None and bool((labels < 0).any()):
            raise ValueError(f"labels of a ranker are relevance grades >= 0; got {labels.tolist()[:10]}")
        with torch.no_grad() if self.config.freeze_encoder else contextlib.nullcontext():
            enc = self.encoder(input_ids, attention_mask, token_type_ids)
        head = self.head(enc.hidden_states, enc.mask)
        q = self.output(head.representation)  # eq. 8: (B, m)
        q = q.to(torch.promote_types(q.dtype, torch.float32))  # the softmax and loss in float32 at least
        if self.config.regression:
            q = q.squeeze(-1)  # (B,): q itself is the prediction
        loss = None
        if labels is not None and ranker:
            loss = self._ranking_loss(q, labels.to(q.dtype), groups)
        elif labels is not None:  # eq. 10 (cross-entropy of eq. 9's softmax) or eq. 11 (squared error)
            loss = F.mse_loss(q, labels.to(q.dtype)) if self.config.regression else F.cross_entropy(q, labels.long())
        return ModelOutput(loss=loss, logits=q, layer_weights=head.layer_weights)

    def _ranking_loss(self, scores: Tensor, labels: Tensor, groups: Tensor | None) -> Tensor:
        options = self.config.task_options
        if options.get("rank_loss", "pointwise") == "pointwise":
            return pointwise_loss(scores, labels)
        if groups is None:
            raise ValueError("a pairwise ranker's loss needs groups: the question index of each example")
        return pairwise_hinge_loss(scores, labels, groups, float(options.get("rank_margin", 1.0)))

    def save_pretrained(self, save_directory: str | Path, tokenizer: PreTrainedTokenizerBase | None = None, *,
                        with_code: bool = False, card: ModelCard | None = None, **kwargs: Any) -> None:
        """Write ``config.json``, ``model.safetensors``, the tokenizer (when given) and a model card
        (``README.md``: the model, and what ``card`` says of its training). ``with_code``: also this modelling
        code, so that the folder loads where hire is not installed (``trust_remote_code=True``).
        ``kwargs`` go to ``transformers``' ``save_pretrained``."""
        if tokenizer is not None and not isinstance(tokenizer, PreTrainedTokenizerBase):
            raise ValueError(f"tokenizer must be a transformers tokenizer (load_tokenizer), not {tokenizer!r}")
        directory = Path(save_directory)
        super().save_pretrained(directory, **kwargs)
        if not kwargs.get("is_main_process", True):
            return
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)
        copied = self._auto_class is not None  # a copy loaded with trust_remote_code: transformers saved its code
        write_model_card(directory, self.config, card or ModelCard(), with_code=with_code or copied)
        if with_code:
            export_code(directory)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | Path, num_labels: int | None = None,
                        label_names: list[str] | None = None, map_location: str = "cpu", *model_args: Any,
                        **kwargs: Any) -> HireModel:
        """Load a saved model (in eval mode), of its own class: ``HireModel.from_pretrained`` of a token model
        gives a :class:`HireForTokenClassification`. Asking for another label set gives it a new, freshly initialised
        final projection (W2, b2), as when fine-tuning RTE from an MNLI model. ``kwargs`` go to ``transformers``'
        ``from_pretrained``."""
        if num_labels is not None:
            num_labels = check_num_labels(num_labels)
        if label_names is not None:
            label_names = check_label_names(label_names, num_labels or _count(label_names))
        folder = local_folder(pretrained_model_name_or_path, "model")
        if "config" not in kwargs and folder is not None:
            kwargs["config"] = load_config(folder)
            pretrained_model_name_or_path = folder
        if map_location != "cpu":
            kwargs.setdefault("device_map", map_location)
        if cls is HireModel and kwargs.get("config") is not None and kwargs["config"].task_type == "token":
            return HireForTokenClassification.from_pretrained(  # HireModel.from_pretrained loads any hire model
                pretrained_model_name_or_path, num_labels, label_names, map_location, *model_args, **kwargs)
        model = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        _own_memory(model)
        config = model.config
        if (num_labels is not None and num_labels != config.num_labels) or (
                label_names is not None and label_names != config.label_names):
            config.set_labels(num_labels or _count(label_names), label_names)
            dense = model.output.dense
            model.output.out = nn.Linear(dense.out_features, config.num_labels, device=dense.weight.device,
                                         dtype=dense.weight.dtype)
        return model


@dataclass
class TokenOutput(TokenClassifierOutput):
    """``transformers``' token classifier output (``loss``, ``logits``: (B, n, m)), plus ``layer_weights``
    (B, l + 1) for heads that weight hidden states."""

    layer_weights: Tensor | None = None


class HireForTokenClassification(HireModel):
    """The encoder, a head's per-token form and the output layer (eq. 8) at every token: token tasks (named
    entities, chunks, parts of speech).

    ``Head.tokens`` gives a representation at every token, the output layer classifies each. A word's tag is read
    at one of its sub-tokens, the one its ``labels`` mark (``config.subword``: its first, as BERT does, or its
    last); with ``mean``, the representations of the word's sub-tokens (``word_ids``: the word each token
    belongs to, -1 for none) are averaged first. ``labels`` (B, n) hold a tag index at each word's scored
    sub-token and -100 elsewhere: the loss is the mean cross-entropy over words.
    """

    def __init__(self, config: HireConfig, encoder: Encoder | None = None):
        if config.regression:
            raise ValueError("a token model needs at least two tags (num_labels >= 2), not regression")
        super().__init__(config, encoder)
        self.head.check_tokens()  # a head without a per-token form says so now, not at the first batch
        # Which vocabulary entries continue a word (WordPiece's "##" pieces; see set_word_pieces): where no
        # word_ids are given (transformers' token-classification pipeline), words are found from them.
        vocab = self.get_input_embeddings().num_embeddings
        self.register_buffer("continues_word", torch.zeros(vocab, dtype=torch.bool))

    def set_word_pieces(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Mark the tokenizer's word-continuing pieces (WordPiece's ``##`` prefix), so that the model reads each
        word at one of its sub-tokens, as with ``word_ids``, also where it is given token ids alone (transformers'
        ``pipeline("token-classification")``), and every sub-token of a word carries the word's tag (B-X on its
        first, I-X on the rest). Tokenizers without such a prefix (byte-level BPE, SentencePiece) leave it unset:
        without ``word_ids`` each sub-token is then read on its own."""
        prefix = getattr(getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None),
                         "continuing_subword_prefix", None)
        marks = torch.zeros_like(self.continues_word)
        if prefix:
            ids = [i for token, i in tokenizer.get_vocab().items() if token.startswith(prefix) and i < len(marks)]
            marks[ids] = True
        self.continues_word.copy_(marks)

    def _words_from_pieces(self, input_ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Which tokens continue a word (B, n), and the word each real token belongs to (B, n; -1 at padding)."""
        inside = self.continues_word[input_ids] & mask.bool()
        inside[:, 0] = False
        return inside, torch.where(mask.bool(), (~inside).long().cumsum(1) - 1, -1)

    def _read_words(self, q: Tensor, inside: Tensor, word: Tensor) -> Tensor:
        """Without ``word_ids``: every sub-token of a word gets the logits of the sub-token the word is read at
        (``config.subword``; ``mean`` has averaged them already), with B-X moved to I-X after the word's first."""
        B, n, m = q.shape
        word = word.clamp(min=0)  # padding reads the first word: never looked at
        positions = torch.arange(n, device=q.device).expand(B, n)
        reduce = "amax" if self.config.subword == "last" else "amin"
        read = torch.zeros_like(positions).scatter_reduce(1, word, positions, reduce, include_self=False)
        q = q.gather(1, read.gather(1, word).unsqueeze(-1).expand(B, n, m))
        moves = [(b, names.index("I-" + name[2:])) for names in [self.config.label_names or []]
                 for b, name in enumerate(names) if name.startswith("B-") and "I-" + name[2:] in names]
        if moves:
            later = q.clone()
            for b, i in moves:
                later[..., i] = torch.maximum(q[..., b], q[..., i])
                later[..., b] = torch.finfo(q.dtype).min / 2
            q = torch.where(inside.unsqueeze(-1), later, q)
        return q

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,  # type: ignore[override]
                token_type_ids: Tensor | None = None, labels: Tensor | None = None,
                word_ids: Tensor | None = None) -> TokenOutput:
        attention_mask = check_batch(input_ids, attention_mask, token_type_ids, None, self.config.num_labels,
                                     self.get_input_embeddings().num_embeddings)
        shape = tuple(input_ids.shape)
        for name, value in (("labels", labels), ("word_ids", word_ids)):
            if value is not None and (not isinstance(value, Tensor) or tuple(value.shape) != shape
                                      or value.is_floating_point() or value.dtype == torch.bool):
                raise ValueError(f"{name} must be an integer tensor of the shape of input_ids {shape}, one per "
                                 f"token, not {_describe(value)}")
        m = self.config.num_labels
        if labels is not None and bool(((labels != -100) & ((labels < 0) | (labels >= m))).any()):
            raise ValueError(f"labels must be tag indices 0 to {m - 1} (or -100, ignored); got "
                             f"{sorted(set(labels.flatten().tolist()))[:10]}")
        with torch.no_grad() if self.config.freeze_encoder else contextlib.nullcontext():
            enc = self.encoder(input_ids, attention_mask, token_type_ids)
        head = self.head.tokens(enc.hidden_states, enc.mask)
        T = head.representation  # (B, n, d')
        from_pieces = word_ids is None and bool(self.continues_word.any())
        if from_pieces:  # token ids alone: words from the word pieces
            inside, word_ids = self._words_from_pieces(input_ids, attention_mask)
        if self.config.subword == "mean" and word_ids is not None:
            T = word_means(T, word_ids)
        q = self.output(T)  # eq. 8 at every token: (B, n, m)
        q = q.to(torch.promote_types(q.dtype, torch.float32))
        if from_pieces:
            q = self._read_words(q, inside, word_ids)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(q.reshape(-1, m), labels.reshape(-1).long(), ignore_index=-100)
        return TokenOutput(loss=loss, logits=q, layer_weights=head.layer_weights)


def word_means(T: Tensor, word_ids: Tensor) -> Tensor:
    """At every token of a word (``word_ids`` (B, n): the word's index, -1 for no word), the mean of that word's
    token representations ``T`` (B, n, d); other tokens unchanged. Padding (-1) never changes a word."""
    B, n, d = T.shape
    words = int(word_ids.max().item()) + 1 if word_ids.numel() else 0
    if words <= 0:
        return T
    real = word_ids >= 0
    index = word_ids.clamp(min=0)  # (B, n)
    where = (torch.arange(B, device=T.device).unsqueeze(1).expand(B, n)[real], index[real])  # (example, word)
    sums = T.new_zeros(B, words, d).index_put_(where, T[real], accumulate=True)
    counts = T.new_zeros(B, words).index_put_(where, T.new_ones(()).expand(int(real.sum())), accumulate=True)
    means = sums / counts.clamp(min=1).unsqueeze(-1)  # (B, words, d)
    gathered = means.gather(1, index.unsqueeze(-1).expand(B, n, d))
    return torch.where(real.unsqueeze(-1), gathered, T)


@torch.no_grad()
def _own_memory(model: nn.Module) -> None:
    """Give every parameter and buffer memory of its own, as when the model was built and saved.

    ``transformers`` may load them as views into one buffer, at offsets whose alignment changes the last bits of
    some matrix products (a one-label output layer on CPU, for one); in memory of their own, aligned as PyTorch
    allocates it, a loaded model computes exactly what the saved one did.
    """
    for param in model.parameters():
        param.data = param.data.clone()
    for module in model.modules():
        for name, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[name] = buffer.clone()


def _count(label_names: Any) -> int:
    return len(label_names) if isinstance(label_names, Sequence) else 0


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a tensor of dtype {str(value.dtype).removeprefix('torch.')} and shape {tuple(value.shape)}"
    return f"{type(value).__name__} {value!r}"[:120]


def check_batch(input_ids: Any, attention_mask: Any, token_type_ids: Any, labels: Any, num_labels: int,
                vocab_size: int) -> Tensor:
    """Check a batch for :meth:`HireModel.forward`; return its attention mask as integers (all ones if None).

    The shapes and dtypes are checked first, then every value at once (one read back from the device): the mask
    holds only 0 and 1, is right-padded, and gives each example at least one real token; token ids lie in the
    vocabulary; class labels are indices below ``num_labels`` (or -100, ignored); regression targets are finite.
    Each failure is a ValueError naming the argument.
    """
    integer = (torch.int64, torch.int32)
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or input_ids.dtype not in integer:
        raise ValueError(f"input_ids must be an int64 (or int32) tensor of token ids of shape (batch, tokens), "
                         f"not {_describe(input_ids)}")
    shape = tuple(input_ids.shape)
    if 0 in shape:
        raise ValueError(f"input_ids of shape {shape}: an empty batch ({shape[0]} examples of {shape[1]} tokens); "
                         "give at least one example of at least one token")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if not isinstance(attention_mask, Tensor) or tuple(attention_mask.shape) != shape or attention_mask.is_complex():
        raise ValueError(f"attention_mask must be a tensor of the shape of input_ids {shape} (1 at real tokens, "
                         f"0 at padding), not {_describe(attention_mask)}")
    if token_type_ids is not None and (not isinstance(token_type_ids, Tensor) or tuple(token_type_ids.shape) != shape
                                       or token_type_ids.dtype not in integer):
        raise ValueError(f"token_type_ids must be an integer tensor of the shape of input_ids {shape}, not "
                         f"{_describe(token_type_ids)}")
    regression = num_labels == 1
    if labels is not None:
        kind = "a real-valued tensor" if regression else "an integer tensor of class indices"
        dtype_ok = isinstance(labels, Tensor) and labels.dtype != torch.bool and not labels.is_complex() and (
            regression or not labels.is_floating_point())
        if not dtype_ok or tuple(labels.shape) != shape[:1]:
            raise ValueError(f"labels must be {kind} of shape ({shape[0]},), one per example, not {_describe(labels)}")
    mask = attention_mask.to(torch.long)
    problems = {  # each a 0-dim boolean tensor, read back together
        "mask": ((attention_mask != 0) & (attention_mask != 1)).any(),
        "left": (mask[:, 1:] > mask[:, :-1]).any(),
        "empty": (mask[:, 0] == 0).any(),  # right-padded: an example without a first real token has none
        "ids": ((input_ids < 0) | (input_ids >= vocab_size)).any(),
    }
    if labels is not None and regression:
        problems["labels"] = ~torch.isfinite(labels).all()
    elif labels is not None:
        problems["labels"] = ((labels != -100) & ((labels < 0) | (labels >= num_labels))).any()
    found = dict(zip(problems, torch.stack(list(problems.values())).tolist(), strict=True))
    if found["mask"]:
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
    if found["left"]:
        raise ValueError("attention_mask is not right-padded (padding before real tokens): hire's heads read "
                         "the first token and run over the first `length` positions; pad on the right "
                         "(tokenizer.padding_side = 'right')")
    if found["empty"]:
        rows = torch.nonzero(mask.sum(-1) == 0).flatten().tolist()
        raise ValueError(f"attention_mask: example(s) {rows[:10]} of the batch have no real token (all 0): every "
                         "example needs at least one")
    if found["ids"]:
        raise ValueError(f"input_ids: token ids from {int(input_ids.min())} to {int(input_ids.max())}, outside "
                         f"the encoder's vocabulary (0 to {vocab_size - 1})")
    if found.get("labels"):
        what = "finite numbers" if regression else f"class indices 0 to {num_labels - 1} (or -100, ignored)"
        raise ValueError(f"labels must be {what}; got {labels.tolist()[:10]}")
    return mask


def load_config(directory: str | Path) -> HireConfig:
    """The configuration of a saved model folder; a ValueError naming the file for anything else."""
    path = Path(directory) / CONFIG_NAME
    if not path.is_file():
        raise ValueError(f"{directory}: not a saved hire model (no {CONFIG_NAME})")
    try:
        values = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a hire model configuration ({err})") from err
    if not isinstance(values, dict):
        raise ValueError(f"{path}: not a hire model configuration (not a JSON object)")
    if values.get("model_type") != HireConfig.model_type:
        kind = f"a {values['model_type']!r} model" if "model_type" in values else "no model_type"
        raise ValueError(f"{path}: {kind}, not a saved hire model")
    return HireConfig.from_dict(values)


def build_model(encoder: str | os.PathLike[str] | PretrainedConfig, head: str = "hire", num_labels: int = 2,
                head_options: Mapping[str, Any] | None = None, label_names: Sequence[str] | None = None,
                classifier_dropout: float = 0.1, freeze_encoder: bool = False, task_type: str = "sequence",
                subword: str = "first", task_options: Mapping[str, Any] | None = None) -> HireModel:
    """The documented entry point: an encoder (hub name, local path, or a ``transformers`` config for
    random weights), a head name (``hire.heads.head_names()``) and the number of labels (1 = regression).
    ``head_options`` are the head's own (``hire.heads.head_options(head)``); ``label_names`` the class names in
    logit order; ``freeze_encoder``: train only the head and output layer on the encoder's fixed hidden states;
    ``task_type="token"`` (with ``subword``) a tagger, :class:`HireForTokenClassification`; ``task_options``
    record how its data was read.

    Every argument is checked before the encoder loads: a wrong one is a ValueError naming it.
    """
    if not isinstance(encoder, PretrainedConfig) and not (isinstance(encoder, (str, os.PathLike))
                                                         and os.fspath(encoder).strip()):
        raise ValueError(f"encoder must be a hub name, a folder or a transformers config, not {encoder!r}")
    options = check_head_options(head, head_options)  # the head's name, then its options' names and types
    num_labels = check_num_labels(num_labels)
    label_names = check_label_names(label_names, num_labels)
    if isinstance(classifier_dropout, bool) or not isinstance(classifier_dropout, numbers.Real) or not (
            0 <= classifier_dropout < 1):
        raise ValueError(f"classifier_dropout must be a probability in [0, 1), not {classifier_dropout!r}")
    if not isinstance(freeze_encoder, bool):
        raise ValueError(f"freeze_encoder must be True or False, not {freeze_encoder!r}")
    if isinstance(encoder, PretrainedConfig):
        enc, name = Encoder.from_config(encoder), f"<random {encoder.model_type}>"
    else:
        enc, name = Encoder.from_pretrained(encoder), os.fspath(encoder)
    config = HireConfig(encoder=name, head=head, head_options=options, label_names=label_names,
                        classifier_dropout=float(classifier_dropout), num_labels=num_labels,
                        freeze_encoder=freeze_encoder, task_type=task_type, subword=subword,
                        task_options=dict(task_options or {}))
    return (HireForTokenClassification if config.task_type == "token" else HireModel)(config, enc)


# What a tokenizer is read from: transformers' own serialization, or a vocabulary (WordPiece, BPE, SentencePiece,
# tiktoken). A folder with none of them is refused when transformers cannot build a tokenizer from it, or builds
# one with no vocabulary beyond its special tokens; a character-level tokenizer, which needs no file, loads.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "*.model", "*.tiktoken")


def load_tokenizer(name_or_path: str | os.PathLike[str], words: bool = False) -> PreTrainedTokenizerBase:
    """The tokenizer of an encoder or of a saved model, padding on the right (the heads assume right padding).
    ``words``: for text given as words (token tasks): a byte-level BPE tokenizer (RoBERTa's) then reads each word
    as it reads a word inside running text, with the space before it (``add_prefix_space``).

    A local folder (``hire.encoder.local_folder``) must exist and hold a tokenizer: without one of
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


# -- the bi-encoder ----------------------------------------------------------------------------------------------


def scaled_cosine(queries: Tensor, passages: Tensor, scale: float = BI_SCALE, matrix: bool = False) -> Tensor:
    """``scale * cos(q, p)`` in float32: row by row for ``queries`` and ``passages`` (N, d) -> (N,), or every
    query against every passage (``matrix``: (Q, d), (P, d) -> (Q, P)). Never autocast to a lower precision."""
    with torch.autocast(device_type=queries.device.type, enabled=False):
        q = F.normalize(queries.float(), dim=-1)
        p = F.normalize(passages.float(), dim=-1)
        return scale * (q @ p.T if matrix else (q * p).sum(-1))


def in_batch_negatives_loss(similarity: Tensor, query_index: Tensor, passage_index: Tensor, labels: Tensor,
                            groups: Tensor) -> Tensor:
    """In-batch negatives: each relevant candidate (``labels > 0``) of a question is the target of a softmax over
    every passage of the batch, cross-entropy, mean over the relevant candidates.

    ``similarity`` (Q, P) holds every (distinct) question of the batch against every (distinct) passage; each of
    the B candidates names its question row (``query_index``), its passage column (``passage_index``), its grade
    (``labels``) and its question (``groups``: the same integer for one question's candidates). The other
    relevant passages of the candidate's own question (and of any question worded the same) are left out of its
    softmax (they are not negatives); every
    other passage of the batch, the question's own irrelevant candidates included, is one. A question without a
    relevant candidate has no row (it is skipped), though its passages serve the others as negatives. A batch
    without a relevant candidate gives 0, still connected to ``similarity`` (its gradient is 0)."""
    positive = labels > 0
    if not bool(positive.any()):
        return similarity.sum() * 0.0
    rows = torch.nonzero(positive).flatten()  # (R,): the candidates that are targets
    target = passage_index[rows]
    # (R, B): candidate b is another relevant candidate of row r's question; scattered to its passage column.
    # Two questions worded alike share one question row: each one's relevant passages are not the other's negatives.
    same = (groups[rows].unsqueeze(1) == groups.unsqueeze(0)) | \
        (query_index[rows].unsqueeze(1) == query_index.unsqueeze(0))
    others = same & positive.unsqueeze(0)
    blocked = torch.zeros(len(rows), similarity.shape[1], device=similarity.device).scatter_reduce(
        1, passage_index.unsqueeze(0).expand(len(rows), -1), others.float(), "amax").bool()
    blocked[torch.arange(len(rows), device=similarity.device), target] = False
    logits = similarity[query_index[rows]].float().masked_fill(blocked, float("-inf"))
    return F.cross_entropy(logits, target)


@dataclass
class BiEncoderConfig:
    """What a bi-encoder is, saved as ``bi_encoder.json`` beside its encoder: one encoder shared by questions and
    passages, each text encoded apart, its vector the ``pooling`` (mean over real tokens) of the encoder's last
    hidden state, a pair scored by ``similarity`` (cosine) times ``scale``. ``head`` is the head it was asked for
    (:data:`BI_HEADS`), ``rank_loss`` (:data:`BI_RANK_LOSSES`) and ``rank_margin`` its training loss,
    ``task_options`` how its evaluation data was read, ``encoder`` the encoder it was fine-tuned from."""

    encoder: str = ""
    head: str = "last-layer"
    rank_loss: str = "in-batch"
    rank_margin: float = 1.0
    scale: float = BI_SCALE
    task_options: dict[str, Any] | None = None
    pooling: str = "mean"
    layer: str = "last"
    similarity: str = "cosine"
    ranker: str = "bi"
    task_type: str = "ranking"

    def __post_init__(self) -> None:
        problems = {"ranker": self.ranker == "bi", "task_type": self.task_type == "ranking",
                    "pooling": self.pooling == "mean", "layer": self.layer == "last",
                    "similarity": self.similarity == "cosine", "head": self.head in BI_HEADS,
                    "rank_loss": self.rank_loss in BI_RANK_LOSSES}
        wanted = {"ranker": '"bi"', "task_type": '"ranking"', "pooling": '"mean"', "layer": '"last"',
                  "similarity": '"cosine"', "head": " or ".join(map(repr, BI_HEADS)),
                  "rank_loss": " or ".join(map(repr, BI_RANK_LOSSES))}
        for name, ok in problems.items():
            if not ok:
                raise ValueError(f"a bi-encoder's {name} must be {wanted[name]}, not {getattr(self, name)!r}")
        for name in ("scale", "rank_margin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < float("inf"):
                raise ValueError(f"a bi-encoder's {name} must be a finite number > 0, not {value!r}")
        self.task_options = dict(self.task_options or {})

    def to_dict(self) -> dict[str, Any]:
        return {"ranker": self.ranker, "task_type": self.task_type, "pooling": self.pooling, "layer": self.layer,
                "similarity": self.similarity, "scale": float(self.scale), "head": self.head,
                "encoder": self.encoder, "rank_loss": self.rank_loss, "rank_margin": float(self.rank_margin),
                "task_options": dict(self.task_options or {})}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> BiEncoderConfig:
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"a bi-encoder configuration has no field {', '.join(map(repr, unknown))}")
        return cls(**dict(values))


@dataclass
class BiEncoderOutput(SequenceClassifierOutput):
    """``loss``; ``logits``: each candidate's score (B,) where questions were given; ``embeddings``: each text's
    vector (B, d) where only texts were given."""

    embeddings: Tensor | None = None


class BiEncoder(nn.Module):
    """A bi-encoder ranker: ONE encoder encodes a question and each passage apart; each text's vector is the mean
    of the encoder's last hidden state over its real tokens (:func:`hire.heads.baselines.pool`, the pooling of the
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
                                 f"(as many as query_index), not {_describe(index)}")
        similarity = scaled_cosine(queries, passages, self.config.scale, matrix=True)  # (Q, P)
        scores = similarity[query_index, passage_index]  # (B,)
        loss = None
        if labels is not None:
            B = len(scores)
            if not isinstance(labels, Tensor) or tuple(labels.shape) != (B,) or bool((labels < 0).any()):
                raise ValueError(f"labels must be relevance grades >= 0, one per candidate ({B}), not "
                                 f"{_describe(labels)}")
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
        _own_memory(model)
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


def load_ranker(directory: str | Path) -> HireModel | BiEncoder:
    """Any saved hire model, in eval mode: a :class:`BiEncoder` where the folder holds one, else
    :meth:`HireModel.from_pretrained`."""
    return BiEncoder.from_pretrained(directory) if is_bi_encoder(directory) else HireModel.from_pretrained(directory)


if __package__ == "hire":  # the installed library; a saved folder's copy is found through its auto_map instead
    AutoConfig.register(HireConfig.model_type, HireConfig, exist_ok=True)
    AutoModelForSequenceClassification.register(HireConfig, HireModel, exist_ok=True)
    AutoModelForTokenClassification.register(HireConfig, HireForTokenClassification, exist_ok=True)
