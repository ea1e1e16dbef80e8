"""What a saved model folder says about itself, read without loading the model (nor torch).

The commands check every option against the model's ``config.json`` (its labels, text columns, encoder)
before loading anything; a run's ``best/`` also has the run folder beside it (``config.yaml``, ``metrics.json``,
``predictions/``), from which :func:`run_card` rebuilds its model card. Both of hire's ``config.json`` formats are
read: the current one (a ``transformers`` config of model type ``"hire"``) and the first one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from hire.checks import check_saved_model
from hire.config import ConfigError
from hire.data.examples import DataError
from hire.data.glue import task_text_columns


def saved_model_config(model_dir: str | Path, option: str = "--model") -> dict[str, Any]:
    """The ``config.json`` of a saved model, as a dict."""
    path = check_saved_model(model_dir, option) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        config = None
    if not isinstance(config, dict):
        raise ConfigError(f"{option} {model_dir}: not a saved hire model ({path} is not a JSON object)")
    return config


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


def run_card(model_dir: str | Path) -> dict[str, Any]:
    """What the run folder around a run's ``best/`` says of the model: ``task``, ``metrics`` (dev), mean
    ``layer_weights`` over the dev predictions, ``recipe`` (the run's configuration); {} outside a finished run."""
    run = Path(model_dir).expanduser().resolve().parent
    try:
        final = json.loads((run / "metrics.json").read_text())
        card: dict[str, Any] = {"task": final["task"], "metrics": final["dev"], "recipe": _run_config(model_dir)}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError, TypeError, KeyError):
        return {}
    rows = [json.loads(line) for split in card["metrics"] if (run / "predictions" / f"{split}.jsonl").is_file()
            for line in (run / "predictions" / f"{split}.jsonl").read_text().splitlines() if line.strip()]
    weights = [row["layer_weights"] for row in rows if row.get("layer_weights")]
    if weights and len({len(w) for w in weights}) == 1:
        card["layer_weights"] = [sum(column) / len(weights) for column in zip(*weights, strict=True)]
    return card


def _run_config(model_dir: str | Path) -> Any:
    return yaml.safe_load((Path(model_dir).expanduser().resolve().parent / "config.yaml").read_text())
