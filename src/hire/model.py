"""Encoder + head + output layer (eq. 8-9) + loss (eq. 10-11), for classification and regression.

``build_model("all-MiniLM-L6-v2", head="hire", num_labels=2)`` makes one; ``model.save_pretrained(dir)``
writes ``config.json`` and ``model.safetensors`` (and the tokenizer, when given), and
``HireModel.from_pretrained(dir)`` restores a model with identical outputs, head and settings.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_model, save_model
from torch import Tensor, nn
from transformers import AutoTokenizer, PretrainedConfig, PreTrainedTokenizerBase

from hire.encoder import Encoder, resolve_encoder
from hire.heads import build_head

CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"


@dataclass
class ModelConfig:
    """Everything needed to rebuild a model; saved as ``config.json``."""

    encoder: str  # the hub name or path the encoder came from (for the record)
    head: str = "hire"
    head_options: dict[str, Any] = field(default_factory=dict)
    num_labels: int = 2  # 1 for regression
    label_names: list[str] | None = None  # class names as spelled in the data, in logit order
    classifier_dropout: float = 0.1
    encoder_config: dict[str, Any] = field(default_factory=dict)
    text_columns: list[str] | None = None  # what the model was trained on: one text column, or a pair

    @property
    def regression(self) -> bool:
        return self.num_labels == 1


@dataclass
class ModelOutput:
    logits: Tensor  # (B, m); (B,) for regression
    loss: Tensor | None = None
    layer_weights: Tensor | None = None  # (B, l + 1), for heads that weight hidden states


class OutputLayer(nn.Module):
    """eq. 8: q = W2 tanh(W1 c + b1) + b2, with dropout before each product (as RoBERTa's head)."""

    def __init__(self, input_dim: int, hidden_size: int, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(input_dim, hidden_size)  # W1, b1
        self.out = nn.Linear(hidden_size, num_labels)  # W2, b2

    def forward(self, c: Tensor) -> Tensor:
        return self.out(self.dropout(torch.tanh(self.dense(self.dropout(c)))))  # (B, m)


class HireModel(nn.Module):
    def __init__(self, config: ModelConfig, encoder: Encoder):
        super().__init__()
        self.config = config
        self.encoder = encoder
        config.encoder_config = encoder.config.to_dict()
        d = encoder.hidden_size
        self.head = build_head(config.head, d, encoder.num_hidden_states, config.head_options)
        self.output = OutputLayer(self.head.output_dim, d, config.num_labels, config.classifier_dropout)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None,
                labels: Tensor | None = None) -> ModelOutput:
        check_right_padded(attention_mask)
        enc = self.encoder(input_ids, attention_mask, token_type_ids)
        head = self.head(enc.hidden_states, enc.mask)
        q = self.output(head.representation).float()  # eq. 8: (B, m)
        if self.config.regression:
            q = q.squeeze(-1)  # (B,): q itself is the prediction
        loss = None
        if labels is not None:  # eq. 10 (cross-entropy of eq. 9's softmax) or eq. 11 (squared error)
            loss = F.mse_loss(q, labels.float()) if self.config.regression else F.cross_entropy(q, labels)
        return ModelOutput(logits=q, loss=loss, layer_weights=head.layer_weights)

    def save_pretrained(self, directory: str | Path,
                        tokenizer: PreTrainedTokenizerBase | None = None) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / CONFIG_NAME).write_text(json.dumps(asdict(self.config), indent=2) + "\n")
        save_model(self, str(directory / WEIGHTS_NAME))
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)

    @classmethod
    def from_pretrained(cls, directory: str | Path, num_labels: int | None = None,
                        label_names: list[str] | None = None, map_location: str = "cpu") -> HireModel:
        """Load a saved model. Asking for another label set gives it a new, freshly initialised
        final projection (W2, b2), as when fine-tuning RTE from an MNLI model."""
        if num_labels is not None and label_names is not None and len(label_names) != num_labels:
            raise ValueError(f"{len(label_names)} label names for {num_labels} labels")
        config = load_config(directory)
        model = cls(config, Encoder.from_config(config.encoder_config))
        load_model(model, str(Path(directory) / WEIGHTS_NAME), device=map_location)
        new_labels = (num_labels is not None and num_labels != config.num_labels) or (
            label_names is not None and label_names != config.label_names)
        if new_labels:
            config.num_labels = num_labels or len(label_names or [])
            config.label_names = label_names
            model.output.out = nn.Linear(model.output.dense.out_features, config.num_labels)
        return model


def check_right_padded(attention_mask: Tensor) -> None:
    """Refuse a left-padded batch: the heads read the first token and the Bi-GRUs run over each
    sequence's first ``length`` positions, so padding must come after the real tokens."""
    if attention_mask.shape[1] > 1 and bool((attention_mask[:, 1:] > attention_mask[:, :-1]).any()):
        raise ValueError("attention_mask is not right-padded (padding before real tokens): hire's heads read "
                         "the first token and run over the first `length` positions; pad on the right "
                         "(tokenizer.padding_side = 'right')")


def load_config(directory: str | Path) -> ModelConfig:
    path = Path(directory) / CONFIG_NAME
    if not path.is_file():
        raise ValueError(f"{directory}: not a saved hire model (no {CONFIG_NAME})")
    try:
        return ModelConfig(**json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError) as err:
        raise ValueError(f"{path}: not a hire model configuration ({err})") from err


def build_model(encoder: str | PretrainedConfig, head: str = "hire", num_labels: int = 2,
                head_options: dict[str, Any] | None = None, label_names: list[str] | None = None,
                classifier_dropout: float = 0.1) -> HireModel:
    """The documented entry point: an encoder (hub name, local path, or a ``transformers`` config for
    random weights), a head name (``hire.heads.head_names()``) and the number of labels (1 = regression).
    """
    if isinstance(encoder, PretrainedConfig):
        enc, name = Encoder.from_config(encoder), f"<random {encoder.model_type}>"
    else:
        enc, name = Encoder.from_pretrained(encoder), encoder
    if label_names is not None and len(label_names) != num_labels:
        raise ValueError(f"{len(label_names)} label names for {num_labels} labels")
    config = ModelConfig(encoder=name, head=head, head_options=dict(head_options or {}),
                         num_labels=num_labels, label_names=label_names,
                         classifier_dropout=classifier_dropout)
    return HireModel(config, enc)


def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    """The encoder's tokenizer, padding on the right (the heads assume right padding)."""
    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder(name_or_path))
    tokenizer.padding_side = "right"
    return tokenizer
