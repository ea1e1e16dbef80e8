"""``hire predict`` with a sentence model (:func:`predict_file`): every row of a user's table labelled (or scored,
for regression), with the probabilities and layer weights."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hire.checks import check_text_columns
from hire.config import ConfigError
from hire.prediction import load_for_prediction, precision_name, predictions_file, texts
from hire.saved_model import saved_label_names, saved_num_labels, trained_text_columns

if TYPE_CHECKING:
    from hire.commands import PredictOptions


def predict_file(args: PredictOptions, config: dict[str, Any]) -> int:
    from hire.data.files import read_table

    if args.ranking_columns:
        raise ConfigError(f"--ranking_columns: for a ranker; --model {args.model} labels sentences")
    if args.format not in (None, "table"):
        raise ConfigError(f"--format {args.format}: for a tagger; --model {args.model} labels sentences (its input "
                          "is a table: .csv, .tsv or .jsonl with a header)")
    trained = trained_text_columns(args.model, config)
    given = args.text_columns or (",".join(trained) if trained else "sentence")
    columns = [c.strip() for c in given.split(",") if c.strip()]
    check_text_columns(columns, args.label_column, "--text_columns", "--label_column")
    if trained is not None and len(columns) != len(trained):
        raise ConfigError(f"--text_columns {given}: --model {args.model} was trained on {texts(trained)}; "
                          f"give {len(trained)} column(s)")
    output = predictions_file(args, config)
    num_labels = saved_num_labels(config)
    regression = num_labels == 1
    names = None if regression else (saved_label_names(config) or [str(i) for i in range(num_labels)])
    examples = read_table(args.input, columns, args.label_column, regression=regression, require_label=False,
                          labels=names, labels_from=f"the model ({args.model})")
    from hire.data.batching import Collator, encode  # the heavy imports, once every option is checked
    from hire.evaluation import eval_loader
    from hire.tasks.sequence.tasktype import predict, write_predictions

    model, tokenizer, acc = load_for_prediction(args.model, args.mixed_precision)
    encoded = encode(examples, tokenizer, args.max_length, None, labelled=False)
    preds = predict(model, acc.prepare(eval_loader(encoded, args.batch_size, Collator(tokenizer.pad_token_id))), acc)
    write_predictions(output, examples, preds, names)
    print(f"{len(examples)} examples in {preds.seconds:.2f} s: {preds.examples_per_second:.1f} examples/s "
          f"({precision_name(acc)}, batch {args.batch_size}); predictions in {output}")
    return 0
