"""Ranking tasks: candidate passages ranked for each question by a cross-encoder (question and passage read
together, ``[CLS] question [SEP] passage [SEP]``, one relevance score per pair): WikiQA by name
(``--data.task wikiqa``) or a user's files (``--data.task custom --data.format ranking``: rows of ``qid, question,
pid, passage, label`` in TSV, CSV or JSON lines, the columns renamed by ``--data.ranking_columns``).

Read by :mod:`hire.data.ranking`; a passage longer than ``--data.max_length`` leaves (with its question) is cut
short, and a warning says how many were. Predicted by :class:`hire.model.HireModel` with ``task_type="ranking"``
(one output; its loss, pointwise or the pairwise rank hinge, is the training's ``--train.rank_loss``). Every
evaluation ranks each question's candidates (:func:`hire.data.trec.rank_candidates`: score descending, ties by
pid descending, trec_eval's order) and is scored by :func:`hire.metrics.ranking_metrics` (MAP, the ``score``;
MRR; P@1; nDCG@10 for graded labels); its predictions are written as a TREC run file and qrels beside the JSON
lines. WikiQA's test split, and a custom test file with labels, are scored once at the end (``held_out``).

A bi-encoder (``--model.ranker bi``, :class:`hire.model.BiEncoder`; :meth:`RankingTasks.build` sets
``task.options["ranker"]``)
reads each question and passage apart (:func:`encode_apart`): every evaluation encodes each distinct question and
passage text once and scores every candidate from the vectors; training batches hold whole questions, with each
distinct text of the batch encoded once (``--train.rank_loss in-batch`` or ``pairwise``).

Which questions count: ``--data.keep`` (default ``has-positive``) filters the evaluation splits; training reads
every question (the pairwise loss uses those with at least one pair of different labels).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from hire.checks import check_input_file, replacing, writing
from hire.config import ConfigError, DataConfig, RunConfig, TrainConfig
from hire.data.batching import Collator, EncodedSplit
from hire.data.examples import DataError
from hire.data.ranking import (
    RankingExample,
    RankingFile,
    check_grades,
    group_questions,
    keep_questions,
    read_ranking_file,
    read_wikiqa,
)
from hire.data.trec import rank_candidates, write_qrels, write_run
from hire.evaluation import eval_loader, model_outputs
from hire.metrics import RANKING_MEASURES, ranking_metrics
from hire.tasks.sequence.tasktype import predict as predict_scores
from hire.tasktype import Predictions, TaskData, TaskType, read_split


class RankingTasks(TaskType):

    # -- reader --------------------------------------------------------------------------------------
    def load(self, cfg: DataConfig, with_train: bool = True) -> TaskData:
        """Every split the options name, read and checked: the training split keeps every question; dev and test
        keep those of ``--data.keep``, and their labels must be whole numbers (TREC grades). ``max_*_examples``
        count questions (a question is never cut)."""
        for option, n in (("--data.max_train_examples", cfg.max_train_examples),
                          ("--data.max_eval_examples", cfg.max_eval_examples)):
            if n is not None and n < 1:
                raise DataError(f"{option}: must be >= 1, not {n}")
        missing: dict[str, str] = {}
        if cfg.task.lower() == "wikiqa":
            train_file = read_wikiqa(cfg.data_dir, "train", keep="all") if with_train else None
            read_named = lambda split: read_wikiqa(cfg.data_dir, split, keep=cfg.keep)  # noqa: E731
            dev_file = read_split(read_named, "dev", "dev", with_train, missing)
            test_file = read_split(read_named, "test", "test", with_train, missing)
            test_labelled = True
            name = "WikiQA"
        else:
            columns = dict(cfg.ranking_columns) or None

            def read(path: str | None, option: str, keep: str) -> RankingFile | None:
                if path is None:
                    return None
                check_input_file(path, option)
                try:
                    return read_ranking_file(path, columns=columns, keep=keep, option=option)
                except ValueError as err:
                    if isinstance(err, DataError):
                        raise
                    raise ConfigError(f"--data.ranking_columns: {err}") from None

            train_file = read(cfg.train_file, "--data.train_file", "all") if with_train else None
            dev_file = read(cfg.dev_file, "--data.dev_file", cfg.keep)
            test_file, test_labelled = None, False
            if cfg.test_file is not None:  # unlabelled: predicted only; labelled: also filtered and scored
                test_file = read(cfg.test_file, "--data.test_file", "all")
                test_labelled = test_file is not None and test_file.examples[0].label is not None
                if test_labelled:
                    kept, dropped = keep_questions(test_file.examples, cfg.keep)
                    test_file = RankingFile(test_file.path, kept, dropped)  # type: ignore[union-attr]
            name = "custom"  # not the training file's name ("train" for train.tsv): the task is the user's
        train = _first_questions(train_file.examples, cfg.max_train_examples) if train_file else []
        if train_file is not None:
            _check_training(train_file, train)
        dev = _evaluation_split(dev_file, cfg.max_eval_examples, "--data.dev_file", cfg.keep)
        held, test = [], []
        if test_file is not None:
            if test_labelled:
                held = _evaluation_split(test_file, cfg.max_eval_examples, "--data.test_file", cfg.keep)
            else:
                test = _first_questions(test_file.examples, cfg.max_eval_examples)
        graded = any(ex.label not in (0, 1) for split in (dev, held) for ex in split)
        metrics = (*RANKING_MEASURES, "ndcg@10") if graded else RANKING_MEASURES  # MAP picks the best model
        return TaskData(name, None, metrics, train, {"dev": dev} if dev else {}, {"test": test} if test else {},
                        held_out={"test": held} if held else {}, options={"keep": cfg.keep, "graded": graded},
                        missing=missing)

    def model_options(self, task: TaskData) -> dict[str, Any]:
        """Which evaluation questions counted (``keep``), for the record."""
        return {"task_options": {"keep": task.options.get("keep", "has-positive")}}

    def loss_options(self, train: TrainConfig) -> dict[str, Any]:
        return {"rank_loss": train.rank_loss, "rank_margin": float(train.rank_margin)}

    def build(self, cfg: RunConfig, task: TaskData) -> tuple[Any, Any]:
        """A cross-encoder as any model (:meth:`TaskType.build`), or a bi-encoder (``--model.ranker bi``: validated,
        a bi-encoder's head and loss, no init_from), whose questions and passages are then encoded apart."""
        if cfg.model.ranker != "bi":
            return super().build(cfg, task)
        from hire.model import build_bi_encoder
        from hire.tasktype import load_tokenizer_for

        task.options["ranker"] = "bi"  # the ranking type encodes questions and passages apart
        loss = self.loss_options(cfg.train)
        model = build_bi_encoder(cfg.model.encoder, cfg.model.head, loss["rank_loss"], loss["rank_margin"],
                                 self.model_options(task).get("task_options"))
        return model, load_tokenizer_for(cfg.model.encoder, "--model.encoder")

    def prepare_evaluation(self, task: TaskData, config: dict[str, Any]) -> None:
        if config.get("ranker") == "bi":
            task.options["ranker"] = "bi"  # the ranking type encodes questions and passages apart

    def final_record(self, model: Any) -> dict[str, Any]:
        from hire.model import BiEncoder

        return {"ranker": "bi"} if isinstance(model, BiEncoder) else {}

    def train_batches(self, task: TaskData, split: Dataset, train: TrainConfig) -> Any:
        """Pairwise: :class:`QuestionBatches` of the questions that hold a pair of different labels (the others
        add nothing to the hinge loss); in-batch (a bi-encoder's): :class:`QuestionBatches` of the questions with a
        relevant candidate (the targets; the others would only add negatives); pointwise: length-grouped batches of
        single candidates."""
        if train.rank_loss == "in-batch":  # the bi-encoder's: questions with a relevant candidate are targets
            assert isinstance(split, BiRankingSplit) and split.labels is not None
            labels = split.labels
            questions = [members for members in split.questions() if any(labels[i] > 0 for i in members)]
            if not questions:
                raise DataError("--train.rank_loss in-batch: no training question has a relevant candidate "
                                "(label > 0) to rank against the batch's other passages")
            return QuestionBatches(questions, train.batch_size, seed=train.seed)
        if train.rank_loss != "pairwise":
            return super().train_batches(task, split, train)
        assert isinstance(split, (RankingSplit, BiRankingSplit)) and split.labels is not None
        questions = [members for members in split.questions()
                     if len({split.labels[i] for i in members}) > 1]
        if not questions:
            raise DataError("--train.rank_loss pairwise: no training question has candidates of different labels "
                            "(a relevant and an irrelevant one), so there is no pair to rank; use pointwise")
        return QuestionBatches(questions, train.batch_size, seed=train.seed)

    # -- tokenization and collation ------------------------------------------------------------------
    def encode(self, task: TaskData, examples: Sequence[RankingExample], tokenizer: Any, max_length: int,
               labelled: bool = True) -> RankingSplit | BiRankingSplit:
        """Pairs read together (a cross-encoder's), or questions and passages apart where ``task.options`` says
        the ranker is a bi-encoder (``ranker: bi``)."""
        if task is not None and task.options.get("ranker") == "bi":
            return encode_apart(examples, tokenizer, max_length, labelled)
        return encode_pairs(examples, tokenizer, max_length, labelled)

    def collator(self, pad_token_id: int) -> RankingCollator:
        return RankingCollator(pad_token_id)

    # -- predictions, metrics, files -----------------------------------------------------------------
    def predict(self, model: Any, loader: DataLoader, split: Any, accelerator: Accelerator,
                desc: str = "predict") -> Predictions:
        """Each candidate's score (N,), in example order. A bi-encoder's split (:class:`BiRankingSplit`) is scored
        by :func:`predict_apart`: each distinct text encoded once, in batches of the loader's size."""
        if isinstance(split, BiRankingSplit):
            return predict_apart(model, split, accelerator, _batch_size(loader), desc)
        return same_input_same_score(predict_scores(model, loader, accelerator, desc), split.features)

    def score(self, task: TaskData, preds: Predictions, examples: Sequence[RankingExample],
              split: Any) -> dict[str, float]:
        """MAP (``score``), MRR, P@1 (and nDCG@10 for graded labels) over the questions with a relevant
        candidate, through ir-measures (trec_eval's definitions)."""
        return ranking_metrics(examples, [float(s) for s in preds.logits], graded=task.options.get("graded"))

    def write_predictions(self, path: Path, task: TaskData, examples: Sequence[RankingExample],
                          preds: Predictions) -> None:
        """``path`` (JSON lines: each candidate in rank order), the TREC run file beside it (``.run``) and, for
        labelled examples, the qrels (``.qrels``)."""
        labelled = bool(examples) and all(ex.label is not None for ex in examples)
        write_ranking(path, path.with_suffix(".run"), path.with_suffix(".qrels") if labelled else None, examples,
                      [float(s) for s in preds.logits], preds.layer_weights)


def same_input_same_score(preds: Predictions, features: Sequence[dict[str, list[int]]]) -> Predictions:
    """``preds`` with every candidate whose tokens are those of an earlier one given that one's score (and layer
    weights). The same pair scored in two batches of other lengths can differ in the last bit of float32 (the
    kernels sum in another order), which would order two copies of one passage by that noise rather than by the
    tie rule (:func:`hire.data.trec.rank_candidates`): identical inputs, identical scores, by construction."""
    first: dict[tuple[tuple[int, ...], ...], int] = {}
    logits = np.array(preds.logits, copy=True)
    weights = None if preds.layer_weights is None else np.array(preds.layer_weights, copy=True)
    for i, f in enumerate(features):
        j = first.setdefault(tuple(tuple(f[k]) for k in sorted(f)), i)
        if j != i:
            logits[i] = logits[j]
            if weights is not None:
                weights[i] = weights[j]
    return Predictions(logits, weights, preds.seconds)


def _first_questions(examples: list[RankingExample], n: int | None) -> list[RankingExample]:
    """The candidates of the first ``n`` questions (all when ``n`` is None)."""
    if n is None:
        return examples
    kept = set(list(group_questions(examples))[:n])
    return [ex for ex in examples if ex.qid in kept]


def _check_training(file: RankingFile, train: list[RankingExample]) -> None:
    """Training needs labels, and a relevant and an irrelevant candidate somewhere (else nothing is learnt)."""
    if any(ex.label is None for ex in train):
        raise DataError(f"{file.path}: the training file has no label column")
    if not any(ex.label > 0 for ex in train):  # type: ignore[operator]
        raise DataError(f"{file.path}: no candidate is relevant (label > 0); a ranker learns from relevant and "
                        "irrelevant ones")
    if not any(ex.label == 0 for ex in train):
        raise DataError(f"{file.path}: every candidate is relevant (label > 0); a ranker learns from relevant and "
                        "irrelevant ones")


def _evaluation_split(file: RankingFile | None, n: int | None, option: str, keep: str) -> list[RankingExample]:
    """A labelled evaluation split: whole-number grades (TREC qrels hold integers), at least one question with a
    relevant candidate after ``keep``."""
    if file is None:
        return []
    check_grades(file.examples, file.path, f"{option} has no label column; a labelled file picks and scores the model",
                 "; evaluation labels are relevance grades 0, 1, 2, ... (as in TREC qrels)")
    examples = _first_questions(file.examples, n)
    if not any(ex.label and ex.label >= 1 for ex in examples):
        dropped = ", ".join(f"{count} with {reason}" for reason, count in file.dropped.items() if count)
        raise DataError(f"{file.path}: no question with a relevant candidate (label >= 1) to score with "
                        f"--data.keep {keep}" + (f" (dropped: {dropped})" if dropped else ""))
    return examples


# -- tokenization ------------------------------------------------------------------------------------------


def _members(groups: Sequence[int]) -> list[list[int]]:
    """Each question's item indices, from each item's question (``groups``), questions in order of first
    appearance."""
    members: dict[int, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    return list(members.values())


@dataclass
class RankingSplit(EncodedSplit):
    """Tokenized (question, passage) pairs: one dict of token lists per candidate, its label (relevance grade)
    and its question's index (``groups``: questions numbered in order of first appearance); an item is
    :class:`EncodedSplit`'s with ``groups`` added."""

    groups: list[int]
    truncated: int = 0  # passages cut short to fit max_length

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {**super().__getitem__(i), "groups": self.groups[i]}

    def questions(self) -> list[list[int]]:
        """Each question's item indices, questions in order of first appearance."""
        return _members(self.groups)


def _labels(examples: Sequence[RankingExample]) -> list[float]:
    """The candidates' labels as floats; a ValueError where one is missing or not finite (checked before the
    conversion, so that a missing label is this message, not a TypeError)."""
    if any(ex.label is None or not math.isfinite(float(ex.label)) for ex in examples):
        raise ValueError("a labelled split needs a finite label on every candidate")
    return [float(ex.label) for ex in examples]  # type: ignore[arg-type]


def encode_pairs(examples: Sequence[RankingExample], tokenizer: Any, max_length: int,
                 labelled: bool = True) -> RankingSplit:
    """Tokenize each candidate as ``[CLS] question [SEP] passage [SEP]`` (the tokenizer's own pair layout) in at
    most ``max_length`` tokens. The passage is cut short first; a question too long to leave one passage token is
    cut to leave one. A warning says how many passages (and questions) were cut."""
    if not examples:
        raise ValueError("no candidates to encode (an empty split)")
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    if room < 2:
        raise ValueError(f"max_length must leave room for a token of the question and one of the passage beside "
                         f"the special tokens, not {max_length!r}")
    questions = sorted({ex.question for ex in examples})
    # Lengths alone, capped a token beyond anything that fits (a 10,000-word passage is not tokenized whole).
    question_ids = dict(zip(questions, tokenizer(questions, add_special_tokens=False, truncation=True,
                                                 max_length=room + 1)["input_ids"], strict=True))
    cut_questions = {q: _cut_to(tokenizer, q, room - 1) for q, ids in question_ids.items() if len(ids) > room - 1}
    passage_ids = tokenizer([ex.passage for ex in examples], add_special_tokens=False, truncation=True,
                            max_length=room + 1)["input_ids"]
    firsts = [cut_questions.get(ex.question, ex.question) for ex in examples]
    enc = tokenizer(firsts, [ex.passage for ex in examples], truncation="only_second", max_length=max_length)
    keys = [k for k in ("input_ids", "token_type_ids") if k in enc]
    features = [{k: enc[k][i] for k in keys} for i in range(len(examples))]
    # A question cut as text can tokenize longer inside the pair (a word cut in its middle splits anew); the
    # tokenizer then leaves such a pair whole. Those few are cut again, from both sides, to fit.
    over = [i for i, f in enumerate(features) if len(f["input_ids"]) > max_length]
    if over:
        again = tokenizer([firsts[i] for i in over], [examples[i].passage for i in over], truncation="longest_first",
                          max_length=max_length)
        for j, i in enumerate(over):
            features[i] = {k: again[k][j] for k in keys}
    truncated = 0
    for i, ex in enumerate(examples):
        kept = min(len(question_ids[ex.question]), room - 1)
        truncated += kept + len(passage_ids[i]) > room
    if truncated or cut_questions:
        cut = sum(ex.question in cut_questions for ex in examples)
        questions_note = (f"; {len(cut_questions)} question(s) ({cut} candidates) were longer than that alone and "
                          "were cut to leave one passage token") if cut_questions else ""
        warnings.warn(f"{truncated} of {len(examples)} passages were cut short to fit --data.max_length "
                      f"{max_length} tokens together with their question{questions_note}", RuntimeWarning,
                      stacklevel=2)
    group_of = {qid: i for i, qid in enumerate(group_questions(examples))}
    labels = _labels(examples) if labelled else None
    return RankingSplit(features, labels, [group_of[ex.qid] for ex in examples], truncated)


def _cut_to(tokenizer: Any, text: str, tokens: int) -> str:
    """``text`` cut after its first ``tokens`` tokens (at a token boundary, from the tokenizer's offsets)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=True,
                    max_length=tokens)
    end = enc["offset_mapping"][-1][1] if enc["offset_mapping"] else 0
    return text[:end]


@dataclass
class BiRankingSplit(Dataset):
    """Questions and passages tokenized apart, for a bi-encoder: each distinct question text and each distinct
    passage text once (``question_texts``, ``passage_texts``: dicts of token lists), and each candidate's question text
    (``question_of``), passage text (``passage_of``), label (relevance grade) and question (``groups``: questions
    numbered in order of first appearance).

    As a dataset its items are the candidates (for training: each with its question's and passage's tokens and
    text indices, which :class:`RankingCollator` uses to encode each distinct text of a batch once);
    :meth:`texts` is the dataset of the distinct texts, questions first, that an evaluation encodes."""

    question_texts: list[dict[str, list[int]]]
    passage_texts: list[dict[str, list[int]]]
    question_of: list[int]
    passage_of: list[int]
    labels: list[float] | None
    groups: list[int]
    truncated: int = 0  # passages cut short to fit max_length
    pad_token_id: int = 0

    def __len__(self) -> int:
        return len(self.question_of)

    def __getitem__(self, i: int) -> dict[str, Any]:
        q, p = self.question_of[i], self.passage_of[i]
        item: dict[str, Any] = {"index": i, **self.passage_texts[p], "query_key": q, "passage_key": p,
                                "groups": self.groups[i]}
        item.update({f"query_{k}": v for k, v in self.question_texts[q].items()})
        if self.labels is not None:
            item["labels"] = self.labels[i]
        return item

    @property
    def lengths(self) -> list[int]:
        return [len(self.passage_texts[p]["input_ids"]) for p in self.passage_of]

    def questions(self) -> list[list[int]]:
        """Each question's item indices, questions in order of first appearance (:meth:`RankingSplit.questions`)."""
        return _members(self.groups)

    def texts(self) -> EncodedSplit:
        """The distinct texts, questions then passages, each once (unlabelled: an item is its ``index`` and token
        lists), for :func:`hire.evaluation.eval_loader`."""
        return EncodedSplit([*self.question_texts, *self.passage_texts], None)


def encode_apart(examples: Sequence[RankingExample], tokenizer: Any, max_length: int,
                 labelled: bool = True) -> BiRankingSplit:
    """Tokenize each distinct question and each distinct passage on its own (``[CLS] text [SEP]``), at most
    ``max_length`` tokens each: a bi-encoder reads them apart. One warning says how many passages (and questions)
    were cut short."""
    if not examples:
        raise ValueError("no candidates to encode (an empty split)")
    room = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if room < 1:
        raise ValueError(f"max_length must leave room for a token beside the special tokens, not {max_length!r}")
    question_texts = list(dict.fromkeys(ex.question for ex in examples))
    passage_texts = list(dict.fromkeys(ex.passage for ex in examples))

    def tokenize(texts: list[str]) -> tuple[list[dict[str, list[int]]], list[bool]]:
        # Lengths alone, capped a token beyond what fits (a 10,000-word passage is not tokenized whole).
        bare = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=room + 1)["input_ids"]
        enc = tokenizer(texts, truncation=True, max_length=max_length)
        keys = [k for k in ("input_ids", "token_type_ids") if k in enc]
        return [{k: enc[k][i] for k in keys} for i in range(len(texts))], [len(ids) > room for ids in bare]

    questions, cut_q = tokenize(question_texts)
    passages, cut_p = tokenize(passage_texts)
    q_index = {text: i for i, text in enumerate(question_texts)}
    p_index = {text: i for i, text in enumerate(passage_texts)}
    question_of = [q_index[ex.question] for ex in examples]
    passage_of = [p_index[ex.passage] for ex in examples]
    truncated = sum(cut_p[p] for p in passage_of)
    if truncated or any(cut_q):
        note = f"; {sum(cut_q)} question(s) were cut too" if any(cut_q) else ""
        warnings.warn(f"{truncated} of {len(examples)} passages were cut short to fit --data.max_length {max_length} "
                      f"tokens (questions and passages are encoded apart){note}", RuntimeWarning, stacklevel=2)
    group_of = {qid: i for i, qid in enumerate(group_questions(examples))}
    labels = _labels(examples) if labelled else None
    return BiRankingSplit(questions, passages, question_of, passage_of, labels,
                          [group_of[ex.qid] for ex in examples], truncated, tokenizer.pad_token_id)


def predict_apart(model: Any, split: BiRankingSplit, accelerator: Accelerator, batch_size: int,
                  desc: str = "predict") -> Predictions:
    """A bi-encoder's scores of a split's candidates, in example order: each distinct question and passage text
    encoded once (batches of ``batch_size`` texts of similar length), then every candidate scored from the
    vectors (cosine x the model's scale, in float32)."""
    from hire.model import scaled_cosine

    texts = split.texts()
    loader = accelerator.prepare(eval_loader(texts, batch_size, Collator(split.pad_token_id)))
    (indices, vectors), seconds = model_outputs(model, loader, accelerator,
                                                lambda batch, out: (batch["index"], out.embeddings), desc)
    found = torch.cat(indices)
    table = torch.empty(len(texts), vectors[0].shape[-1])
    table[found] = torch.cat(vectors).float()
    questions, passages = table[:len(split.question_texts)], table[len(split.question_texts):]
    scale = float(accelerator.unwrap_model(model).config.scale)
    scores = scaled_cosine(questions[torch.tensor(split.question_of)], passages[torch.tensor(split.passage_of)],
                           scale)
    return Predictions(scores.numpy(), None, seconds)


def _batch_size(loader: Any, default: int = 64) -> int:
    """The batch size of a (prepared) evaluation loader: its batch sampler's, found through Accelerate's wrappers."""
    sampler = getattr(loader, "batch_sampler", None)
    for _ in range(4):
        size = getattr(sampler, "batch_size", None)
        if isinstance(size, int) and size > 0:
            return size
        sampler = getattr(sampler, "batch_sampler", None)
    return default


class RankingCollator(Collator):
    """Pads candidates into a batch (:class:`hire.data.batching.Collator`), with ``groups``: each candidate's
    question index, which the pairwise loss pairs candidates by.

    A bi-encoder's candidates (items of :class:`BiRankingSplit`) become a batch of each distinct question text
    (``query_input_ids``, ``query_attention_mask``, ...) and each distinct passage text (``input_ids``, ...) once,
    with each candidate's rows (``query_index``, ``passage_index``), ``labels`` and ``groups``."""

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Tensor]:
        if items and "query_key" in items[0]:
            return self._apart(items)
        batch = super().__call__(items)
        batch["groups"] = torch.tensor([it["groups"] for it in items])
        if "labels" in batch:
            batch["labels"] = batch["labels"].float()
        return batch

    def _apart(self, items: list[dict[str, Any]]) -> dict[str, Tensor]:
        batch: dict[str, Tensor] = {}
        for kind, prefix in (("passage", ""), ("query", "query_")):
            first: dict[int, dict[str, Any]] = {}  # each distinct text of the batch: its first candidate
            for it in items:
                first.setdefault(it[f"{kind}_key"], it)
            texts = [{"index": key, **{k: it[prefix + k] for k in ("input_ids", "token_type_ids") if prefix + k in it}}
                     for key, it in first.items()]
            batch.update({prefix + k: v for k, v in super().__call__(texts).items() if k != "index"})
            row = {key: i for i, key in enumerate(first)}
            batch[f"{kind}_index"] = torch.tensor([row[it[f"{kind}_key"]] for it in items])
        batch["groups"] = torch.tensor([it["groups"] for it in items])
        batch["index"] = torch.tensor([it["index"] for it in items])
        if "labels" in items[0]:
            batch["labels"] = torch.tensor([float(it["labels"]) for it in items])
        return batch


