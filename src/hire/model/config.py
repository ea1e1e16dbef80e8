"""The configuration of a hire model (:class:`HireConfig`, saved as ``config.json``), the checks of its label set,
and :func:`load_config` for a saved folder."""

from __future__ import annotations

import json
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import PretrainedConfig

CONFIG_NAME = "config.json"


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
        if not isinstance(task_type, str) or not task_type:
            raise ValueError(f"task_type must be the name of a kind of model (hire.model.model_task_types()), not "
                             f"{task_type!r}")
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
            new_label_set = label_names is not None and count_labels(label_names) != kwargs["num_labels"]
            label_names = None if new_label_set else label_names
        super().__init__(**kwargs)  # num_labels, id2label, label2id, problem_type, ...
        if label_names is not None:
            self.set_labels(count_labels(label_names), label_names)
        else:
            self.label_names = None
            if self.problem_type is None or new_label_set:
                self.problem_type = "regression" if self.num_labels == 1 else "single_label_classification"
        check_num_labels(self.num_labels)  # e.g. a config.json whose id2label is empty

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


def count_labels(label_names: Any) -> int:
    return len(label_names) if isinstance(label_names, Sequence) else 0
