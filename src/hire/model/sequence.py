"""The model of a sentence or a pair (:class:`HireModel`): encoder, head, output layer (eq. 8-9) and loss
(eq. 10-11); the base of every hire model class."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.modeling_outputs import SequenceClassifierOutput

from hire.model.batch import check_batch, describe
from hire.model.config import HireConfig, check_label_names, check_num_labels, count_labels, load_config
from hire.model.encoder import Encoder, local_folder
from hire.model.heads import build_head
from hire.model.registry import model_class_for, register_model_class
from hire.model.sharing import ModelCard, export_code, write_model_card


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

    auto_class_name = "AutoModelForSequenceClassification"  # the transformers Auto class that loads it

    config_class = HireConfig
    config: HireConfig

    def __init__(self, config: HireConfig, encoder: Encoder | None = None):
        self.check_config(config)
        super().__init__(config)
        self.encoder = Encoder.from_config(config.encoder_config) if encoder is None else encoder
        config.encoder_config = self.encoder.config.to_dict()
        d = self.encoder.hidden_size
        self.head = build_head(config.head, d, self.encoder.num_hidden_states, config.head_options)
        self.output = OutputLayer(self.head.output_dim, d, config.num_labels, config.classifier_dropout)
        self.post_init()
        self.freeze_encoder(config.freeze_encoder)

    @classmethod
    def check_config(cls, config: HireConfig) -> None:
        """What this kind of model asks of its configuration beyond :class:`HireConfig`'s own checks (nothing here;
        a ranker's one output and loss): a ValueError naming the field."""

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
        argument (:func:`check_batch`). ``groups`` (B,): the same integer for examples that a loss compares with
        each other (a ranker's candidates of one question; :meth:`loss`)."""
        attention_mask = check_batch(input_ids, attention_mask, token_type_ids, labels, self.config.num_labels,
                                     self.get_input_embeddings().num_embeddings)
        if groups is not None and (not isinstance(groups, Tensor) or tuple(groups.shape) != tuple(input_ids.shape[:1])
                                   or groups.is_floating_point() or groups.dtype == torch.bool):
            raise ValueError(f"groups must be an integer tensor of shape ({input_ids.shape[0]},), one question "
                             f"index per example, not {describe(groups)}")
        if labels is not None:
            self.check_labels(labels)
        with torch.no_grad() if self.config.freeze_encoder else contextlib.nullcontext():
            enc = self.encoder(input_ids, attention_mask, token_type_ids)
        head = self.head(enc.hidden_states, enc.mask)
        q = self.output(head.representation)  # eq. 8: (B, m)
        q = q.to(torch.promote_types(q.dtype, torch.float32))  # the softmax and loss in float32 at least
        if self.config.regression:
            q = q.squeeze(-1)  # (B,): q itself is the prediction
        loss = None if labels is None else self.loss(q, labels, groups)
        return ModelOutput(loss=loss, logits=q, layer_weights=head.layer_weights)

    def check_labels(self, labels: Tensor) -> None:
        """What this kind of model asks of ``labels`` beyond :func:`check_batch` (nothing here), before encoding."""

    def loss(self, q: Tensor, labels: Tensor, groups: Tensor | None) -> Tensor:
        """eq. 10 (cross-entropy of eq. 9's softmax) or eq. 11 (squared error) of the outputs ``q``."""
        return F.mse_loss(q, labels.to(q.dtype)) if self.config.regression else F.cross_entropy(q, labels.long())

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
        copied = self._auto_class is not None  # a copy loaded with trust_remote_code: its code goes with it again
        write_model_card(directory, self.config, card or ModelCard(), with_code=with_code or copied)
        if with_code or copied:  # every module of the package (transformers copies the class's module alone)
            export_code(directory)

    def write_card(self, directory: str | Path, card: ModelCard) -> Path:
        """The model card (``README.md``) of a saved folder: the model, and what ``card`` says of its training."""
        return write_model_card(directory, self.config, card)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | Path, num_labels: int | None = None,
                        label_names: list[str] | None = None, map_location: str = "cpu", *model_args: Any,
                        **kwargs: Any) -> HireModel:
        """Load a saved model (in eval mode), of the class its task type registered where that class is this one or
        derives from it (:func:`hire.model.registry.model_class_for`): ``HireModel.from_pretrained`` loads any hire
        model, as ``transformers``' ``AutoModelForSequenceClassification`` does. Asking for another label set gives
        it a new, freshly initialised final projection (W2, b2), as when fine-tuning RTE from an MNLI model.
        ``kwargs`` go to ``transformers``' ``from_pretrained``."""
        if num_labels is not None:
            num_labels = check_num_labels(num_labels)
        if label_names is not None:
            label_names = check_label_names(label_names, num_labels or count_labels(label_names))
        folder = local_folder(pretrained_model_name_or_path, "model")
        if "config" not in kwargs and folder is not None:
            kwargs["config"] = load_config(folder)
            pretrained_model_name_or_path = folder
        if map_location != "cpu":
            kwargs.setdefault("device_map", map_location)
        own = model_class_for(kwargs["config"].task_type) if kwargs.get("config") is not None else cls
        if own is not cls and issubclass(own, cls):  # e.g. HireModel.from_pretrained of a tagger's folder
            return own.from_pretrained(pretrained_model_name_or_path, num_labels, label_names, map_location,
                                       *model_args, **kwargs)
        model = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        own_memory(model)
        config = model.config
        if (num_labels is not None and num_labels != config.num_labels) or (
                label_names is not None and label_names != config.label_names):
            config.set_labels(num_labels or count_labels(label_names), label_names)
            dense = model.output.dense
            model.output.out = nn.Linear(dense.out_features, config.num_labels, device=dense.weight.device,
                                         dtype=dense.weight.dtype)
        return model


@torch.no_grad()
def own_memory(model: nn.Module) -> None:
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


register_model_class("sequence", HireModel)  # one label or score per sentence or pair
