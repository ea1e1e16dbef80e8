"""``hire predict`` with a ranker (:func:`predict_file`): each question's candidates ranked, as JSON lines and a
TREC run file beside them; the metrics too where the input is labelled."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hire.checks import check_output_file, check_own_file
from hire.config import ConfigError
from hire.data.examples import DataError
from hire.prediction import check_not_in_model, load_for_prediction, precision_name, predictions_file
from hire.runs import check_not_run_file

if TYPE_CHECKING:
    from hire.commands import PredictOptions


def run_line(line: str) -> bool:
    """Whether ``line`` (a file's first) is a line of the TREC run file that ``hire predict`` writes
    (``qid Q0 pid rank score hire``)."""
    fields = line.split()
    return len(fields) == 6 and fields[1] == "Q0" and fields[5] == "hire"


def predict_file(args: PredictOptions, config: dict[str, Any]) -> int:
    """``hire predict`` with a ranker: each question's candidates ranked, as JSON lines (qid, pid, rank, score) and
    a TREC run file beside them (``OUTPUT`` with the suffix ``.run``); the metrics too when the input is
    labelled with whole-number grades."""
    from hire.data.ranking import read_ranking_file

    if args.text_columns is not None or args.label_column != "label":
        raise ConfigError(f"--text_columns/--label_column: for a sentence model; --model {args.model} ranks "
                          "passages (--ranking_columns names its input's columns)")
    if args.format not in (None, "ranking"):
        raise ConfigError(f"--format {args.format}: --model {args.model} ranks passages; its input is a ranking "
                          "file (.tsv, .csv or .jsonl rows of qid, question, pid, passage and an optional label)")
    output = predictions_file(args, config)
    if output.suffix == ".run":  # the JSON lines and the run file (OUTPUT with the suffix .run) would be one file
        raise ConfigError(f"--output {args.output}: a ranker writes JSON lines there and its TREC run file beside "
                          "them, named with the suffix .run; give a name ending in .jsonl")
    run_option = f"the run file beside --output {output}" if args.output else f"the run file beside {output}"
    run_file = check_output_file(output.with_suffix(".run"), run_option, {"--input": args.input})
    check_not_run_file(run_file, "the run file")
    check_not_in_model(run_file, "the run file", args.model)
    check_own_file(run_file, run_option, "predict", run_line, "choose another --output (the run file takes its "
                   "name, with the suffix .run)")
    try:  # read (and every bad line reported) before the model loads
        examples = read_ranking_file(args.input, columns=dict(args.ranking_columns) or None, option="--input").examples
    except ValueError as err:
        if isinstance(err, DataError):
            raise
        raise ConfigError(f"--ranking_columns: {err}") from None
    from hire.evaluation import eval_loader  # the heavy imports, once every option is checked
    from hire.metrics import ranking_metrics
    from hire.tasks.ranking.tasktype import RANKING, encode_apart, encode_pairs, write_ranking

    model, tokenizer, acc = load_for_prediction(args.model, args.mixed_precision)
    encode = encode_apart if config.get("ranker") == "bi" else encode_pairs  # a bi-encoder reads each text apart
    encoded = encode(examples, tokenizer, args.max_length, labelled=False)
    preds = RANKING.predict(model, acc.prepare(eval_loader(encoded, args.batch_size, RANKING.collator(
        tokenizer.pad_token_id))), encoded, acc)
    scores = [float(s) for s in preds.logits]
    whole = all(ex.label is not None and ex.label == int(ex.label) for ex in examples)
    scored = whole and any((ex.label or 0) >= 1 for ex in examples)
    write_ranking(output, run_file, None, examples, scores, preds.layer_weights)
    questions = len({ex.qid for ex in examples})
    print(f"{questions} questions ({len(examples)} candidates) in {preds.seconds:.2f} s: "
          f"{preds.examples_per_second:.1f} candidates/s ({precision_name(acc)}, batch {args.batch_size}); "
          f"ranking in {output} and {run_file}")
    if scored:
        print(json.dumps(ranking_metrics(examples, scores), indent=2))
    return 0
