"""The proof of the task-type seam (hire.tasktype): a new kind of task, "toy-parity" (is the number of ``a``
words in a random sentence even or odd?), is this one module. It registers a kind, a task type and a model type,
touches no other file, and then trains, evaluates, saves, reloads and predicts through the real ``hire`` command.

The kind reuses the sentence kind's building blocks (tokenization, collation, the prediction loop, metrics), as a
kind of task may; what makes it a kind of its own is that every generic module reaches it only through the registry:
its tasks by name (``--data.task toy-parity``), its models by their ``task_type`` ("toy"), ``hire evaluate`` through
:meth:`TaskKind.evaluation_data` and ``hire predict`` through :meth:`TaskKind.predict_file` (a text file, a sentence
per line).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tiny import save_tiny_encoder

from hire.cli import main
from hire.data.examples import Example
from hire.model import HireModel, register_model_class
from hire.tasks.sequence.tasktype import SequenceTasks
from hire.tasktype import TaskData, TaskKind, register_task_kind, task_kind_for

LABELS = ["even", "odd"]


def toy_examples(n: int, seed: int) -> list[Example]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.choices(["a", "b", "c"], k=rng.randint(1, 6))
        out.append(Example(str(i), " ".join(words), None, LABELS[words.count("a") % 2]))
    return out


class ToyTasks(SequenceTasks):
    """Random sentences, labelled by the parity of their ``a`` words: train, dev and a labelled test split."""

    has_submissions = False

    def load(self, cfg: Any, with_train: bool = True) -> TaskData:
        n_eval = cfg.max_eval_examples or 16
        return TaskData("toy-parity", list(LABELS), ("accuracy",),
                        toy_examples(cfg.max_train_examples or 48, 0) if with_train else [],
                        {"dev": toy_examples(n_eval, 1)}, held_out={"test": toy_examples(n_eval, 2)})

    def configure(self, model: Any, tokenizer: Any, cfg: Any, from_encoder: bool) -> None:
        model.config.text_columns = None  # not a table

    def write_predictions(self, path: Path, task: TaskData, examples: Sequence[Example], preds: Any) -> None:
        super().write_predictions(path, task, examples, preds)


class ToyKind(TaskKind):
    name = "toy"
    implementation = ToyTasks()
    named_help = "toy-parity (a test's toy)"

    def handles(self, cfg: Any) -> bool:
        return cfg.task.lower() == "toy-parity"

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        return ("toy-parity", ("accuracy",)) if name.lower() == "toy-parity" else None

    def task_names(self) -> tuple[str, ...]:
        return ("toy-parity",)

    def describe(self) -> str:
        return "counts a words"

    def evaluation_data(self, task: str, model: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "toy-parity", {"task": "toy-parity"}

    def predict_file(self, args: Any, config: dict[str, Any]) -> int:
        """A sentence per line in, a JSON line per sentence out (``--output``, or INPUT.predictions.jsonl)."""
        from hire.evaluation import eval_loader
        from hire.prediction import load_for_prediction, predictions_file

        output = predictions_file(args, config)
        lines = Path(args.input).read_text().splitlines()
        examples = [Example(str(i), line) for i, line in enumerate(lines)]
        toy = self.task_type
        task = TaskData("toy-parity", list(config["label_names"]), ("accuracy",), [], {})
        model, tokenizer, acc = load_for_prediction(args.model, args.mixed_precision)
        encoded = toy.encode(task, examples, tokenizer, args.max_length, labelled=False)
        preds = toy.predict(model, acc.prepare(eval_loader(encoded, args.batch_size,
                                                           toy.collator(tokenizer.pad_token_id))), encoded, acc)
        toy.write_predictions(output, task, examples, preds)
        return 0


@pytest.fixture(scope="module")
def toy() -> Iterator[ToyKind]:
    """The toy kind, registered for this module's tests and forgotten after them (the registries are hire's
    process-wide state: later tests must not meet a kind they do not know)."""
    import hire.model.registry
    import hire.tasktype

    register_model_class("toy", HireModel)  # its models: a HireModel whose config.json says task_type "toy"
    kind = ToyKind()
    kind.model_type = "toy"
    yield register_task_kind(kind)
    hire.tasktype._KINDS.pop("toy")
    hire.model.registry._CLASSES.pop("toy")


def test_a_toy_kind_of_task_trains_evaluates_saves_reloads_and_predicts(toy, tmp_path, capsys):
    from hire.config import DataConfig

    assert task_kind_for(DataConfig(task="toy-parity")) is toy
    encoder = save_tiny_encoder(tmp_path / "encoder", ["a b c"])
    run = tmp_path / "run"
    assert main(["train", "--output_dir", str(run), "--data.task", "toy-parity", "--model.encoder", str(encoder),
                 "--model.head", "hire", "--train.max_steps", "6", "--train.eval_every", "3", "--train.batch_size",
                 "8", "--train.lr", "3e-3", "--train.mixed_precision", "no", "--data.max_length", "16"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["task"] == "toy-parity" and set(metrics["held_out"]) == {"test"}
    assert json.loads((run / "best" / "config.json").read_text())["task_type"] == "toy"
    assert len((run / "predictions" / "dev.jsonl").read_text().splitlines()) == 16

    # evaluate: the saved model reloads (through the registry: task_type "toy") and scores what training scored
    out = tmp_path / "eval"
    capsys.readouterr()
    assert main(["evaluate", "--model", str(run / "best"), "--task", "toy-parity", "--output_dir", str(out)]) == 0
    evaluated = json.loads((out / "metrics.json").read_text())
    assert evaluated["dev"] == metrics["dev"]["dev"]
    def labels(path: Path) -> list[str]:
        return [json.loads(line)["prediction"] for line in path.read_text().splitlines()]

    assert labels(out / "dev.jsonl") == labels(run / "predictions" / "dev.jsonl")

    # predict: the kind reads its own input (a sentence per line) and writes its own output
    source = tmp_path / "input.txt"
    source.write_text("".join(ex.text_a + "\n" for ex in toy_examples(16, 1)))
    assert main(["predict", "--model", str(run / "best"), "--input", str(source), "--output",
                 str(tmp_path / "out.jsonl"), "--mixed_precision", "no"]) == 0
    assert labels(tmp_path / "out.jsonl") == labels(run / "predictions" / "dev.jsonl")

    # the kind of the task and of the model must agree: a GLUE task is refused for the toy's model
    capsys.readouterr()
    assert main(["evaluate", "--model", str(run / "best"), "--task", "RTE", "--output_dir", str(tmp_path / "e2")]) == 2
    assert "counts a words, and the task labels sentences" in capsys.readouterr().err
