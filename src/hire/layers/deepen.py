"""A deeper encoder by duplicating some of its layers, with no training (Kao et al.).

Given a plan (:mod:`hire.layers.plan`: one source layer index per new layer), the new encoder's layer
``k`` is an independent copy of source layer ``plan[k]``: equal in value, separate parameters, so
fine-tuning moves each copy on its own. Everything outside the layer list (embeddings, MPNet's shared
relative attention bias, DeBERTa's shared relative position embeddings, a masked-LM head, a pooler) is
kept as it is, and ``num_hidden_layers`` becomes ``len(plan)``.

Two ways to the same encoder:

- :func:`deepen_model`: a loaded model, in memory: the layers are deep-copied into a new list, and each
  copy's attention modules get their new position where the family numbers them (``layer_idx``, the
  key-value cache index of BERT, RoBERTa and ELECTRA in recent transformers versions).
- :func:`deepen_checkpoint` (``hire deepen``): a checkpoint folder, tensor by tensor: every weight of the
  source file is kept under its own name, and the weights of ``<prefix>encoder.layer.<i>.*`` are laid out
  again by the plan. The result is an ordinary folder (``config.json``, ``model.safetensors``, the
  tokenizer, ``deepen.json``) that ``AutoModel.from_pretrained`` builds afresh, so per-layer numbering is
  right by construction, and whatever head the source had (a masked-LM head for ``hire reconstruct``)
  comes along without being loaded or re-initialised.

The tests check that the two agree bit for bit, and that an identity plan changes nothing.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import PreTrainedModel

from hire.config import ConfigError
from hire.layers.plan import FAMILIES, build_plan, check_family, describe_plan, repeats

DEEPEN_FILE = "deepen.json"
FORMAT = "hire-deepen/1"
# ``bert.encoder.layer.3.attention.self.query.weight`` -> prefix ``bert.``, index 3, rest ``attention...``
LAYER_KEY = re.compile(r"^(?P<prefix>(?:[^.]+\.)*?)encoder\.layer\.(?P<index>\d+)\.(?P<rest>.+)$")
_WEIGHT_FILES = (("model.safetensors", "model.safetensors.index.json"),
                 ("pytorch_model.bin", "pytorch_model.bin.index.json"))


def layer_list(model: PreTrainedModel) -> nn.ModuleList:
    """The model's Transformer layers (``<base model>.encoder.layer``), for a supported family."""
    check_family(getattr(model.config, "model_type", None), type(model).__name__)
    layers = getattr(getattr(model.base_model, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(f"{type(model).__name__}: no layer list at encoder.layer")
    return layers


def renumber(layer: nn.Module, position: int) -> None:
    """Give every sub-module of ``layer`` that records its layer's index (``layer_idx``) the new position."""
    for module in layer.modules():
        if isinstance(getattr(module, "layer_idx", None), int):
            module.layer_idx = position


def deepen_model(model: PreTrainedModel, plan: Sequence[int]) -> PreTrainedModel:
    """Rebuild ``model``'s layer list by ``plan``, in place (and return it): layer ``k`` becomes a deep copy
    of old layer ``plan[k]``, renumbered; ``config.num_hidden_layers`` becomes ``len(plan)``."""
    layers = layer_list(model)
    plan = build_plan(len(layers), layers=list(plan))
    new = nn.ModuleList(copy.deepcopy(layers[source]) for source in plan)
    for position, layer in enumerate(new):
        renumber(layer, position)
    model.base_model.encoder.layer = new
    model.config.num_hidden_layers = len(plan)
    return model


def deepen_state_dict(state: dict[str, Tensor], plan: Sequence[int], num_layers: int) -> dict[str, Tensor]:
    """The checkpoint's tensors with the layer block ``<prefix>encoder.layer.<i>.*`` laid out by ``plan``.

    Every other tensor keeps its name. A source layer used more than once is cloned for each further use,
    so no two names share memory (safetensors refuses shared tensors, and the copies are independent).
    """
    layers: dict[int, dict[str, Tensor]] = {}
    prefixes, out = set(), {}
    for key, tensor in state.items():
        match = LAYER_KEY.match(key)
        if match is None:
            out[key] = tensor
            continue
        prefixes.add(match["prefix"])
        layers.setdefault(int(match["index"]), {})[match["rest"]] = tensor
    if len(prefixes) != 1 or sorted(layers) != list(range(num_layers)):
        raise ValueError(f"the weights do not hold one block of layers 0-{num_layers - 1} under "
                         f"'<prefix>encoder.layer.<i>.' (found prefixes {sorted(prefixes)}, layers {sorted(layers)})")
    prefix = prefixes.pop()
    for position, source in enumerate(plan):
        for rest, tensor in layers[source].items():
            out[f"{prefix}encoder.layer.{position}.{rest}"] = tensor
    return _unshared(out)


def _unshared(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Clone every tensor whose memory an earlier one already uses (tied weights of a ``.bin``, repeats)."""
    seen: set[int] = set()
    out = {}
    for key, tensor in state.items():
        storage = tensor.untyped_storage().data_ptr()
        out[key] = tensor.clone().contiguous() if storage in seen else tensor.contiguous()
        seen.add(storage)
    return out


def source_folder(spec: str) -> Path:
    """The local folder of ``--encoder``: a folder, ``all-MiniLM-L6-v2``, or a hub name (its cached or
    downloaded snapshot: configuration, tokenizer and PyTorch weights only)."""
    from hire.config import check_encoder
    from hire.model.encoder import resolve_encoder

    check_encoder(spec, "--encoder")  # a folder with config.json, or a plausible (cached, when offline) hub name
    folder = Path(resolve_encoder(spec)).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ConfigError(f"--encoder {spec}: not a Hugging Face model folder (no config.json)")
        return folder
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.txt", "*.model", "*.safetensors"]
    try:
        folder = Path(snapshot_download(spec, allow_patterns=patterns))
        if not any((folder / single).is_file() or (folder / index).is_file() for single, index in _WEIGHT_FILES):
            folder = Path(snapshot_download(spec, allow_patterns=[*patterns, "pytorch_model*.bin"]))
    except Exception as err:  # offline and not cached, no such repository, no network: one line
        raise ConfigError(f"--encoder {spec}: could not be found locally or on the hub ({err})") from None
    return folder


def read_weights(folder: Path, spec: str) -> tuple[dict[str, Tensor], str]:
    """All tensors of the folder's PyTorch checkpoint (single or sharded file), and the file they came from."""
    from safetensors.torch import load_file

    for single, index in _WEIGHT_FILES:
        if (folder / single).is_file():
            files = [folder / single]
        elif (folder / index).is_file():
            files = sorted({folder / name for name in json.loads((folder / index).read_text())["weight_map"].values()})
        else:
            continue
        state: dict[str, Tensor] = {}
        for file in files:
            state.update(load_file(file) if file.suffix == ".safetensors"
                         else torch.load(file, map_location="cpu", weights_only=True))
        return state, files[0].name if len(files) == 1 else index
    raise ConfigError(f"--encoder {spec}: no PyTorch weights in {folder} (model.safetensors or pytorch_model.bin)")


def read_deepen_record(folder: str | Path) -> dict[str, Any] | None:
    """A deepened checkpoint's ``deepen.json``, or None for any other folder."""
    path = Path(folder) / DEEPEN_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and record.get("format") == FORMAT else None


def check_output(output: str, spec: str, overwrite: bool) -> Path:
    """The output folder may be written: new, empty, or (with ``--overwrite``) an earlier ``hire deepen``
    output; never the source folder, and never a folder holding anything else."""
    from hire.checks import check_output_folder
    from hire.runs import check_not_run_file

    check_output_folder(output, "--output")
    check_not_run_file(output, "--output")
    out = Path(output).expanduser()
    source = Path(spec).expanduser()
    if source.exists() and out.resolve() == source.resolve():
        raise ConfigError(f"--output {output}: the same folder as --encoder; choose another folder")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(f"--output {output}: the folder exists and is not empty; choose another folder "
                              "or add --overwrite to replace an earlier `hire deepen` output")
        if read_deepen_record(out) is None:
            raise ConfigError(f"--output {output}: the folder holds something other than a `hire deepen` output "
                              f"(no {DEEPEN_FILE}); --overwrite replaces only those, choose another folder")
    return out


def _save_tokenizer(folder: Path, out: Path) -> bool:
    """Copy the source's tokenizer (as ``save_pretrained`` writes it); False when the source has none."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError, TypeError):
        return False
    tokenizer.save_pretrained(out)
    return True


def _original(record: dict[str, Any] | None, spec: str, plan: list[int]) -> dict[str, Any]:
    """The plan relative to the first, never-deepened source (a deepened model deepened again)."""
    if record is None:
        return {"source": spec, "plan": plan}
    return {"source": record["original"]["source"], "plan": [record["original"]["plan"][i] for i in plan]}


def _usual_permissions(folder: Path) -> None:
    """What an ordinary ``mkdir`` and ``open`` would have given (temporary names are created owner-only)."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for file in folder.iterdir():
        file.chmod(0o666 & ~umask)


def _replace_folder(staged: Path, out: Path) -> None:
    """Move the complete ``staged`` folder to ``out``, replacing an earlier output only once it is whole."""
    _usual_permissions(staged)
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        os.replace(out, old / out.name)
    os.replace(staged, out)
    if old is not None:
        shutil.rmtree(old)


def deepen_checkpoint(spec: str, output: str, duplicate: list[int] | None = None, layers: list[int] | None = None,
                      duplicate_all: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Write the deepened checkpoint of ``spec`` to ``output``; return its ``deepen.json`` record.

    The folder is assembled under a temporary name beside ``output`` and renamed into place when whole,
    so an interrupted command leaves no half-written model.
    """
    out = check_output(output, spec, overwrite)
    folder = source_folder(spec)
    config = json.loads((folder / "config.json").read_text())
    if "encoder_config" in config and "head" in config:
        raise ConfigError(f"--encoder {spec}: a saved hire model (encoder + head); deepen a pre-trained encoder "
                          "and fine-tune the deeper one")
    check_family(config.get("model_type"), f"--encoder {spec}")
    num_layers = int(config["num_hidden_layers"])
    plan = build_plan(num_layers, duplicate, layers, duplicate_all)
    state, weights_file = read_weights(folder, spec)
    deeper = deepen_state_dict(state, plan, num_layers)
    record = {"format": FORMAT, "source": spec, "source_path": str(folder.resolve()),
              "model_type": config["model_type"], "handling": FAMILIES[config["model_type"]],
              "source_layers": num_layers, "num_hidden_layers": len(plan), "plan": plan,
              "duplicate": repeats(plan), "asked": _asked(duplicate, layers, duplicate_all),
              "description": describe_plan(plan, num_layers), "weights_from": weights_file,
              "original": _original(read_deepen_record(folder), spec, plan)}
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        from safetensors.torch import save_file

        save_file(deeper, staged / "model.safetensors", metadata={"format": "pt"})
        (staged / "config.json").write_text(json.dumps({**config, "num_hidden_layers": len(plan)}, indent=2) + "\n")
        record["tokenizer"] = _save_tokenizer(folder, staged)
        (staged / DEEPEN_FILE).write_text(json.dumps(record, indent=2) + "\n")
        _replace_folder(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return record


def _asked(duplicate: list[int] | None, layers: list[int] | None, duplicate_all: bool) -> str:
    if layers is not None:
        return f"--layers {','.join(map(str, layers))}"
    return "--duplicate all" if duplicate_all else f"--duplicate {','.join(map(str, duplicate or []))}"
