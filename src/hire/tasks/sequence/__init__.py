"""Sequence tasks: one label (or real-valued score) per sentence or sentence pair: GLUE by name, or a user's own
tables (``--data.task custom``, ``--data.format table``). The kind (its options and checks) is here; what training
and prediction ask of it is :mod:`hire.tasks.sequence.tasktype`."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hire.checks import ConfigError, check_text_columns
from hire.optionfields import option_field
from hire.tasktype import TaskKind, register_task_kind, task_kinds

if TYPE_CHECKING:
    from hire.config import DataConfig


@dataclass
class SequenceDataOptions:
    """The columns of a custom table (a label per row)."""

    text_columns: list[str] = option_field(["sentence"], "custom task: one or two text column names, comma-separated")
    label_column: str = option_field("label", "custom task: the label column")
    regression: bool = option_field(False, "custom task: the label is a real number (else: classes)")


class SequenceKind(TaskKind):
    name = "sequence"
    order = 0
    implementation = "hire.tasks.sequence.tasktype:SEQUENCE"
    data_options = SequenceDataOptions
    formats = MappingProxyType({"table": "table (.csv/.tsv/.jsonl rows, a label per row)"})
    predict_formats = ("table",)
    predictor = "hire.tasks.sequence.predict"
    named_help = "GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI)"
    data_dir_help = "GLUE's (one sub-folder per task; default: $HIRE_GLUE_DIR, else ../shared/data/glue beside the " \
                    "repository)"
    only_for = "--data.format table (a label per row)"
    custom_only = ("text_columns", "label_column", "regression")
    options_first = True  # a table's columns stand beside the files they describe

    def handles(self, cfg: DataConfig) -> bool:
        return True  # every task name no other kind claims (GLUE's, or an unknown one it refuses), custom tables

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        from hire.data.examples import DataError
        from hire.data.glue import get_task

        try:
            spec = get_task(name)
        except DataError:
            return None
        return spec.name, spec.metrics

    def task_names(self) -> tuple[str, ...]:
        from hire.data.glue import GLUE_TASKS

        return tuple(GLUE_TASKS)

    def check_data(self, cfg: DataConfig) -> None:
        from hire.data.examples import DataError
        from hire.data.glue import get_task

        if cfg.task.lower() == "custom":
            check_text_columns(cfg.text_columns, cfg.label_column, "--data.text_columns", "--data.label_column")
            return
        try:
            get_task(cfg.task)
        except DataError as err:
            others = [n for kind in task_kinds().values() if kind is not self for n in kind.task_names()]
            raise ConfigError(f"--data.task: {err}, {', '.join(others)}, or 'custom' for your own files") from None

    def describe(self) -> str:
        return "labels sentences"

    def evaluation_data(self, task: str, model: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A GLUE task whose labels are the model's, with as many text columns as it was trained on."""
        from hire.data.examples import DataError
        from hire.data.glue import get_task, task_text_columns
        from hire.prediction import texts
        from hire.saved_model import saved_label_names, trained_text_columns

        try:
            spec = get_task(task)
        except DataError as err:
            others = [n for kind in task_kinds().values() if kind is not self for n in kind.task_names()]
            raise ConfigError(f"--task: {err}, {' or '.join(others)}") from None
        if saved_label_names(config) != (list(spec.labels) if spec.labels else None):
            raise ConfigError(f"--model {model} predicts labels {saved_label_names(config)}, "
                              f"but task {spec.name} has {list(spec.labels) if spec.labels else 'real-valued scores'}")
        trained, wanted = trained_text_columns(model, config), task_text_columns(spec)
        if trained is not None and len(trained) != len(wanted):
            raise ConfigError(f"--task {spec.name}: the task has {texts(wanted)}, but --model {model} "
                              f"was trained on {texts(trained)}")
        return spec.name, {"task": spec.name}


SEQUENCE_KIND = register_task_kind(SequenceKind())
