"""Multiple choice (BERT §4.4, SWAG): a context and its candidate answers, each (context, choice) pair read together
and scored once by the head and output layer, a softmax across a question's choices. CODAH and DREAM by name
(``--data.task codah``, ``dream``) or a user's files (``--data.task custom --data.format choices``: JSON lines,
SWAG's CSV, CODAH's TSV or DREAM's JSON). Any number of choices per question.

The kind (its options and checks) is here; what training and evaluation ask of it is
:mod:`hire.tasks.choice.tasktype`, how ``hire predict`` reads a file of questions :mod:`hire.tasks.choice.predict`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hire.tasktype import TaskKind, register_task_kind

if TYPE_CHECKING:
    from hire.config import DataConfig

CHOICE_TASKS = {"codah": "CODAH", "dream": "DREAM"}  # name -> the name its runs record


class ChoiceKind(TaskKind):
    name = "choice"
    order = 4
    implementation = "hire.tasks.choice.tasktype:CHOICES"
    predictor = "hire.tasks.choice.predict"
    formats = MappingProxyType({"choices": "choices (JSON lines of context and/or question, choices and label; "
                                           "SWAG's CSV; CODAH's TSV; DREAM's JSON: one of several answers per "
                                           "question)"})
    predict_formats = ("choices",)
    named_help = "codah or dream (multiple choice)"
    data_dir_help = "CODAH's and DREAM's (default: $HIRE_CODAH_DIR / $HIRE_DREAM_DIR, else ../shared/data/codah " \
                    "and ../shared/data/dream)"
    only_for = "multiple-choice tasks (--data.task codah or dream, or custom files in --data.format choices)"

    def handles(self, cfg: DataConfig) -> bool:
        if cfg.task.lower() == "custom":
            return cfg.format in self.formats
        return cfg.task.lower() in CHOICE_TASKS

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        return (name.lower(), ("accuracy",)) if name.lower() in CHOICE_TASKS else None

    def task_names(self) -> tuple[str, ...]:
        return tuple(CHOICE_TASKS)

    def describe(self) -> str:
        return "chooses one of several answers"

    def evaluation_data(self, task: str, model: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return CHOICE_TASKS[task.lower()], {"task": task.lower()}


CHOICE_KIND = register_task_kind(ChoiceKind())
