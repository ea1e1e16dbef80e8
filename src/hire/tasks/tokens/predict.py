"""``hire predict`` with a tagger (:func:`predict_file`): every word of a user's raw text, CoNLL file or token JSON
lines tagged, with the entity spans; a labelled input is scored as ``hire evaluate`` scores."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hire.config import ConfigError
from hire.data.examples import DataError
from hire.prediction import load_for_prediction, precision_name, predictions_file
from hire.saved_model import saved_label_names

if TYPE_CHECKING:
    from hire.commands import PredictOptions


_CHUNK_TAG = re.compile(r"(?i)(o|[bies]-\S+)")


_SNIFF_LINES = 200  # the word lines that decide whether a .txt file is CoNLL columns


def _looks_like_conll(path: str, tags: list[str] | None) -> bool:
    """Whether a ``.txt`` input for a tagger is CoNLL columns rather than running text (CoNLL-2003 itself is
    ``*.txt``): a ``-DOCSTART-`` line, or first word lines that all have the same two or more fields (split as
    the CoNLL reader splits them) and end in a tag: one of the model's, or O / a B-, I-, E-, S- chunk tag in
    either case. A sentence per line has neither. Unreadable bytes are left to the reader that reports them."""
    from hire.data.files import iter_lines

    known = {tag.lower() for tag in tags or ()}
    counts: set[int] = set()
    separator: str | None = None
    seen = 0
    try:
        for _, line in iter_lines(path):
            if not line.strip():
                continue
            if line.startswith("-DOCSTART-"):
                return True
            separator = separator or ("\t" if "\t" in line else " ")
            fields = line.split("\t") if separator == "\t" else re.split(r"[ \t]+", line.strip(" \t"))
            counts.add(len(fields))
            last = fields[-1].strip()
            if len(counts) > 1 or len(fields) < 2 or not (last.lower() in known or _CHUNK_TAG.fullmatch(last)):
                return False
            seen += 1
            if seen >= _SNIFF_LINES:
                break
    except DataError:
        return False
    return seen > 0


def predict_file(args: PredictOptions, config: dict[str, Any]) -> int:
    """``hire predict`` with a tagger: every word of the input with its tag, and the entity spans. A labelled
    input (a CoNLL file or token JSON lines with tags) keeps its gold tags beside the predictions and is scored
    as ``hire evaluate`` scores: strict entity F1 (seqeval, IOB2) for a model of chunk tags, token accuracy for
    plain tags. The gold tags are read in whatever scheme they are (IOB1, IOB2, BIOES; converted to IOB2): they
    are not the model's input, so their scheme is never a reason to refuse it."""
    import warnings

    from hire.data.conll import read_token_file

    if args.ranking_columns:
        raise ConfigError(f"--ranking_columns: for a ranker; --model {args.model} tags words")
    if args.text_columns is not None or args.label_column != "label":
        raise ConfigError(f"--text_columns/--label_column: for a sentence model; --model {args.model} tags words "
                          "(--format says how its input is laid out)")
    suffix = Path(args.input).suffix.lower()
    sniffed = False
    if args.format is None and suffix == ".txt":
        sniffed = _looks_like_conll(args.input, saved_label_names(config))
        layout = "conll" if sniffed else "text"
    else:
        layout = args.format or {".jsonl": "tokens"}.get(suffix, "conll")
    if layout not in ("text", "conll", "tokens"):
        raise ConfigError(f"--format {layout}: --model {args.model} tags words; give --format text (a sentence per "
                          "line), conll (a word per line, in columns) or tokens (token JSON lines)")
    output = predictions_file(args, config)
    from hire.data.examples import TokenExample  # the heavy imports, once every option is checked
    from hire.evaluation import eval_loader
    from hire.tasks.tokens.tasktype import TOKEN
    from hire.tasktype import TaskData

    options = dict(config.get("task_options") or {})
    entities = options.get("scheme", "iob2") != "none"  # the model's tags are chunks (else plain tags, as POS)
    scheme = "none"
    if layout != "text":  # read (and every bad line reported) before the model loads
        try:
            read = read_token_file(args.input, format=layout, require_tags=False,
                                   scheme="auto" if entities else "none", option="--input")
        except DataError as err:  # the gold tags fit no scheme: predict, but do not score them
            read = read_token_file(args.input, format=layout, require_tags=False, scheme="none", option="--input")
            warnings.warn(f"--input {args.input}: its tags are not scored ({err})", RuntimeWarning, stacklevel=2)
        examples, scheme = read.examples, read.scheme
        if entities and scheme == "none" and read.plain is not None:
            warnings.warn(f"--input {args.input}, line {read.plain[0]}: tag {read.plain[1]!r} is not a chunk tag, "
                          "so the file's tags are not scored (the model tags chunks: O, B-, I-)", RuntimeWarning,
                          stacklevel=2)
        if options.get("context") == "document" and all(ex.document is None for ex in examples):
            warnings.warn(f"--input {args.input}: the model reads each sentence in its document, and the file marks "
                          "none (no -DOCSTART- line or \"document\" key): each sentence is read alone",
                          RuntimeWarning, stacklevel=2)
    model, tokenizer, acc = load_for_prediction(args.model, args.mixed_precision, words=True)
    if layout == "text":  # split into words as the tokenizer splits running text
        examples = [TokenExample(str(line - 1), tuple(words), line=line)
                    for line, words in _text_words(args.input, tokenizer) if words]
    if not examples:
        raise DataError(f"--input {args.input}: no sentence to tag")
    scored = all(ex.tags is not None for ex in examples) and (scheme != "none") == entities
    options["scheme"] = scheme if scored else options.get("scheme", "iob2")
    task = TaskData(Path(args.input).stem, saved_label_names(config), (), [], {}, {"input": examples},
                    options={**options, "subword": config.get("subword", "first")}, type=TOKEN)
    encoded = TOKEN.encode(task, examples, tokenizer, args.max_length, labelled=False)
    preds = TOKEN.predict(model, acc.prepare(eval_loader(encoded, args.batch_size, TOKEN.collator(
        tokenizer.pad_token_id))), encoded, acc)
    TOKEN.write_predictions(output, task, examples, preds)
    words = sum(len(ex.tokens) for ex in examples)
    if sniffed:
        print(f"{args.input}: read as CoNLL columns, a word per line (--format text reads it as raw text)")
    print(f"{len(examples)} sentences ({words} words) in {preds.seconds:.2f} s: "
          f"{preds.examples_per_second:.1f} sentences/s ({precision_name(acc)}, batch {args.batch_size}); predictions "
          f"in {output}")
    if scored:
        print(json.dumps(TOKEN.score(task, preds, examples, encoded), indent=2))
    return 0


def _text_words(path: str, tokenizer: Any) -> list[tuple[int, list[str]]]:
    """Each line of a text file (its number, its words) split into words as the tokenizer's own pre-tokenizer
    splits running text (BERT's: at spaces and punctuation), so that a word starts where the tokenizer starts one.
    Lines end at ``\\n`` (a ``\\r`` before it dropped) and nowhere else: not at a form feed or U+2028, which
    str.splitlines takes for line ends; a UTF-8 byte-order mark is dropped, not read as part of the first word."""
    from hire.data.files import iter_lines

    pre = tokenizer.backend_tokenizer.pre_tokenizer
    lines = list(iter_lines(path))  # bytes that are not UTF-8: an error naming the line
    if pre is None:
        return [(number, line.split()) for number, line in lines]
    # The offsets name the words as written (a byte-level pre-tokenizer spells a space as "Ġ" in its pieces).
    return [(number, [w for _, (a, b) in pre.pre_tokenize_str(line) if (w := line[a:b].strip())])
            for number, line in lines]
