"""Data: the shared example record, GLUE task specs and readers, and readers for users' own tables."""

from hire.data.examples import DataError, Example
from hire.data.files import infer_label_names, read_table
from hire.data.glue import GLUE_TASKS, TaskSpec, default_glue_dir, get_task, read_glue_split, task_text_columns

__all__ = [
    "GLUE_TASKS",
    "DataError",
    "Example",
    "TaskSpec",
    "default_glue_dir",
    "get_task",
    "infer_label_names",
    "read_glue_split",
    "read_table",
    "task_text_columns",
]
