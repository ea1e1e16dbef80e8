"""From a saved folder or a task type to its model class: the one place that dispatches (as ``AutoModelFor...``
does), so that no model class knows its siblings."""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import PretrainedConfig

from hire.model.biencoder import BiEncoder, is_bi_encoder
from hire.model.choice import HireForMultipleChoice  # noqa: F401 (hire's own model classes, registered on import)
from hire.model.config import HireConfig, check_label_names, check_num_labels
from hire.model.encoder import Encoder
from hire.model.heads import check_head_options
from hire.model.ranking import HireForRanking  # noqa: F401 (hire's own model classes, registered on import)
from hire.model.registry import model_class_for
from hire.model.sequence import HireModel
from hire.model.spans import HireForQuestionAnswering  # noqa: F401
from hire.model.tokens import HireForTokenClassification  # noqa: F401


def build_model(encoder: str | os.PathLike[str] | PretrainedConfig, head: str = "hire", num_labels: int = 2,
                head_options: Mapping[str, Any] | None = None, label_names: Sequence[str] | None = None,
                classifier_dropout: float = 0.1, freeze_encoder: bool = False, task_type: str = "sequence",
                subword: str = "first", task_options: Mapping[str, Any] | None = None) -> HireModel:
    """The documented entry point: an encoder (hub name, local path, or a ``transformers`` config for
    random weights), a head name (``hire.model.heads.head_names()``) and the number of labels (1 = regression).
    ``head_options`` are the head's own (``hire.model.heads.head_options(head)``); ``label_names`` the class names in
    logit order; ``freeze_encoder``: train only the head and output layer on the encoder's fixed hidden states;
    ``task_type`` the kind of model (:func:`hire.model.registry.model_task_types`: ``"token"``, with ``subword``,
    is a tagger, :class:`HireForTokenClassification`), of the class its task type registered; ``task_options``
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
    return model_class_for(config.task_type)(config, enc)  # the class checks its configuration first


def load_model(directory: str | Path) -> HireModel | BiEncoder:
    """Any saved hire model, in eval mode, of its own class: a :class:`BiEncoder` where the folder holds one (its
    ``bi_encoder.json``), else the class its configuration's task type registered."""
    if is_bi_encoder(directory):
        return BiEncoder.from_pretrained(directory)
    return HireModel.from_pretrained(directory)  # dispatches on the configuration's task type


load_ranker = load_model  # the name hire 0.1 gave it
