"""What a saved model folder says about itself, read without loading the model (nor torch).

The commands check every option against the model's ``config.json`` (its labels, text columns, encoder; each
field's type checked) before loading anything, and that the folder holds whole weights (the safetensors headers,
:func:`check_weights`) and a tokenizer (:func:`check_model_folder`); a run's ``best/`` also has the run folder
beside it (``config.yaml``, ``metrics.json``, ``predictions/``), from which :func:`run_card` rebuilds its model
card. ``config.json`` is a ``transformers`` config of model type ``"hire"``. A file that is not what hire writes
is a ConfigError or DataError naming it.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import yaml

from hire.checks import ConfigError, check_saved_model, is_run_folder, read_yaml
from hire.data.examples import DataError
from hire.data.glue import task_text_columns
from hire.tasktype import task_kinds


def saved_model_config(model_dir: str | Path, option: str = "--model") -> dict[str, Any]:
    """The ``config.json`` of a saved model, as a dict, with the type of every field the commands read checked
    (:func:`check_saved_config`)."""
    path = check_saved_model(model_dir, option) / "config.json"
    for kind in task_kinds().values():  # a kind's model saved in a layout of its own (a bi-encoder: an encoder)
        what = kind.own_layout(path.parent)
        if what is not None:
            raise ConfigError(f"{option} {model_dir}: {what}; start a new model from it with --model.encoder "
                              f"{model_dir}")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        config = None
    if not isinstance(config, dict):
        raise ConfigError(f"{option} {model_dir}: not a saved hire model ({path} is not a JSON object)")
    check_saved_config(config, path)
    return config


def check_model_folder(model_dir: str | Path, option: str = "--model") -> dict[str, Any]:
    """What every command on a saved model needs, checked before anything loads or is written: its
    ``config.json`` (:func:`saved_model_config`), whole weights (:func:`check_weights`) and a tokenizer
    (``tokenizer_config.json``, which ``save_pretrained(folder, tokenizer)`` writes). Returns the config."""
    folder = Path(model_dir).expanduser()
    own = next((kind for kind in task_kinds().values() if kind.own_layout(folder) is not None), None)
    config = own.read_own_layout(model_dir, option) if own is not None else saved_model_config(model_dir, option)
    check_weights(model_dir, option)
    if not (Path(model_dir).expanduser() / "tokenizer_config.json").is_file():
        raise ConfigError(f"{option} {model_dir}: no tokenizer files in this folder (no tokenizer_config.json); "
                          "save the model with its tokenizer: model.save_pretrained(folder, tokenizer)")
    return config


def _model_types() -> list[str]:
    """The ``task_type`` values of the kinds of task (hire.tasktype.task_kinds)."""
    return [kind.model_type for kind in task_kinds().values()]


def _either(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value: Any, low: int, high: int | None = None) -> bool:
    return (isinstance(value, list) and low <= len(value) <= (high or len(value))
            and all(isinstance(v, str) and v.strip() for v in value))


# The fields of config.json that hire reads before loading the model: (is the value right, what it must be).
_FIELDS: dict[str, tuple[Any, str]] = {
    "model_type": (lambda v: isinstance(v, str), "a string"),
    "encoder": (lambda v: isinstance(v, str), "a string (the encoder's name or path)"),
    "head": (lambda v: isinstance(v, str), "a string (the head's name)"),
    "head_options": (lambda v: v is None or isinstance(v, dict), "a JSON object"),
    "encoder_config": (lambda v: isinstance(v, dict) and isinstance(v.get("model_type"), str),
                       "a JSON object with the encoder's model_type"),
    "label_names": (lambda v: v is None or _strings(v, 2), "null or a list of at least 2 class names"),
    "text_columns": (lambda v: v is None or _strings(v, 1, 2), "null or a list of 1 or 2 column names"),
    "id2label": (lambda v: isinstance(v, dict) and len(v) >= 1, "a JSON object of label names"),
    "num_labels": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "classifier_dropout": (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
    "freeze_encoder": (lambda v: isinstance(v, bool), "true or false"),
    "task_type": (lambda v: v in _model_types(), _either([f'"{t}"' for t in _model_types()])),
    "subword": (lambda v: v in ("first", "last", "mean"), '"first", "last" or "mean"'),
    "task_options": (lambda v: v is None or isinstance(v, dict), "a JSON object"),
}


def check_saved_config(config: dict[str, Any], path: str | Path) -> None:
    """The type of each field of a saved model's ``config.json`` (``path``) that hire reads, and that its labels
    agree (``label_names``, ``id2label``, ``num_labels``): a :class:`ConfigError` naming the file and the field,
    instead of a traceback where the value is used."""
    for key, (ok, what) in _FIELDS.items():
        if key in config and not ok(config[key]):
            raise ConfigError(f"{path}: {key} must be {what}, not {json.dumps(config[key])[:80]}")
    counts = {key: n for key, n in (("label_names", len(config.get("label_names") or [])),
                                    ("id2label", len(config.get("id2label") or {})),
                                    ("num_labels", config.get("num_labels", 0))) if n}
    if len(set(counts.values())) > 1:
        raise ConfigError(f"{path}: the labels disagree: " + ", ".join(f"{n} in {key}" for key, n in counts.items()))


def check_weights(model_dir: str | Path, option: str = "--model") -> dict[str, list[int]] | None:
    """The model's weights are there and whole, read from the safetensors headers alone (:func:`safetensors_shapes`;
    a ``pytorch_model.bin`` must be a whole zip archive, torch's format). Returns each tensor's shape by name
    (None for a ``pytorch_model.bin``)."""
    folder = Path(model_dir).expanduser()
    index = folder / "model.safetensors.index.json"
    if (folder / "model.safetensors").is_file():
        files = [folder / "model.safetensors"]
    elif index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            files = [folder / name for name in sorted(set(weight_map.values()))]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
            raise ConfigError(f"{option} {model_dir}: {index} is not a safetensors index (a JSON object with "
                              "a weight_map)") from None
    elif (folder / "pytorch_model.bin").is_file():
        if not zipfile.is_zipfile(folder / "pytorch_model.bin"):
            raise ConfigError(f"{option} {model_dir}: {folder / 'pytorch_model.bin'} is truncated or not a "
                              "PyTorch weights file")
        return None
    else:
        raise ConfigError(f"{option} {model_dir}: the model has no weights (no model.safetensors)")
    shapes: dict[str, list[int]] = {}
    for file in files:
        try:
            shapes.update(safetensors_shapes(file))
        except ValueError as err:
            raise ConfigError(f"{option} {model_dir}: {file} is truncated or not a safetensors file ({err})") \
                from None
    return shapes


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """The shape of each tensor of a safetensors file, read from its header alone; a ValueError saying what is
    wrong with a file that is cut short or not one.

    The format: an 8-byte little-endian header length N, N bytes of JSON (tensor name -> dtype, shape and
    ``data_offsets`` [begin, end] into the data after the header; an optional ``__metadata__``), then the
    data, which must end exactly where the last tensor ends.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError(f"{size} bytes, shorter than the header's length")
            length = int.from_bytes(head, "little")
            if length > size - 8:
                raise ValueError(f"a header of {length} bytes in a file of {size}")
            header = json.loads(f.read(length).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("its header is not JSON") from None
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    end, shapes = 0, {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)
                and 0 <= offsets[0] <= offsets[1] and isinstance(shape, list) and all(_is_int(d) for d in shape)):
            raise ValueError(f"tensor {name!r} has no valid shape and data_offsets")
        end, shapes[name] = max(end, offsets[1]), shape
    data = size - 8 - length
    if data != end:
        raise ValueError(f"the header describes {end} bytes of tensors, the file holds {data}")
    return shapes