class QuestionBatches(Sampler[list[int]]):
    """Batches of whole questions, at most ``batch_size`` candidates each (a question with more is a batch of its
    own), every question once per epoch, in an order fixed by (seed, epoch) so that a resumed run sees the same.

    Each epoch packs the questions by first-fit decreasing (the largest question first, into the first batch with
    room), taking questions of the same size in a shuffled order, then shuffles the batches. The sizes alone fix
    how the batches fill, so every epoch has the same number of batches (``len``), with other questions in them.
    (Hand-written: PyTorch's samplers batch single items, and no library packs groups into a fixed batch count.)
    """

    whole_groups = True  # a batch split over processes would cut questions (see hire.training)

    def __init__(self, questions: Sequence[Sequence[int]], batch_size: int, seed: int = 0):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, not {batch_size!r}")
        if not questions or any(not members for members in questions):
            raise ValueError("every question needs at least one candidate, and there must be one question")
        self.questions = [list(members) for members in questions]
        self.batch_size, self.seed, self.epoch = batch_size, seed, 0
        self._count = len(self._pack(list(range(len(self.questions)))))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self._count

    def _pack(self, order: list[int]) -> list[list[int]]:
        """First-fit decreasing of the questions, ties (same size) in ``order``; lists of question indices."""
        rank = {q: i for i, q in enumerate(order)}
        sizes = [len(members) for members in self.questions]
        bins: list[list[int]] = []
        room: list[int] = []
        for q in sorted(range(len(sizes)), key=lambda q: (-sizes[q], rank[q])):
            for b, left in enumerate(room):
                if left >= sizes[q]:
                    bins[b].append(q)
                    room[b] -= sizes[q]
                    break
            else:
                bins.append([q])
                room.append(self.batch_size - sizes[q])
        return bins

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        bins = self._pack(torch.randperm(len(self.questions), generator=g).tolist())
        for b in torch.randperm(len(bins), generator=g).tolist():
            yield [i for q in bins[b] for i in self.questions[q]]


