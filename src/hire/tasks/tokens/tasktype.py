"""Token tasks: a tag per word (named entities, chunks, parts of speech): CoNLL-2003 by name
(``--data.task conll2003``, ``--data.tag_column ner|chunk|pos``) or a user's files in CoNLL columns or token
JSON lines (``--data.task custom --data.format conll|tokens``).

Read by :mod:`hire.data.conll` (any IOB scheme becomes IOB2), tokenized by :mod:`hire.data.tokens` (one scored
sub-token per word, windows over long sentences, document context), predicted by
:class:`hire.model.HireForTokenClassification`, scored with seqeval in strict IOB2 mode (entity precision,
recall and F1; stricter than conlleval, which reads a predicted I-X that begins a chunk as an entity) or by
token accuracy for plain tags. CoNLL-2003's test split is labelled: it is
scored once, with the best model, and never used to choose it (``TaskData.held_out``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

from hire.checks import check_input_file, replacing, writing
from hire.config import DataConfig, RunConfig
from hire.data.conll import check_tags, read_conll2003, read_token_file, tag_names
from hire.data.examples import DataError, TokenExample
from hire.data.tokens import TokenCollator, TokenSplit, encode_tokens
from hire.evaluation import model_outputs
from hire.metrics import entity_scores, token_accuracy
from hire.tasktype import Predictions, TaskData, TaskType, read_split

ENTITY_METRICS = ("f1", "precision", "recall")  # strict IOB2 entities, micro-averaged over types


class TokenTasks(TaskType):

    # -- reader --------------------------------------------------------------------------------------
    def load(self, cfg: DataConfig, with_train: bool = True) -> TaskData:
        missing: dict[str, str] = {}
        if cfg.task.lower() == "conll2003":
            read = lambda split: read_conll2003(cfg.data_dir, split, cfg.tag_column or "ner")  # noqa: E731
            train_file = read("train") if with_train else None  # `hire evaluate` never reads it
            dev_file = read_split(read, "dev", "dev", with_train, missing)
            held_file = read_split(read, "test", "test", with_train, missing)
            test_file = None
            name = "CoNLL-2003" + ("" if (cfg.tag_column or "ner") == "ner" else f"-{cfg.tag_column}")
        else:
            def read(path: str | None, option: str, require_tags: bool = True) -> Any:  # type: ignore[misc]
                if path is None:
                    return None
                check_input_file(path, option)
                return read_token_file(path, format=cfg.format, token_column=cfg.token_column,
                                       tag_column=-1 if cfg.tag_column is None else cfg.tag_column,
                                       separator=cfg.separator, scheme=cfg.scheme, require_tags=require_tags,
                                       option=option)
            train_file = read(cfg.train_file, "--data.train_file") if with_train or cfg.train_file else None
            dev_file = read(cfg.dev_file, "--data.dev_file")
            test_file = read(cfg.test_file, "--data.test_file", require_tags=False)
            held_file = None
            if test_file is not None and all(ex.tags is not None for ex in test_file.examples):
                held_file, test_file = test_file, None  # a labelled test file is scored, once, at the end
            name = "custom"  # not the training file's name ("train" for train.conll): the task is the user's
        files = [f for f in (train_file, dev_file, held_file) if f is not None]
        scheme = _common_scheme(files)
        if cfg.context == "document":
            _check_documents([f for f in (train_file, dev_file, held_file, test_file) if f is not None])
        train = train_file.examples[:cfg.max_train_examples] if with_train and train_file else []
        # The tags are the whole training file's, also when only its first examples train (a quick run still
        # knows every tag that its dev data may hold).
        labelled_from = train_file.examples if with_train and train_file else (dev_file.examples if dev_file else [])
        tags = tag_names(labelled_from) if labelled_from else None
        if tags is not None and len(tags) < 2:
            source = train_file or dev_file
            raise DataError(f"{source.path}: only one tag ({tags[0]!r}); a tagger needs at least two")

        def checked(file: Any) -> list[TokenExample]:
            if file is None:
                return []
            examples = file.examples[:cfg.max_eval_examples]
            if tags is None:
                return examples
            return check_tags(examples, tags, file.path, cfg.unknown_tags, format=file.format)

        dev = checked(dev_file)
        held = checked(held_file)
        test = test_file.examples[:cfg.max_eval_examples] if test_file is not None else []
        metrics = ENTITY_METRICS if scheme != "none" else ("accuracy",)
        return TaskData(name, tags, metrics, train, {"dev": dev} if dev else {}, {"test": test} if test else {},
                        held_out={"test": held} if held else {},
                        options={"scheme": scheme, "subword": cfg.subword, "context": cfg.context,
                                 "tag_column": cfg.tag_column}, missing=missing)

    def tokenizer_words(self) -> bool:
        return True  # words given apart: a byte-level BPE tokenizer reads each as inside running text

    def configure(self, model: Any, tokenizer: Any, cfg: RunConfig, from_encoder: bool) -> None:
        model.config.text_columns = None
        if from_encoder:
            model.set_word_pieces(tokenizer)  # a tagger finds words in token ids alone (transformers' pipeline)

    def prepare_evaluation(self, task: TaskData, config: dict[str, Any]) -> None:
        """The model's tags, in its logit order; the data's must be among them."""
        from hire.saved_model import saved_label_names

        task.label_names = saved_label_names(config)
        for split in (*task.dev.values(), *task.held_out.values()):
            check_tags(split, task.label_names or [], f"the {task.name} data", "error")

    def model_options(self, task: TaskData) -> dict[str, Any]:
        """The sub-token a word is read at, and how the data was read (``hire evaluate`` reads it the same way)."""
        options = dict(task.options)
        return {"subword": options.pop("subword", "first"), "task_options": options}

    # -- tokenization and collation ------------------------------------------------------------------
    def encode(self, task: TaskData, examples: Sequence[TokenExample], tokenizer: Any, max_length: int,
               labelled: bool = True) -> TokenSplit:
        return encode_tokens(examples, tokenizer, max_length, task.label_names, labelled,
                             subword=task.options.get("subword", "first"),
                             context=task.options.get("context", "sentence"))

    def collator(self, pad_token_id: int) -> TokenCollator:
        return TokenCollator(pad_token_id)

    # -- predictions, metrics, files -----------------------------------------------------------------
    def predict(self, model: Any, loader: DataLoader, split: TokenSplit, accelerator: Accelerator,
                desc: str = "predict") -> Predictions:
        """Each word's logits (per example, (words, m)), merged from the windows that score them."""
        def take(batch: dict[str, torch.Tensor], out: Any) -> tuple[torch.Tensor, ...]:
            q = accelerator.pad_across_processes(out.logits, dim=1)  # (B, n, m), n the same on every process
            scored = accelerator.pad_across_processes(batch["scored"], dim=1)
            lw = out.layer_weights if out.layer_weights is not None else q.new_zeros(len(batch["index"]), 0)
            return batch["index"], q, scored, lw

        (indices, logits, scored, weights), seconds = model_outputs(model, loader, accelerator, take, desc)
        per_item: list[np.ndarray | None] = [None] * len(split)
        for index, q, mask in zip(indices, logits, scored, strict=True):
            for row, i in enumerate(index.tolist()):
                per_item[i] = q[row][mask[row].bool()].numpy()
        word_logits = split.merge(per_item)  # type: ignore[arg-type]
        item_weights = torch.cat(weights)[torch.cat(indices).argsort()].numpy()  # (items, l + 1), in item order
        layer_weights = None
        if item_weights.shape[1]:  # an example's windows each weight the layers: their mean
            sums = np.zeros((len(word_logits), item_weights.shape[1]))
            np.add.at(sums, split.item_example, item_weights)
            counts = np.bincount(split.item_example, minlength=len(word_logits))[:, None]
            layer_weights = sums / np.maximum(counts, 1)
        return Predictions(word_logits, layer_weights, seconds)

    def predicted_tags(self, task: TaskData, preds: Predictions) -> list[list[str]]:
        names = task.label_names or []
        return [[names[j] for j in logits.argmax(-1)] for logits in preds.logits]

    def score(self, task: TaskData, preds: Predictions, examples: Sequence[TokenExample],
              split: TokenSplit) -> dict[str, float]:
        """Strict IOB2 entity F1 (``score``), precision and recall, overall and per type, and token accuracy; for
        plain tags, token accuracy (``score``). Every word of every example is scored."""
        gold = [list(ex.tags or ()) for ex in examples]
        pred = self.predicted_tags(task, preds)
        if task.options.get("scheme", "none") == "none":
            accuracy = token_accuracy(gold, pred)
            return {"accuracy": accuracy, "words": float(sum(map(len, gold))), "score": accuracy}
        result = entity_scores(gold, pred)
        result["words"] = float(sum(map(len, gold)))
        result["score"] = result["f1"]
        return result

    def write_predictions(self, path: Path, task: TaskData, examples: Sequence[TokenExample],
                          preds: Predictions) -> None:
        """One JSON line per sentence: id, words, gold and predicted tags, predicted entity spans (IOB schemes;
        ``end`` exclusive, in words), each word's tag probability, the layer weights."""
        path.parent.mkdir(parents=True, exist_ok=True)
        pred = self.predicted_tags(task, preds)
        entities = task.options.get("scheme", "none") != "none"
        with writing(path), replacing(path) as tmp, tmp.open("w") as f:
            for i, ex in enumerate(examples):
                probs = torch.softmax(torch.from_numpy(np.asarray(preds.logits[i], dtype=np.float32)), -1)
                row: dict[str, Any] = {"guid": ex.guid, "tokens": list(ex.tokens),
                                       "tags": list(ex.tags) if ex.tags is not None else None,
                                       "prediction": pred[i],
                                       "confidence": [round(float(p), 6) for p in probs.max(-1).values]}
                if entities:
                    row["entities"] = entity_spans(ex.tokens, pred[i])
                if preds.layer_weights is not None:
                    row["layer_weights"] = [round(float(w), 6) for w in preds.layer_weights[i]]
                f.write(json.dumps(row) + "\n")


