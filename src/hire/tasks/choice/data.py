"""Reading multiple choice: CODAH's TSV, DREAM's JSON, SWAG's CSV and JSON lines, every question checked, a bad one
a :class:`~hire.data.examples.DataError` naming the file and the question (its line, or its id).

- CODAH (``.tsv``, no header): category, prompt, four endings, the right ending's index.
- DREAM (``.json``): a list of ``[turns, questions, id]``; each question ``{"question", "choice", "answer"}``, the
  answer given as the right choice's text.
- SWAG (``.csv`` with a header): ``sent1``, ``sent2``, ``ending0`` .. ``ending3``, ``label``; a choice is read as
  ``sent2`` followed by the ending, after ``sent1`` (as Hugging Face's ``run_swag``).
- JSON lines (any other suffix): ``{"id", "context", "question", "choices": [...], "label"}``, ``context`` and/or
  ``question``; ``label`` the right choice's index or its text; a line without ``label`` is unlabelled.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hire.data.examples import DataError, MissingData

CHOICE_DIRS = {"codah": ("HIRE_CODAH_DIR", "codah"), "dream": ("HIRE_DREAM_DIR", "dream")}
CHOICE_FILES = {"codah": {"train": "cv_split/fold_0/train.tsv", "dev": "cv_split/fold_0/dev.tsv"},
                "dream": {"train": "train.json", "dev": "dev.json"}}


@dataclass(frozen=True)
class ChoiceExample:
    """One question: each choice is read after ``context`` (the first text), as ``question`` followed by the choice
    (the second text; the choice alone where there is no question). ``label``: the right choice's index, or None."""

    qid: str
    context: str
    question: str
    choices: tuple[str, ...]
    label: int | None = None

    def second(self, choice: str) -> str:
        return f"{self.question} {choice}" if self.question else choice


def read_named(task: str, folder: str | Path | None, split: str) -> list[ChoiceExample]:
    """A named data set's split (``codah`` or ``dream``, ``train`` or ``dev``) from its folder."""
    from hire.data.files import default_data_dir
    from hire.data.glue import data_dir_option_name

    env, name = CHOICE_DIRS[task]
    root = Path(folder).expanduser() if folder is not None else default_data_dir(env, name)
    path = root / CHOICE_FILES[task][split]
    if not path.is_file():
        raise MissingData(f"{path}: no such file (the {task} {split} file; set {data_dir_option_name()} or ${env} to "
                          f"the folder that holds {', '.join(CHOICE_FILES[task].values())})")
    return read_choice_file(path)


def read_choice_file(path: str | Path, option: str | None = None, require_labels: bool = True) -> list[ChoiceExample]:
    """Every question of a CODAH (``.tsv``), DREAM (``.json``), SWAG (``.csv``) or JSON-lines file."""
    path = Path(path).expanduser()
    where = f"{option} {path}" if option else str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    suffix = path.suffix.lower()
    reader = {".tsv": _codah, ".json": _dream, ".csv": _swag}.get(suffix, _jsonl)
    examples = reader(text, where, require_labels)
    if not examples:
        raise DataError(f"{where}: no question")
    seen: dict[str, int] = {}
    for ex in examples:
        if ex.qid in seen:
            raise DataError(f"{where}: question id {ex.qid!r} is given twice")
        seen[ex.qid] = 1
    return examples


def _check(where: str, qid: str, context: str, question: str, choices: list[Any], label: Any,
           require_labels: bool) -> ChoiceExample:
    if not (isinstance(context, str) and context.strip()) and not (isinstance(question, str) and question.strip()):
        raise DataError(f"{where}: no context and no question (a choice is read after one of them)")
    if not isinstance(choices, list) or len(choices) < 2:
        raise DataError(f"{where}: {len(choices) if isinstance(choices, list) else 'no'} choice(s); a question "
                        "needs at least two")
    bad = [c for c in choices if not isinstance(c, str) or not c.strip()]
    if bad:
        raise DataError(f"{where}: a choice must be non-empty text, not {bad[0]!r}")
    if label is None:
        if require_labels:
            raise DataError(f"{where}: no label (the right choice's index)")
    elif isinstance(label, str) and not label.strip().lstrip("-").isdigit():
        if label not in choices:
            raise DataError(f"{where}: the answer {label!r} is not one of its choices {choices}")
        label = choices.index(label)
    else:
        try:
            index = int(label)
        except (TypeError, ValueError):
            raise DataError(f"{where}: label {label!r} is not a choice's index") from None
        if isinstance(label, bool) or (isinstance(label, float) and label != index) or not 0 <= index < len(choices):
            raise DataError(f"{where}: label {label!r} is outside its {len(choices)} choices (0 to "
                            f"{len(choices) - 1})")
        label = index
    return ChoiceExample(qid, (context or "").strip(), (question or "").strip(), tuple(c.strip() for c in choices),
                         label)


def _codah(text: str, where: str, require_labels: bool) -> list[ChoiceExample]:
    out = []
    for number, line in enumerate(text.split("\n"), 1):  # "\n" alone ends a line (not U+2028, a form feed)
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 7:
            raise DataError(f"{where}, line {number}: {len(fields)} tab-separated fields; CODAH has 7 (category, "
                            "prompt, four endings, the right ending's index)")
        out.append(_check(f"{where}, line {number}", str(number), fields[1], "", fields[2:6], fields[6].strip(),
                          require_labels))
    return out


def _dream(text: str, where: str, require_labels: bool) -> list[ChoiceExample]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, list):
        raise DataError(f"{where}: not a DREAM file (a list of [turns, questions, id])")
    out = []
    for d, dialogue in enumerate(data):
        if not isinstance(dialogue, list) or len(dialogue) != 3 or not isinstance(dialogue[0], list):
            raise DataError(f"{where}: dialogue {d} is not [turns, questions, id]")
        turns, questions, did = dialogue
        for q, item in enumerate(questions):
            qid = f"{did}-{q}"
            if not isinstance(item, dict):
                raise DataError(f"{where}: question {qid} is not a JSON object")
            choices, answer = item.get("choice"), item.get("answer")
            if answer is not None and isinstance(choices, list):  # the answer is the right choice's text
                if answer not in choices:
                    raise DataError(f"{where}: question {qid}: the answer {answer!r} is not one of its choices "
                                    f"{choices}")
                answer = choices.index(answer)
            out.append(_check(f"{where}: question {qid}", qid, "\n".join(map(str, turns)), item.get("question"),
                              choices, answer, require_labels))
    return out


def _swag(text: str, where: str, require_labels: bool) -> list[ChoiceExample]:
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and not {"sent1", "sent2", "ending0", "ending1"} <= set(rows[0]):
        raise DataError(f"{where}: not a SWAG file (a header with sent1, sent2, ending0 .. ending3, label)")
    out = []
    for number, row in enumerate(rows, 2):
        endings = [row[k] for k in sorted((k for k in row if k and k.startswith("ending")), key=lambda k: int(k[6:]))]
        label = row.get("label")
        out.append(_check(f"{where}, line {number}", row.get("fold-ind") or str(number), row.get("sent1") or "",
                          row.get("sent2") or "", endings, label if label not in (None, "") else None,
                          require_labels))
    return out


def _jsonl(text: str, where: str, require_labels: bool) -> list[ChoiceExample]:
    from hire.data.files import json_objects

    return [_check(f"{where}, line {number}", str(row.get("id", number)), row.get("context") or "",
                   row.get("question") or "", row.get("choices"), row.get("label"), require_labels)
            for number, row in json_objects(text, where, "context and/or question, choices and label")]
