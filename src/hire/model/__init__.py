"""The modelling code: encoder + head + output layer (eq. 8-9) + loss (eq. 10-11), a ``transformers`` model of type
``"hire"``, and everything a saved model folder needs to run.

``build_model("all-MiniLM-L6-v2", head="hire", num_labels=2)`` makes one. :class:`HireConfig` and
:class:`HireModel` are a ``PretrainedConfig`` and a ``PreTrainedModel``, registered with ``AutoConfig`` and
``AutoModelForSequenceClassification``, so a saved folder (``model.save_pretrained(dir, tokenizer)``: config,
weights, tokenizer, model card) loads with ``HireModel.from_pretrained(dir)``, with
``AutoModelForSequenceClassification.from_pretrained(dir)`` and with ``pipeline("text-classification", dir)``,
all giving identical outputs. Saved ``with_code=True``, the folder also carries this package's code (see
:mod:`hire.model.sharing`) and loads with ``trust_remote_code=True`` where hire is not installed.

The package imports nothing else of hire (an import-linter contract in ``pyproject.toml`` holds it to that), so
that it can travel with a model. One module a job:

- :mod:`~hire.model.config`: :class:`HireConfig` and the checks of a label set; :mod:`~hire.model.batch`: what a
  ``forward`` checks of its batch;
- :mod:`~hire.model.sequence` (:class:`HireModel`, the base class: a label or score per sentence or pair),
  :mod:`~hire.model.tokens` (:class:`HireForTokenClassification`), :mod:`~hire.model.ranking`
  (:class:`HireForRanking`, a cross-encoder), :mod:`~hire.model.biencoder` (:class:`BiEncoder`),
  :mod:`~hire.model.spans` (:class:`HireForQuestionAnswering`) and :mod:`~hire.model.choice`
  (:class:`HireForMultipleChoice`); each model
  class registers the ``task_type`` it serves (:mod:`~hire.model.registry`), and :mod:`~hire.model.auto` is the
  one place that goes from a task type or a saved folder to its class (:func:`build_model`, :func:`load_model`);
- :mod:`~hire.model.losses`, :mod:`~hire.model.heads`, :mod:`~hire.model.recurrent`, :mod:`~hire.model.encoder`,
  :mod:`~hire.model.tokenizer`, :mod:`~hire.model.sharing` (the model card and the code export) and
  :mod:`~hire.model.optiontypes` (the types of the heads' options).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BI_HEADS",
    "BI_RANK_LOSSES",
    "BI_SCALE",
    "CONFIG_NAME",
    "RANK_LOSSES",
    "SUBWORDS",
    "TOKENIZER_FILES",
    "BiEncoder",
    "BiEncoderConfig",
    "BiEncoderOutput",
    "ChoiceOutput",
    "HireConfig",
    "HireForMultipleChoice",
    "HireForQuestionAnswering",
    "HireForRanking",
    "HireForTokenClassification",
    "HireModel",
    "ModelOutput",
    "OutputLayer",
    "SpanOutput",
    "TokenOutput",
    "build_bi_encoder",
    "build_model",
    "check_batch",
    "check_label_names",
    "check_num_labels",
    "check_rank_loss",
    "in_batch_negatives_loss",
    "is_bi_encoder",
    "load_config",
    "load_model",
    "load_ranker",
    "load_tokenizer",
    "model_class_for",
    "model_task_types",
    "pairwise_hinge_loss",
    "pointwise_loss",
    "register_model_class",
    "scaled_cosine",
    "word_means",
]


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: ``hire.model.optiontypes`` and ``hire.model.sharing`` (what the
    options and the lab need) import without torch."""
    if name in __all__:
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load() -> None:
    """Import the names of :data:`__all__` into this module (written out, so that an exported copy's flat modules
    are found: :func:`hire.model.sharing.flat_imports`). It names every module of the package, those whose names it
    does not need too: transformers 4 copies into its module cache only the modules that an exported folder's
    ``modeling_hire.py`` imports itself (5 follows the imports), and loads them all (a test in
    tests/core/model/test_transformers.py checks that every exported module is named here)."""
    from hire.model.auto import build_model, load_model, load_ranker
    from hire.model.batch import check_batch
    from hire.model.biencoder import (
        BI_HEADS,
        BI_RANK_LOSSES,
        BiEncoder,
        BiEncoderConfig,
        BiEncoderOutput,
        build_bi_encoder,
        is_bi_encoder,
    )
    from hire.model.choice import ChoiceOutput, HireForMultipleChoice
    from hire.model.config import CONFIG_NAME, SUBWORDS, HireConfig, check_label_names, check_num_labels, load_config
    from hire.model.encoder import resolve_encoder
    from hire.model.heads import HIRE
    from hire.model.heads.base import Head
    from hire.model.heads.baselines import LastLayer
    from hire.model.heads.hire import hire_lite
    from hire.model.losses import (
        BI_SCALE,
        RANK_LOSSES,
        check_rank_loss,
        in_batch_negatives_loss,
        pairwise_hinge_loss,
        pointwise_loss,
        scaled_cosine,
    )
    from hire.model.optiontypes import Range
    from hire.model.ranking import HireForRanking
    from hire.model.recurrent import gru_recurrence
    from hire.model.registry import model_class_for, model_task_types, register_model_class
    from hire.model.sequence import HireModel, ModelOutput, OutputLayer
    from hire.model.sharing import CODE_FILES
    from hire.model.spans import HireForQuestionAnswering, SpanOutput
    from hire.model.tokenizer import TOKENIZER_FILES, load_tokenizer
    from hire.model.tokens import HireForTokenClassification, TokenOutput, word_means
    globals().update({name: value for name, value in locals().items() if name in __all__})


def register_with_transformers() -> None:
    """``AutoConfig`` and the ``AutoModelFor...`` classes know the model type "hire" (the installed library, once
    transformers' Auto classes load: :mod:`hire`; a saved folder's copy is found through its ``auto_map``)."""
    from transformers import (
        AutoConfig,
        AutoModelForMultipleChoice,
        AutoModelForQuestionAnswering,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    _load()
    HireConfig, HireModel = globals()["HireConfig"], globals()["HireModel"]
    HireForTokenClassification = globals()["HireForTokenClassification"]
    HireForQuestionAnswering, HireForMultipleChoice = (globals()["HireForQuestionAnswering"],
                                                       globals()["HireForMultipleChoice"])
    AutoConfig.register(HireConfig.model_type, HireConfig, exist_ok=True)
    AutoModelForSequenceClassification.register(HireConfig, HireModel, exist_ok=True)
    AutoModelForTokenClassification.register(HireConfig, HireForTokenClassification, exist_ok=True)
    AutoModelForQuestionAnswering.register(HireConfig, HireForQuestionAnswering, exist_ok=True)
    AutoModelForMultipleChoice.register(HireConfig, HireForMultipleChoice, exist_ok=True)
