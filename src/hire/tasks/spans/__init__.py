"""Extractive question answering (BERT §4.2, SQuAD): an answer is a span of the passage, found from a start and
an end score at every token. SQuAD v1.1 and v2.0 by name (``--data.task squad``, ``squad_v2``) or a user's files
in SQuAD's JSON or JSON lines (``--data.task custom --data.format squad``). A passage longer than the encoder's
window is read in overlapping windows (``--data.max_length``, ``--data.doc_stride``).

The kind (its options and checks) is here; what training and evaluation ask of it is
:mod:`hire.tasks.spans.tasktype`, how ``hire predict`` reads a file of questions :mod:`hire.tasks.spans.predict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hire.checks import ConfigError
from hire.optionfields import AtLeast1, option_field
from hire.tasktype import TaskKind, register_task_kind

if TYPE_CHECKING:
    from hire.config import DataConfig, RunConfig

SPAN_MAX_LENGTH = 384  # BERT's window for SQuAD: --data.max_length where a span task leaves it out
SPAN_TASKS = {"squad": ("SQuAD-v1.1", "1.1"), "squad_v2": ("SQuAD-v2.0", "2.0")}  # name -> (run name, version)


@dataclass
class SpanDataOptions:
    """How a passage is cut into windows and how long an answer may be."""

    doc_stride: AtLeast1 = option_field(128, "span tasks: tokens that two windows of a long passage overlap by "
                                        "(BERT: 128)")
    max_answer_length: AtLeast1 = option_field(30, "span tasks: the longest answer predicted, in tokens (BERT: 30)")


class SpanKind(TaskKind):
    name = "span"
    order = 3
    implementation = "hire.tasks.spans.tasktype:SPANS"
    predictor = "hire.tasks.spans.predict"
    data_options = SpanDataOptions
    formats = MappingProxyType({"squad": "squad (SQuAD's JSON, or JSON lines of id, context, question and answers: "
                                         "a span of the passage per question)"})
    predict_formats = ("squad",)
    named_help = "squad or squad_v2 (extractive question answering)"
    data_dir_help = "SQuAD's (default: $HIRE_SQUAD_DIR, else ../shared/data/squad)"
    only_for = "span tasks (--data.task squad or squad_v2, or custom files in --data.format squad)"

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        key = name.lower().replace("-", "_").replace(".", "")
        if key in ("squad", "squad_v11", "squadv11", "squad_v1"):
            return "squad", ("f1",)
        if key in ("squad_v2", "squadv2", "squad_v20", "squadv20"):
            return "squad_v2", ("best_f1",)
        return None

    def handles(self, cfg: DataConfig) -> bool:
        if cfg.task.lower() == "custom":
            return cfg.format in self.formats
        return cfg.task.lower() in SPAN_TASKS

    def task_names(self) -> tuple[str, ...]:
        return tuple(SPAN_TASKS)

    def check_run(self, cfg: RunConfig, owner: bool) -> None:
        """A span task's window is BERT's 384 tokens where ``--data.max_length`` is left out, and two windows overlap
        by ``--data.doc_stride`` (left out: 128, or a third of a shorter window), fewer tokens than a window holds."""
        if not owner:
            return
        if not cfg.is_given("data.max_length"):
            cfg.data.max_length = SPAN_MAX_LENGTH
        if not cfg.is_given("data.doc_stride"):  # BERT's 128 of 384: a third of a shorter window
            cfg.data.doc_stride = min(cfg.data.doc_stride, max(1, cfg.data.max_length // 3))
        if cfg.data.doc_stride >= cfg.data.max_length:
            raise ConfigError(f"--data.doc_stride {cfg.data.doc_stride}: two windows must overlap by fewer tokens "
                              f"than a window holds (--data.max_length {cfg.data.max_length})")

    def describe(self) -> str:
        return "answers questions with a span of the passage"

    def evaluation_data(self, task: str, model: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The SQuAD version the model's run trained on, read with its windows."""
        options = config.get("task_options") or {}
        name = self.named_task(task)[0]  # type: ignore[index]  # the kind was asked for by this name
        return SPAN_TASKS[name][0], {"task": name, "doc_stride": options.get("doc_stride", 128),
                                     "max_answer_length": options.get("max_answer_length", 30)}


SPAN_KIND = register_task_kind(SpanKind())