# -- writing -----------------------------------------------------------------------------------------------


def write_ranking(path: Path, run_path: Path, qrels_path: Path | None, examples: Sequence[RankingExample],
                  scores: Sequence[float], layer_weights: Any = None, tag: str = "hire") -> None:
    """Each question's candidates ranked: ``path`` JSON lines (``qid``, ``pid``, ``rank``, ``score``, the label
    and the input line where known, the layer weights where the head has them), in rank order; ``run_path`` the
    TREC run file (``qid Q0 pid rank score tag``); ``qrels_path`` the labels as TREC qrels (when given)."""
    ranked = rank_candidates(examples, scores)  # checks the scores and ids before anything is written
    where = {(ex.qid, ex.pid): i for i, ex in enumerate(examples)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with writing(path), replacing(path) as tmp, tmp.open("w") as f:
        for qid, pid, rank, score in ranked:
            i = where[qid, pid]
            row: dict[str, Any] = {"qid": qid, "pid": pid, "rank": rank, "score": score}
            if examples[i].label is not None:
                row["label"] = examples[i].label
            if examples[i].line:
                row["line"] = examples[i].line
            if layer_weights is not None:
                row["layer_weights"] = [round(float(w), 6) for w in layer_weights[i]]
            f.write(json.dumps(row) + "\n")
    with writing(run_path):
        write_run(run_path, examples, scores, tag=tag)
    if qrels_path is not None:
        with writing(qrels_path):
            write_qrels(qrels_path, examples)


RANKING = RankingTasks()
