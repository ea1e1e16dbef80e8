"""Reading extractive question answering: SQuAD's official JSON (v1.1 and v2.0) and JSON lines of the same fields,
every question checked, a bad one a :class:`~hire.data.examples.DataError` naming the file and the question.

A JSON-lines file holds one question a line: ``{"id", "context", "question", "answers": [{"text",
"answer_start"}]}``; ``answers`` ``[]`` means the passage holds no answer (SQuAD v2.0), and a line without
``answers`` is unlabelled (a file to predict). ``id`` is optional (the line number then).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hire.data.examples import DataError, MissingData

ENV_VAR = "HIRE_SQUAD_DIR"
# The named tasks' files: version -> (train, dev) file names in the data folder.
SQUAD_FILES = {"1.1": ("train-v1.1.json", "dev-v1.1.json"), "2.0": ("train-v2.0.json", "dev-v2.0.json")}


@dataclass(frozen=True)
class SpanExample:
    """One question on one passage. ``answers``: the gold answers as (text, character offset in ``context``); the
    first one is the training target (as BERT's and Hugging Face's scripts take ``answers[0]``) and every one
    counts when scoring. ``impossible``: the passage holds no answer (v2.0). ``labelled`` False: nothing is known."""

    qid: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...] = ()
    impossible: bool = False
    labelled: bool = True

    @property
    def golds(self) -> list[str]:
        """The texts a prediction is scored against: the answers, or the empty answer where there is none."""
        return [text for text, _ in self.answers] or [""]


def default_squad_dir() -> Path:
    from hire.data.files import default_data_dir

    return default_data_dir(ENV_VAR, "squad")


def read_squad_dir(folder: str | Path | None, version: str, split: str) -> list[SpanExample]:
    """A named SQuAD split (``train`` or ``dev`` of version ``1.1`` or ``2.0``) from its folder."""
    from hire.data.glue import data_dir_option_name

    root = Path(folder).expanduser() if folder is not None else default_squad_dir()
    path = root / SQUAD_FILES[version][0 if split == "train" else 1]
    if not path.is_file():
        raise MissingData(f"{path}: no such file (the SQuAD {version} {split} file; set {data_dir_option_name()} "
                          f"or ${ENV_VAR} to the folder that holds {', '.join(SQUAD_FILES[version])})")
    return read_span_file(path)


def read_span_file(path: str | Path, option: str | None = None, require_answers: bool = True) -> list[SpanExample]:
    """Every question of a SQuAD JSON file (``.json``) or a JSON-lines file (any other suffix). ``require_answers``:
    a labelled file (every question has ``answers``; for a file to predict, False: ``answers`` may be absent)."""
    path = Path(path).expanduser()
    where = f"{option} {path}" if option else str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    if path.suffix.lower() == ".json":
        rows = _squad_rows(text, where)
    else:
        from hire.data.files import json_objects

        rows = [(f"line {number}", row.setdefault("id", str(number)), row)
                for number, row in json_objects(text, where, "context, question and answers")]
    if not rows:
        raise DataError(f"{where}: no question")
    examples, seen = [], {}
    for place, qid, row in rows:
        example = _example(row, f"{where}, {place}" if place.startswith("line") else f"{where}: question {qid}",
                           require_answers)
        if example.qid in seen:
            raise DataError(f"{where}: question id {example.qid!r} is given twice ({seen[example.qid]} and {place})")
        seen[example.qid] = place
        examples.append(example)
    return examples


def _squad_rows(text: str, where: str) -> list[tuple[str, str, dict[str, Any]]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise DataError(f"{where}: not a SQuAD file (a JSON object whose \"data\" is a list of articles)")
    rows = []
    for a, article in enumerate(articles):
        for p, paragraph in enumerate((article or {}).get("paragraphs") or []):
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
                raise DataError(f"{where}: article {a}, paragraph {p}: not a paragraph (context and qas)")
            for qa in paragraph["qas"]:
                if not isinstance(qa, dict):
                    raise DataError(f"{where}: article {a}, paragraph {p}: a question that is not a JSON object")
                qid = str(qa.get("id", f"{a}-{p}-{len(rows)}"))
                rows.append((f"question {qid}", qid, {**qa, "id": qid, "context": paragraph.get("context")}))
    return rows


def _example(row: dict[str, Any], where: str, require_answers: bool) -> SpanExample:
    context, question = row.get("context"), row.get("question")
    if not isinstance(context, str) or not context.strip():
        raise DataError(f"{where}: no context (the passage to find the answer in)")
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: no question")
    answers = row.get("answers")
    if answers is None:
        if require_answers:
            raise DataError(f"{where}: no answers (a labelled file gives each question its answers, [] for none)")
        return SpanExample(str(row["id"]), question, context, labelled=False)
    if not isinstance(answers, list):
        raise DataError(f"{where}: answers must be a list of {{\"text\", \"answer_start\"}}, not {answers!r:.60}")
    gold = []
    for answer in answers:
        text, start = (answer.get("text"), answer.get("answer_start")) if isinstance(answer, dict) else (None, None)
        if not isinstance(text, str) or not text or isinstance(start, bool) or not isinstance(start, int):
            raise DataError(f"{where}: an answer must be {{\"text\": a non-empty string, \"answer_start\": a "
                            f"character offset}}, not {answer!r:.80}")
        if context[start:start + len(text)] != text:
            found = context[max(start, 0):max(start, 0) + len(text)]
            raise DataError(f"{where}: answer_start {start} does not point at its text {text!r} (the context "
                            f"there reads {found!r})")
        gold.append((text, start))
    impossible = bool(row.get("is_impossible", not gold))
    if impossible and gold:
        raise DataError(f"{where}: is_impossible, but it has answers")
    return SpanExample(str(row["id"]), question, context, tuple(gold), impossible)


def official_line(line: str) -> bool:
    """Whether ``line`` (a file's first) is an official predictions or no-answer file that hire wrote: one JSON
    object of question ids to answers or numbers."""
    try:
        values = json.loads(line)
    except ValueError:
        return False
    return isinstance(values, dict) and all(isinstance(v, str | int | float) for v in values.values())
