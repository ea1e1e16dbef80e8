"""Task types: where a kind of task (a label per sentence, a tag per word, ...) plugs into training, evaluation
and prediction. :mod:`hire.tasktypes.base` holds the seam; each other module is one type."""

from hire.tasktypes.base import (
    Predictions,
    TaskData,
    TaskType,
    load_task,
    named_task,
    register_task_type,
    task_type_for,
    task_types,
)
from hire.tasktypes.sequence import SEQUENCE, SequenceTasks
from hire.tasktypes.tokens import TOKEN, TokenTasks

# isort: split
# Registered after the token type, so asked before it: the token type claims every custom format but table.
from hire.tasktypes.ranking import RANKING, RankingTasks

__all__ = [
    "RANKING",
    "SEQUENCE",
    "TOKEN",
    "Predictions",
    "RankingTasks",
    "SequenceTasks",
    "TaskData",
    "TaskType",
    "TokenTasks",
    "load_task",
    "named_task",
    "register_task_type",
    "task_type_for",
    "task_types",
]
