"""Which model class serves which kind of task: each model module registers its class under the ``task_type`` its
configurations carry (:func:`register_model_class`); :mod:`hire.model.auto` and :class:`hire.model.HireConfig` ask
here, so that no class names another."""

from __future__ import annotations

_CLASSES: dict[str, type] = {}


def register_model_class(task_type: str, model_class: type) -> type:
    """``model_class`` builds and loads the models whose configuration has ``task_type``. hire's own classes register
    when their modules are imported (:mod:`hire.model` imports them all on first use of its names)."""
    _CLASSES[task_type] = model_class
    return model_class


def model_task_types() -> tuple[str, ...]:
    """The task types a model can have, in the order they were registered."""
    return tuple(_CLASSES)


def model_class_for(task_type: str) -> type:
    """The class of a model whose configuration has ``task_type``."""
    if task_type not in _CLASSES:
        raise ValueError(f"task_type must be one of {', '.join(_CLASSES)}, not {task_type!r}")
    return _CLASSES[task_type]