def saved_num_labels(config: dict[str, Any]) -> int:
    """How many outputs the model has (1 = regression)."""
    if isinstance(config.get("id2label"), dict):
        return len(config["id2label"])
    return int(config.get("num_labels", 2))


def saved_label_names(config: dict[str, Any]) -> list[str] | None:
    """The class names in logit order, as spelled in the training data; None for regression or when unknown."""
    return list(config["label_names"]) if config.get("label_names") else None


def trained_text_columns(model_dir: str | Path, config: dict[str, Any]) -> list[str] | None:
    """The text columns a saved model was trained on; None where that is not known.

    From its ``config.json`` where training recorded them (``text_columns``), else from the run folder's
    ``config.yaml`` beside it (a run's ``best/``): the custom task's ``--data.text_columns`` or the GLUE
    task's columns. The run's configuration is trusted only if its head is the model's.
    """
    if config.get("text_columns"):
        return list(config["text_columns"])
    try:
        run = _run_config(model_dir)
        data, model = run["data"], run["model"]
        if model["head"] != config.get("head"):
            return None
        if str(data["task"]).lower() == "custom":
            columns = data["text_columns"]
            return list(columns) if isinstance(columns, list) and 1 <= len(columns) <= 2 else None
        return list(task_text_columns(data["task"]))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError, DataError):
        return None


