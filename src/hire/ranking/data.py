"""The rank probe's data: every split read and checked (:func:`load_data`), its fingerprint (:func:`data_sha256`), and
a split's rows grouped by question (:class:`Candidates`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hire.data.examples import DataError
from hire.data.ranking import RankingExample, check_grades, read_ranking_file, read_wikiqa
from hire.ranking.settings import RankProbeOptions

SPLITS = ("train", "dev", "test")


@dataclass
class Candidates:
    """A split's (question, passage) rows as indices: ``question[i]`` is row ``i``'s question (its group, in order of
    first appearance), ``passage[i]`` its passage among the split's distinct passage texts, which are encoded once."""

    examples: list[RankingExample]
    question: np.ndarray  # (N,) int64
    passage: np.ndarray  # (N,) int64
    labels: np.ndarray  # (N,) float32; NaN where a row has no label
    question_texts: list[str]  # one per question (group)
    passage_texts: list[str]  # distinct passage texts
    rows: list[np.ndarray] = field(default_factory=list)  # each question's rows

    @classmethod
    def of(cls, examples: Sequence[RankingExample]) -> Candidates:
        qids: dict[str, int] = {}
        texts: dict[str, int] = {}
        question, passage, question_texts = [], [], []
        for e in examples:
            if e.qid not in qids:
                qids[e.qid] = len(qids)
                question_texts.append(e.question)
            question.append(qids[e.qid])
            passage.append(texts.setdefault(e.passage, len(texts)))
        q = np.asarray(question, dtype=np.int64)
        order = np.argsort(q, kind="stable")
        bounds = np.searchsorted(q[order], np.arange(len(qids) + 1))
        rows = [order[bounds[i]:bounds[i + 1]] for i in range(len(qids))]
        labels = np.asarray([np.nan if e.label is None else e.label for e in examples], dtype=np.float32)
        return cls(list(examples), q, np.asarray(passage, dtype=np.int64), labels, question_texts, list(texts), rows)

    def pairs(self, question: int) -> np.ndarray:
        """(P, 2) positions within the question's rows of every (better, worse) candidate pair."""
        y = self.labels[self.rows[question]]
        better, worse = np.nonzero(y[:, None] > y[None, :])
        return np.stack([better, worse], axis=1)


@dataclass
class RankingData:
    splits: dict[str, list[RankingExample]]  # train, dev and (where given) test
    files: dict[str, str]
    dropped: dict[str, dict[str, int]]


_UNLABELLED = ("the candidates have no labels (no label column); rank-probe learns from and scores labelled train, "
               "dev and test files")
_GRADES = " (relevance grades are integers in TREC qrels)"


def load_data(options: RankProbeOptions) -> RankingData:
    """Every split, read and checked (before anything is encoded or written); ``--max_train_questions`` applied."""
    splits, files, dropped = {}, {}, {}
    for split in SPLITS:
        if options.task == "wikiqa":
            read = read_wikiqa(options.data_dir, split, options.keep)
        elif split in options.files:
            # The labels first, on every candidate: a file without them is refused as such, not as a --keep
            # matter (keeping questions by their labels needs labels).
            whole = read_ranking_file(options.files[split], options.format, options.columns, "all", f"--{split}_file")
            check_grades(whole.examples, whole.path, _UNLABELLED, _GRADES)
            read = read_ranking_file(options.files[split], options.format, options.columns, options.keep,
                                     f"--{split}_file")
        else:
            continue
        if not read.examples:
            raise DataError(f"{read.path}: no question left to rank (--keep {options.keep} dropped "
                            f"{sum(read.dropped.values())}: {read.dropped})")
        check_grades(read.examples, read.path, _UNLABELLED, _GRADES)
        if split != "train" and not any(e.label for e in read.examples):
            raise DataError(f"{read.path}: no candidate is relevant (label >= 1), so MAP and MRR are undefined")
        splits[split], files[split], dropped[split] = read.examples, str(read.path), read.dropped
    if options.max_train_questions is not None:
        qids = list(dict.fromkeys(e.qid for e in splits["train"]))
        if options.max_train_questions < len(qids):
            rng = np.random.default_rng(options.fit.seed)
            chosen = {qids[i] for i in rng.choice(len(qids), options.max_train_questions, replace=False)}
            splits["train"] = [e for e in splits["train"] if e.qid in chosen]
    train = Candidates.of(splits["train"])
    if any(loss == "hinge" for _, loss in options.blocks()) and not any(
            len(train.pairs(q)) for q in range(len(train.rows))):
        raise DataError(f"{files['train']}: no question has both a better and a worse candidate, so the hinge loss "
                        "has no pair to learn from (use --losses pointwise)")
    return RankingData(splits, files, dropped)


def data_sha256(data: RankingData) -> str:
    """The SHA-256 of every split's candidates as read (question, passage, ids and grade): what the finished
    blocks were fitted and scored on, whatever the files are called (a file changed in place gives another key)."""
    digest = hashlib.sha256()
    for split, examples in sorted(data.splits.items()):
        digest.update(split.encode() + b"\0")
        for e in examples:
            digest.update(json.dumps([e.qid, e.question, e.pid, e.passage, e.label], ensure_ascii=False).encode()
                          + b"\n")
    return digest.hexdigest()
