"""``hire predict`` with a span model (:func:`predict_file`): every question of a SQuAD JSON file or JSON lines of
questions and passages answered, one JSON line each (the answer, its characters in the passage, the scores), the
official predictions file beside them; a labelled input is scored as ``hire evaluate`` scores."""

from __future__ import annotations

import json
from typing import Any

from hire.checks import check_output_file, check_own_file
from hire.config import ConfigError
from hire.prediction import load_for_prediction, precision_name, predictions_file
from hire.runs import check_not_run_file


def predict_file(args: Any, config: dict[str, Any]) -> int:
    from hire.tasks.spans.data import official_line, read_span_file

    if args.ranking_columns:
        raise ConfigError(f"--ranking_columns: for a ranker; --model {args.model} answers questions")
    if args.text_columns is not None or args.label_column != "label":
        raise ConfigError(f"--text_columns/--label_column: for a sentence model; --model {args.model} answers "
                          "questions (its input is SQuAD JSON, or JSON lines of id, context, question)")
    if args.format not in (None, "squad"):
        raise ConfigError(f"--format {args.format}: --model {args.model} answers questions; its input is SQuAD JSON "
                          "or JSON lines (--format squad)")
    output = predictions_file(args, config)
    for suffix in (".squad.json", ".na_probs.json"):  # the official files beside it: never over a user's file
        side = output.with_suffix(suffix)
        what = f"the official file beside --output {output}" if args.output else f"the official file {side}"
        check_output_file(side, what, {"--input": args.input})
        check_not_run_file(side, what)
        check_own_file(side, what, "predict", official_line, "choose another --output (the files beside it take "
                       "its name)")
    examples = read_span_file(args.input, "--input", require_answers=False)  # every bad question before the model
    from hire.evaluation import eval_loader  # the heavy imports, once every option is checked
    from hire.tasks.spans.tasktype import LABELS, SPANS
    from hire.tasktype import TaskData

    options = dict(config.get("task_options") or {})
    model, tokenizer, acc = load_for_prediction(args.model, args.mixed_precision)
    task = TaskData("input", list(LABELS), (), [], {}, {"input": examples}, options=options, type=SPANS)
    encoded = SPANS.encode(task, examples, tokenizer, args.max_length, labelled=False)
    preds = SPANS.predict(model, acc.prepare(eval_loader(encoded, args.batch_size, SPANS.collator(
        tokenizer.pad_token_id))), encoded, acc)
    SPANS.write_predictions(output, task, examples, preds)
    print(f"{len(examples)} questions ({len(encoded)} windows) in {preds.seconds:.2f} s: "
          f"{preds.examples_per_second:.1f} questions/s ({precision_name(acc)}, batch {args.batch_size}); answers "
          f"in {output} and {output.with_suffix('.squad.json')}")
    if all(ex.labelled for ex in examples):
        if any(ex.impossible for ex in examples) and options.get("version") != "2.0":
            options["version"] = "2.0"  # a v1.1 model scored on questions without an answer: the v2 figures
        scored = dict(SPANS.score(task, preds, examples, encoded))
        print(json.dumps(scored, indent=2))
    return 0
