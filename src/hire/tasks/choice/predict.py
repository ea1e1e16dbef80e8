"""``hire predict`` with a multiple-choice model (:func:`predict_file`): every question of a JSON-lines, SWAG, CODAH
or DREAM file answered, one JSON line each (the chosen index, each choice's probability); a labelled input is
scored (accuracy)."""

from __future__ import annotations

import json
from typing import Any

from hire.config import ConfigError
from hire.prediction import load_for_prediction, precision_name, predictions_file


def predict_file(args: Any, config: dict[str, Any]) -> int:
    from hire.tasks.choice.data import read_choice_file

    if args.ranking_columns:
        raise ConfigError(f"--ranking_columns: for a ranker; --model {args.model} chooses one of several answers")
    if args.text_columns is not None or args.label_column != "label":
        raise ConfigError(f"--text_columns/--label_column: for a sentence model; --model {args.model} chooses one "
                          "of several answers (its input: JSON lines of context, question, choices, label; SWAG, "
                          "CODAH or DREAM files)")
    if args.format not in (None, "choices"):
        raise ConfigError(f"--format {args.format}: --model {args.model} chooses one of several answers; its input "
                          "is JSON lines of context and/or question, choices and label, or a SWAG, CODAH or DREAM "
                          "file (--format choices)")
    output = predictions_file(args, config)
    examples = read_choice_file(args.input, "--input", require_labels=False)  # every bad question before the model
    from hire.evaluation import eval_loader  # the heavy imports, once every option is checked
    from hire.tasks.choice.tasktype import CHOICES
    from hire.tasktype import TaskData

    model, tokenizer, acc = load_for_prediction(args.model, args.mixed_precision)
    task = TaskData("input", None, ("accuracy",), [], {}, {"input": examples}, type=CHOICES)
    encoded = CHOICES.encode(task, examples, tokenizer, args.max_length, labelled=False)
    preds = CHOICES.predict(model, acc.prepare(eval_loader(encoded, args.batch_size, CHOICES.collator(
        tokenizer.pad_token_id))), encoded, acc)
    CHOICES.write_predictions(output, task, examples, preds)
    print(f"{len(examples)} questions in {preds.seconds:.2f} s: {preds.examples_per_second:.1f} questions/s "
          f"({precision_name(acc)}, batch {args.batch_size}); predictions in {output}")
    if all(ex.label is not None for ex in examples):
        print(json.dumps(CHOICES.score(task, preds, examples, encoded), indent=2))
    return 0