def trained_max_length(model_dir: str | Path, config: dict[str, Any]) -> int | None:
    """The ``--data.max_length`` a run's ``best/`` was trained and scored at, from the run folder's
    ``config.yaml`` beside it (trusted only if its head is the model's); None where that is not known."""
    try:
        run = _run_config(model_dir)
        if run["model"]["head"] != config.get("head"):
            return None
        value = run["data"]["max_length"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def run_card(model_dir: str | Path) -> dict[str, Any]:
    """What the run folder around a run's ``best/`` says of the model: ``task``, ``metrics`` (dev), mean
    ``layer_weights`` over the dev predictions, ``recipe`` (the run's configuration); {} outside a finished run
    (a model folder beside no ``metrics.json``, or not a run's ``best/``). A run file that is not what training
    writes is a :class:`DataError` naming the file (and line), not a card with a hole or a traceback."""
    given = Path(model_dir).expanduser()
    model = given.resolve()
    run = given.parent if given.name and given.parent.resolve() == model.parent else model.parent  # as given
    if not (run / "metrics.json").is_file() or not (is_run_folder(run) or model.name == "best"):
        return {}
    final = read_run_metrics(run / "metrics.json")
    card: dict[str, Any] = {"task": final["task"], "metrics": final["dev"]}
    if (run / "config.yaml").is_file():
        recipe = read_yaml(run / "config.yaml", str(run / "config.yaml"))
        if not isinstance(recipe, dict):
            raise DataError(f"{run / 'config.yaml'}: not a run configuration (a mapping of sections)")
        card["recipe"] = recipe
    weights = [w for split in card["metrics"] for w in _layer_weights(run / "predictions" / f"{split}.jsonl")]
    if weights and len({len(w) for w in weights}) == 1:
        card["layer_weights"] = [sum(column) / len(weights) for column in zip(*weights, strict=True)]
    return card


def _layer_weights(path: Path) -> list[list[float]]:
    """Each example's layer weights in a predictions file (none where it has none, or there is no file)."""
    if not path.is_file():
        return []
    weights = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}, line {number}: not valid JSON ({err.msg}, column {err.colno})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}, line {number}: not a JSON object (one prediction per line)")
        value = row.get("layer_weights")
        if value is None:
            continue
        if not (isinstance(value, list) and value
                and all(isinstance(w, int | float) and not isinstance(w, bool) for w in value)):
            raise DataError(f"{path}, line {number}: layer_weights must be a list of numbers, not "
                            f"{json.dumps(value)[:80]}")
        weights.append(value)
    return weights


def _run_config(model_dir: str | Path) -> Any:
    from hire.checks import real_path

    return yaml.safe_load((Path(real_path(model_dir)).parent / "config.yaml").read_text())


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# What a finished run's metrics.json holds, as far as the tables read it: key -> (is the value right, in words).
_FINAL: dict[str, tuple[Any, str]] = {
    "task": (lambda v: isinstance(v, str), "a string"),
    "head": (lambda v: isinstance(v, str), "a string"),
    "dev": (lambda v: isinstance(v, dict) and v and all(
        isinstance(m, dict) and m and all(_number(x) for x in m.values()) for m in v.values()),
        "a JSON object of dev splits, each of metric -> number"),
    "score": (_number, "a number"),
    "steps": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "train_seconds": (_number, "a number"),
    "mixed_precision": (lambda v: isinstance(v, str), "a string"),
}


def read_run_metrics(path: Path) -> dict[str, Any]:
    """A finished run's ``metrics.json`` (the best model's final scores, as ``hire train`` writes it), checked:
    a :class:`DataError` naming the file and what is wrong (not JSON, cut short, not an object, a key missing
    or of the wrong type), never a traceback where the table reads it."""
    try:
        final = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text, not the metrics.json that hire train writes") from None
    except json.JSONDecodeError as err:
        ends = err.pos >= len(err.doc.rstrip()) or err.msg.startswith("Unterminated string")
        cut = " (cut short?)" if ends else ""
        raise DataError(f"{path}: not valid JSON{cut}: {err.msg} at line {err.lineno}, column {err.colno}") from None
    if not isinstance(final, dict):
        kind = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}.get(type(final), "a number")
        raise DataError(f"{path}: {kind}, not the JSON object of final scores that hire train writes")
    missing = [key for key in _FINAL if key not in final]
    if missing:
        raise DataError(f"{path}: not the metrics.json that hire train writes (no {', '.join(missing)})")
    for key, (ok, what) in _FINAL.items():
        if not ok(final[key]):
            raise DataError(f"{path}: {key} must be {what}, not {json.dumps(final[key])[:80]}")
    return final