def _common_scheme(files: Sequence[Any]) -> str:
    """The scheme the files' tags are scored in. Each file was read in its own scheme and its tags converted to
    IOB2, so an IOB1 training file beside an IOB2 dev file is fine; a file of O tags alone fits any. Chunk tags in
    one file and plain tags (no B-/I-/E-/S- prefix) in another cannot both be scored: an error naming the first
    plain tag's line."""
    if not files:
        return "none"
    chunked = [f for f in files if f.scheme != "none"]
    plain = [f for f in files if f.scheme == "none"]
    if chunked and plain:
        other = chunked[0]
        bad = plain[0]
        if bad.plain is not None:
            line, tag = bad.plain
            raise DataError(f"{bad.path}, line {line}: tag {tag!r} is not O or a B-, I-, E- or S- prefix and a "
                            f"type, so the file's tags are plain, while {other.path} has chunk tags "
                            f"({other.scheme.upper()}); tag every file in one way")
        raise DataError(f"{bad.path}: read with no tag scheme (--data.scheme none), while {other.path} has chunk "
                        f"tags ({other.scheme.upper()})")
    if not chunked:
        return "none"
    common = [name for name in chunked[0].fits if all(name in f.fits for f in chunked)]
    return common[0] if common else chunked[0].scheme  # files of different schemes: each read as its own


def _check_documents(files: Sequence[Any]) -> None:
    """``--data.context document`` needs documents: a file without any (no -DOCSTART- line, no "document" key)
    would read every sentence alone, which is the sentence context the option was given to avoid."""
    for file in files:
        if all(ex.document is None for ex in file.examples):
            marks = "-DOCSTART- line" if file.format == "conll" else '"document" key'
            raise DataError(f"{file.path}: no documents (no {marks}), so --data.context document would read "
                            "each sentence alone; mark its documents or give --data.context sentence")


def entity_spans(tokens: Sequence[str], tags: Sequence[str]) -> list[dict[str, Any]]:
    """The entities of one sentence's IOB2 tags as seqeval's strict mode reads them (a chunk must start with B-):
    ``{"type", "start", "end", "text"}``, ``end`` exclusive."""
    from seqeval.scheme import IOB2, Entities

    found = Entities([list(tags)], IOB2).entities[0]
    return [{"type": e.tag, "start": e.start, "end": e.end, "text": " ".join(tokens[e.start:e.end])}
            for e in found]


TOKEN = TokenTasks()
