"""Answer ranking on a frozen encoder's pooled states: the layer x pooling x interaction grid.

The layer-wise study (``layerwise-bert-activations-blog.txt``, part 2) ranks a question's candidate passages with
BERT embeddings: the question and each passage are encoded *apart*, pooled (CLS, SEP, mean, max) from a hidden
state, and combined by a scorer ``s(u, v)`` (``u`` the question's vector, ``v`` the passage's):

- ``cosine``:   ``u . v / (|u| |v|)``, no training, on the raw pooled vectors;
- ``bilinear``: ``u^T W v + b``;
- ``logistic``: ``w . [u; v; u*v; |u-v|] + b``;
- ``mlp``:      ``w2 . relu(W1 [u; v; u*v; |u-v|] + b1) + b2`` (one hidden layer).

The learned scorers read standardised features (each dimension centred and scaled by its mean and spread over the
training questions and passages together, so that ``u`` and ``v`` stay comparable) and are trained with the
pairwise rank hinge loss ``max(0, margin - s(q, p+) + s(q, p-))`` over every (better, worse) candidate pair of a
question, or pointwise binary cross-entropy for comparison; Adam; early stopping on dev MAP.

**Batched training.** Every feature set (:func:`hire.probing.classifiers.feature_sets`: each hidden state, first +
last, the last four, all, under each pooling) is trained at once: feature sets of the same width form a
:class:`FeatureGroup` whose parameters are single tensors with a leading feature-set axis ``F``, and one optimiser
step updates them all on the same batch of questions. Nothing couples the feature sets: the loss is the sum of
their own mean losses, Adam works element by element, each set's initial weights come from a generator seeded by
the set's own name, and early stopping keeps each set's own best weights. A set trained alone therefore learns
what it learns in the batch (the tests check it); the batch only replaces ``F`` small matrix products by one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from hire.data.examples import DataError, Example
from hire.data.ranking import RankingExample, check_grades, read_ranking_file, read_wikiqa
from hire.data.trec import write_qrels, write_run
from hire.figures import slug
from hire.hardware import machine as run_machine
from hire.metrics import ranking_metrics
from hire.probing.classifiers import FeatureSet, feature_sets
from hire.probing.features import FeatureSettings, SplitFeatures, count_cut, split_features
from hire.probing.grid import RESULTS, load_encoders, save_results
from hire.probing.pooling import POOLINGS
from hire.probing.sources import EncoderSource
from hire.ranking.bm25 import BM25Settings, bm25_scores
from hire.ranking.tables import FORMAT, GROWS, chosen_cell, read_results
from hire.runs import mark_output_folder

SCORERS = ("cosine", "bilinear", "logistic", "mlp")
LEARNED = SCORERS[1:]
LOSSES = ("hinge", "pointwise")
NO_LOSS = "none"  # the loss of a scorer that is not trained (cosine)
_EVAL_ROWS = 1024  # candidates scored at once when evaluating (bounds memory, not results)


@dataclass(frozen=True)
class FitSettings:
    """How the learned scorers are trained (the same for every feature set)."""

    epochs: int = 10  # at most; early stopping on dev MAP usually ends sooner
    patience: int = 2  # epochs without a better dev MAP before a feature set stops
    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_questions: int = 16  # questions per step (all their candidates)
    margin: float = 1.0  # of the hinge loss
    mlp_hidden: int = 128
    seed: int = 0
    device: str = "cpu"


# -- candidates: the rows of a split, grouped by question --------------------------------------------------------


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


# -- feature sets grouped by width --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureGroup:
    """Feature sets that concatenate the same number of hidden states, trained as one batch of ``F`` scorers."""

    sets: tuple[FeatureSet, ...]

    @property
    def layers(self) -> Tensor:
        return torch.tensor([fs.layers for fs in self.sets], dtype=torch.long)  # (F, k)

    @property
    def poolings(self) -> Tensor:
        return torch.tensor([POOLINGS.index(fs.pooling) for fs in self.sets], dtype=torch.long)  # (F,)

    def subset(self, indices: Sequence[int]) -> FeatureGroup:
        return FeatureGroup(tuple(self.sets[i] for i in indices))


def feature_groups(num_hidden_states: int) -> list[FeatureGroup]:
    """Every feature set of :func:`feature_sets`, grouped by how many hidden states it concatenates (in order)."""
    groups: dict[int, list[FeatureSet]] = {}
    for fs in feature_sets(num_hidden_states):
        groups.setdefault(len(fs.layers), []).append(fs)
    return [FeatureGroup(tuple(sets)) for sets in groups.values()]


def gather(features: np.ndarray, group: FeatureGroup, device: str = "cpu", chunk: int = 4096) -> Tensor:
    """Pooled features ``(N, l + 1, 4, d)`` -> ``(F, N, k d)`` float32: each feature set's vectors (its hidden states
    concatenated in order), converted in chunks so that a float16 cache is never copied whole as float32."""
    layers, poolings = group.layers, group.poolings
    f, k = layers.shape
    out = torch.empty((f, len(features), k * features.shape[-1]), dtype=torch.float32, device=device)
    for start in range(0, len(features), chunk):
        x = torch.from_numpy(np.ascontiguousarray(features[start:start + chunk])).to(device)  # (n, l + 1, 4, d)
        picked = x[:, layers.to(device), poolings.to(device)[:, None]]  # (n, F, k, d)
        out[:, start:start + len(x)] = picked.permute(1, 0, 2, 3).reshape(f, len(x), -1).float()
    return out


@dataclass
class SplitData:
    """One split's candidates and its question and passage vectors for one feature group."""

    candidates: Candidates
    q: Tensor  # (F, questions, D)
    p: Tensor  # (F, passages, D)


def standardise(train: SplitData, *others: SplitData) -> None:
    """Centre and scale every dimension (per feature set) by the training questions' and passages' statistics."""
    both = torch.cat([train.q, train.p], dim=1)  # (F, n, D)
    mean = both.mean(dim=1, keepdim=True)
    std = both.std(dim=1, keepdim=True, unbiased=False)
    std = torch.where(std > 1e-6, std, torch.ones_like(std))  # a constant dimension stays zero, never divides by 0
    for split in (train, *others):
        split.q.sub_(mean).div_(std)
        split.p.sub_(mean).div_(std)


# -- scorers ------------------------------------------------------------------------------------------------------


def set_seed(seed: int, fs: FeatureSet) -> int:
    """The seed of a feature set's initial weights: its own, whatever else is trained beside it."""
    return zlib.crc32(f"{seed}|{fs.row}|{fs.pooling}".encode())


def _uniform(shape: tuple[int, ...], bound: float, generator: torch.Generator) -> Tensor:
    return (torch.rand(shape, generator=generator) * 2 - 1) * bound


class BatchedScorer(nn.Module):
    """``F`` scorers of one kind (``bilinear``, ``logistic`` or ``mlp``), one per feature set of a group, as tensors
    with a leading feature-set axis. Initial weights: bilinear ``W = I / D`` (a scaled dot product), ``b = 0``;
    logistic and MLP layers uniform in ``+-1/sqrt(fan_in)`` (torch's ``nn.Linear`` rule), biases 0."""

    def __init__(self, kind: str, sets: Sequence[FeatureSet], dim: int, hidden: int = 128, seed: int = 0) -> None:
        super().__init__()
        if kind not in LEARNED:
            raise ValueError(f"unknown learned scorer {kind!r}; choose from {', '.join(LEARNED)}")
        self.kind, f = kind, len(sets)
        self.bias = nn.Parameter(torch.zeros(f, 1))  # (F, 1)
        if kind == "bilinear":
            self.weight = nn.Parameter(torch.eye(dim).repeat(f, 1, 1) / dim)  # (F, D, D)
            return
        gens = [torch.Generator().manual_seed(set_seed(seed, fs)) for fs in sets]
        if kind == "logistic":
            self.weight = nn.Parameter(torch.stack([_uniform((4 * dim, 1), (4 * dim) ** -0.5, g) for g in gens]))
        else:  # mlp: (F, 4D, H), (F, 1, H), (F, H, 1)
            self.weight = nn.Parameter(torch.stack([_uniform((4 * dim, hidden), (4 * dim) ** -0.5, g) for g in gens]))
            self.hidden_bias = nn.Parameter(torch.zeros(f, 1, hidden))
            self.out = nn.Parameter(torch.stack([_uniform((hidden, 1), hidden ** -0.5, g) for g in gens]))

    def forward(self, u: Tensor, v: Tensor, question_of: Tensor) -> Tensor:
        """Questions ``u`` (F, Q, D), candidates ``v`` (F, B, D), each candidate's question ``(B,)`` -> (F, B)."""
        if self.kind == "bilinear":
            uw = torch.bmm(u, self.weight)  # (F, Q, D): once per question, not per candidate
            return (uw[:, question_of] * v).sum(-1) + self.bias  # (F, B)
        uq = u[:, question_of]  # (F, B, D)
        x = torch.cat([uq, v, uq * v, (uq - v).abs()], dim=-1)  # (F, B, 4D)
        if self.kind == "mlp":
            x = torch.relu(torch.bmm(x, self.weight) + self.hidden_bias)  # (F, B, H)
            return torch.bmm(x, self.out).squeeze(-1) + self.bias  # (F, B)
        return torch.bmm(x, self.weight).squeeze(-1) + self.bias  # (F, B)


def cosine(u: Tensor, v: Tensor, question_of: Tensor) -> Tensor:
    """Cosine similarity of each candidate with its question: (F, Q, D), (F, B, D), (B,) -> (F, B)."""
    return torch.nn.functional.cosine_similarity(u[:, question_of], v, dim=-1)


def score_split(scorer: Callable[[Tensor, Tensor, Tensor], Tensor], data: SplitData) -> Tensor:
    """Every candidate's score under each feature set's scorer: (F, N), in the split's row order."""
    c = data.candidates
    device = data.q.device
    out = torch.empty((data.q.shape[0], len(c.examples)), dtype=torch.float32, device=device)
    with torch.no_grad():
        for start in range(0, len(c.examples), _EVAL_ROWS):
            rows = slice(start, start + _EVAL_ROWS)
            questions, local = np.unique(c.question[rows], return_inverse=True)
            out[:, rows] = scorer(data.q[:, torch.from_numpy(questions).to(device)],
                                  data.p[:, torch.from_numpy(c.passage[rows]).to(device)],
                                  torch.from_numpy(local.reshape(-1)).to(device))
    return out


# -- training -----------------------------------------------------------------------------------------------------

Metric = Callable[[list[RankingExample], Sequence[float]], float]  # the early-stopping metric (dev MAP)


@dataclass
class GroupFit:
    """Each feature set's scores (F, N) per evaluation split with its best weights, and when those were reached."""

    scores: dict[str, np.ndarray]
    best_epoch: list[int]
    dev_map: list[float]
    epochs: int  # epochs run (the group stops once every feature set has run out of patience)


def _batch_loss(scores: Tensor, labels: Tensor, pairs: Tensor | None, loss: str, margin: float) -> Tensor:
    """Each feature set's mean loss over the batch, summed: (F, B) scores -> scalar."""
    if loss == "hinge":
        assert pairs is not None
        gap = scores[:, pairs[:, 0]] - scores[:, pairs[:, 1]]  # (F, P): better minus worse
        return torch.relu(margin - gap).mean(dim=1).sum()
    target = labels.expand_as(scores)
    return nn.functional.binary_cross_entropy_with_logits(scores, target, reduction="none").mean(dim=1).sum()


def fit_group(kind: str, loss: str, group: FeatureGroup, train: SplitData, evals: dict[str, SplitData],
              metric: Metric, settings: FitSettings) -> GroupFit:
    """Train one scorer per feature set of ``group`` at once (:class:`BatchedScorer`), with early stopping on each
    set's own ``metric`` (dev MAP) on ``evals["dev"]``; return every evaluation split's scores with each set's best
    weights. Batches are ``settings.batch_questions`` questions in an order drawn from ``settings.seed`` alone."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose from {', '.join(LOSSES)}")
    device = torch.device(settings.device)
    c = train.candidates
    labelled = np.nan_to_num(c.labels, nan=0.0)
    top = float(labelled.max()) if labelled.size and labelled.max() > 0 else 1.0
    targets = torch.from_numpy(labelled / top).to(device)  # pointwise: graded labels as soft targets in [0, 1]
    pairs = [torch.from_numpy(c.pairs(q)) for q in range(len(c.rows))]
    questions = [q for q in range(len(c.rows)) if loss != "hinge" or len(pairs[q])]
    if not questions:
        raise DataError("training data: no question has both a better and a worse candidate, so the hinge loss has "
                        "no pair to learn from")
    model = BatchedScorer(kind, group.sets, train.q.shape[-1], settings.mlp_hidden, settings.seed).to(device)
    # torch's fused Adam: the same element-wise update, about ten times faster on the bilinear scorers' D x D weights.
    optimiser = torch.optim.Adam(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay,
                                 fused=device.type in ("cpu", "cuda"))
    f = len(group.sets)
    best_map, best_epoch, waited = [-1.0] * f, [0] * f, [0] * f
    best_state = copy.deepcopy(model.state_dict())
    order = torch.Generator().manual_seed(settings.seed)
    rows = [torch.from_numpy(r) for r in c.rows]
    passage = torch.from_numpy(c.passage)
    epoch = 0
    for epoch in range(1, settings.epochs + 1):
        model.train()
        permutation = torch.randperm(len(questions), generator=order).tolist()
        for start in range(0, len(permutation), settings.batch_questions):
            batch = [questions[i] for i in permutation[start:start + settings.batch_questions]]
            batch_rows = torch.cat([rows[q] for q in batch])  # (B,)
            counts = torch.tensor([len(rows[q]) for q in batch])
            offsets = torch.cumsum(counts, 0) - counts
            batch_pairs = torch.cat([pairs[q] + o for q, o in zip(batch, offsets.tolist(), strict=True)]).to(device)
            question_of = torch.repeat_interleave(torch.arange(len(batch)), counts).to(device)
            scores = model(train.q[:, torch.tensor(batch, device=device)], train.p[:, passage[batch_rows].to(device)],
                           question_of)  # (F, B)
            optimiser.zero_grad(set_to_none=True)
            _batch_loss(scores, targets[batch_rows.to(device)], batch_pairs, loss, settings.margin).backward()
            optimiser.step()
        model.eval()
        dev = score_split(model, evals["dev"]).cpu().numpy()
        state = model.state_dict()
        for i in range(f):
            if waited[i] >= settings.patience:
                continue  # stopped: its best weights are kept, later epochs are not its own
            value = metric(evals["dev"].candidates.examples, dev[i].tolist())
            if value > best_map[i]:
                best_map[i], best_epoch[i], waited[i] = value, epoch, 0
                for name, tensor in state.items():
                    best_state[name][i] = tensor[i]
            else:
                waited[i] += 1
        if all(w >= settings.patience for w in waited):
            break
    model.load_state_dict(best_state)
    model.eval()
    scores = {split: score_split(model, data).cpu().numpy() for split, data in evals.items()}
    return GroupFit(scores, best_epoch, best_map, epoch)


def cosine_group(evals: dict[str, SplitData]) -> dict[str, np.ndarray]:
    """Cosine scores (F, N) per evaluation split, on the raw (not standardised) pooled vectors."""
    return {split: score_split(cosine, data).cpu().numpy() for split, data in evals.items()}


# -- the grid: data, features, blocks, results.json ---------------------------------------------------------------

SPLITS = ("train", "dev", "test")


@dataclass
class RankProbeOptions:
    """What ``hire rank-probe`` was asked; saved in ``results.json`` (a resumed run must ask the same)."""

    encoders: list[str]
    output_dir: str
    labels: list[str] = field(default_factory=list)
    task: str = "wikiqa"  # or "custom" (files)
    data_dir: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # custom: split -> file
    format: str = "auto"
    columns: dict[str, str | int] | None = None
    keep: str = "has-positive"
    scorers: list[str] = field(default_factory=lambda: list(SCORERS))
    losses: list[str] = field(default_factory=lambda: list(LOSSES))
    max_train_questions: int | None = None
    cache_dir: str = ""
    max_length: int = 128
    batch_size: int = 64
    mixed_precision: str = "no"  # resolved
    cache_dtype: str = "float16"
    fit: FitSettings = field(default_factory=FitSettings)
    overwrite: bool = False

    def blocks(self) -> list[tuple[str, str]]:
        """The (scorer, loss) blocks asked for: cosine once (untrained), each learned scorer with each loss."""
        return [(s, NO_LOSS) if s == "cosine" else (s, loss) for s in self.scorers
                for loss in ([NO_LOSS] if s == "cosine" else self.losses)]

    def comparable(self) -> dict[str, Any]:
        """The options that change a result (not where files go, batch size or device)."""
        values = asdict(self)
        for key in ("output_dir", "cache_dir", "batch_size", "overwrite"):
            values.pop(key)
        values["fit"].pop("device")
        return values


def block_key(scorer: str, loss: str) -> str:
    return f"{scorer}/{loss}"


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


def _texts_features(source: EncoderSource, fp: str, task: str, split: str, texts: list[str],
                    settings: FeatureSettings, cache_dir: Path) -> SplitFeatures:
    examples = [Example(str(i), text) for i, text in enumerate(texts)]
    return split_features(source, fp, task, split, examples, settings, cache_dir)


def encode_candidates(source: EncoderSource, fp: str, task: str, candidates: dict[str, Candidates],
                      settings: FeatureSettings, cache_dir: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]],
                                                                            dict[str, Any]]:
    """Each split's question and passage features ``(n, l + 1, 4, d)``, encoded apart (each distinct text once)
    through the probe's cache, and what the encoding cost: seconds, whether from the cache, how many distinct
    texts, and how many of them were cut short to ``settings.max_length`` tokens (``cut``, by split and side)."""
    features, seconds, cached, texts, cut = {}, 0.0, {}, 0, {}
    for split, c in candidates.items():
        q = _texts_features(source, fp, task, f"{split}-questions", c.question_texts, settings, cache_dir)
        p = _texts_features(source, fp, task, f"{split}-passages", c.passage_texts, settings, cache_dir)
        features[split] = (q.a, p.a)
        seconds += q.encode_seconds + p.encode_seconds
        cached[split] = q.cached and p.cached
        texts += len(c.question_texts) + len(c.passage_texts)
        cut[split] = _cut_record(q.cut, p.cut, c)
    return features, {"seconds": round(seconds, 3), "cached": cached, "texts": texts, "cut": cut}


def _cut_record(questions: int, passages: int, c: Candidates) -> dict[str, list[int]]:
    """How many of a split's distinct questions and passages were cut short, each as [cut, of how many]."""
    return {"questions": [questions, len(c.question_texts)], "passages": [passages, len(c.passage_texts)]}


def count_cut_candidates(source: EncoderSource, candidates: dict[str, Candidates], max_length: int,
                         ) -> dict[str, dict[str, list[int]]]:
    """``encode_candidates``' ``cut`` from the tokenizer alone (no weights, no features): for a results file
    written before the count was recorded, whose blocks are all done."""
    tokenizer = source.tokenizer()
    return {split: _cut_record(count_cut(tokenizer, c.question_texts, max_length),
                               count_cut(tokenizer, c.passage_texts, max_length), c)
            for split, c in candidates.items()}


def _metrics(examples: list[RankingExample], scores: np.ndarray) -> dict[str, float]:
    return {k: float(v) for k, v in ranking_metrics(examples, scores.tolist()).items()}


def _dev_map(examples: list[RankingExample], scores: Sequence[float]) -> float:
    return float(ranking_metrics(examples, scores)["map"])


def all_tied(candidates: Candidates, scores: np.ndarray) -> bool:
    """Whether every question's candidates got one and the same score: the ranking is then the tie rule's alone
    (candidates in passage-id order), and its MAP says nothing of the scorer."""
    return all(bool(np.all(scores[rows] == scores[rows][0])) for rows in candidates.rows if len(rows))


def run_block(scorer: str, loss: str, candidates: dict[str, Candidates],
              features: dict[str, tuple[np.ndarray, np.ndarray]], settings: FitSettings,
              ) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Every feature set's cell of one (scorer, loss) block, in :func:`feature_sets` order, and the scores of the
    block's best cell (by dev MAP) on each evaluation split."""
    num_hidden_states = next(iter(features.values()))[0].shape[1]
    evaluated = [s for s in ("dev", "test") if s in candidates]
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    cell_scores: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for group in feature_groups(num_hidden_states):
        needed = evaluated if scorer == "cosine" else ["train", *evaluated]
        data = {s: SplitData(candidates[s], gather(features[s][0], group, settings.device),
                             gather(features[s][1], group, settings.device)) for s in needed}
        evals = {s: data[s] for s in evaluated}
        fit = None
        if scorer == "cosine":
            scores = cosine_group(evals)
        else:
            standardise(data["train"], *evals.values())
            fit = fit_group(scorer, loss, group, data["train"], evals, _dev_map, settings)
            scores = fit.scores
        for i, fs in enumerate(group.sets):
            cell: dict[str, Any] = {"row": fs.row, "layers": list(fs.layers), "pooling": fs.pooling,
                                    "dim": int(data["dev"].q.shape[-1])}
            cell |= {s: _metrics(candidates[s].examples, scores[s][i]) for s in evaluated}
            tied = [s for s in evaluated if all_tied(candidates[s], scores[s][i])]
            if tied:  # the scorer told no candidate apart: the order is the tie rule's, the score not the scorer's
                cell["all_tied"] = tied
            if fit is not None:
                cell |= {"best_epoch": fit.best_epoch[i], "epochs": fit.epochs}
            cells[fs.row, fs.pooling] = cell
            cell_scores[fs.row, fs.pooling] = {s: scores[s][i] for s in evaluated}
        del data, evals
    rows = [cells[fs.row, fs.pooling] for fs in feature_sets(num_hidden_states)]
    best = best_cell(rows)
    return rows, cell_scores[best["row"], best["pooling"]]


def best_cell(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The cell with the highest dev MAP (the first of equals, in table order)."""
    return max(rows, key=lambda r: r["dev"]["map"])


def _machine(device: str) -> dict[str, Any]:
    info = {**run_machine(), "device": device}
    if device.startswith("cuda"):
        info["device"] = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return info


def _start(options: RankProbeOptions, encoders: list[dict[str, Any]]) -> dict[str, Any]:
    """A fresh results record, or the one in ``--output_dir`` when it was made by the same command or by one that
    this command extends (more encoders, scorers or losses: the finished blocks are kept)."""
    path = Path(options.output_dir) / RESULTS
    fresh = {"format": FORMAT, "config": options.comparable(), "encoders": encoders, "data": {}, "bm25": None,
             "results": {}, "machine": _machine(options.fit.device)}
    if not path.is_file() or options.overwrite:
        return fresh
    old = read_results(path, "pass --overwrite to write it afresh (cached features are reused)")
    fixed = [{k: v for k, v in c.items() if k not in GROWS} for c in (old["config"], fresh["config"])]
    weights = {e["label"]: e["fingerprint"] for e in encoders}
    if fixed[0] != fixed[1] or not all(weights.get(e["label"], e["fingerprint"]) == e["fingerprint"]
                                       for e in old["encoders"]):
        raise ValueError(f"--output_dir {options.output_dir} holds rank-probe results of other options or weights (a "
                         "later command may only add encoders, scorers and losses); pass --overwrite to replace "
                         "them, or choose another folder")
    kept = {e["label"]: e for e in old["encoders"]}
    merged = list({**kept, **{e["label"]: e for e in encoders}}.values())
    config = {**fresh["config"], **{k: list(dict.fromkeys([*old["config"][k], *fresh["config"][k]])) for k in GROWS}}
    return {**old, "config": config, "encoders": merged, "machine": fresh["machine"]}


def run_file(label: str, scorer: str, loss: str, split: str) -> str:
    """A block's best cell's TREC run file, relative to the output folder."""
    return f"runs/{slug(label)}.{scorer}.{loss}.{split}.run"


def _bm25(data: RankingData, out: Path) -> dict[str, Any]:
    """The BM25 row, its run files and every evaluation split's qrels."""
    settings = BM25Settings()
    record: dict[str, Any] = {"settings": asdict(settings), "runs": {}}
    mark_output_folder(out, "rank-probe")  # its first files: the folder is the rank probe's from here on
    for folder in ("runs", "qrels"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    for split in ("dev", "test"):
        if split in data.splits:
            examples = data.splits[split]
            scores = np.asarray(bm25_scores(examples, settings), dtype=np.float64)
            write_qrels(out / f"qrels/{split}.qrels", examples)
            write_run(out / f"runs/bm25.{split}.run", examples, scores.tolist(), tag="bm25")
            record[split] = _metrics(examples, scores)
            record["runs"][split] = f"runs/bm25.{split}.run"
    return record


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


def _data_record(options: RankProbeOptions, data: RankingData) -> dict[str, Any]:
    return {"task": options.task, "keep": options.keep, "files": data.files, "dropped": data.dropped,
            "sha256": data_sha256(data),
            "questions": {s: len({e.qid for e in ex}) for s, ex in data.splits.items()},
            "candidates": {s: len(ex) for s, ex in data.splits.items()}}


def run_rank_probe(options: RankProbeOptions) -> dict[str, Any]:
    """The whole grid: every encoder x (scorer, loss) block x feature set, with BM25 beside; resumable by block.
    Everything is read and checked before anything is encoded or written."""
    out = Path(options.output_dir)
    labels = options.labels or list(options.encoders)
    data = load_data(options)
    sources, fingerprints, encoders = load_encoders(options.encoders, labels)
    results = _start(options, encoders)
    earlier = (results.get("data") or {}).get("sha256")
    if earlier is not None and earlier != data_sha256(data):
        raise ValueError(f"--output_dir {options.output_dir} holds rank-probe results of other data (the content of "
                         "its files changed since); pass --overwrite to replace them, or choose another folder")
    results["data"] = _data_record(options, data)
    if not results.get("bm25"):
        results["bm25"] = _bm25(data, out)
        save_results(results, out)
    candidates = {s: Candidates.of(ex) for s, ex in data.splits.items()}
    settings = FeatureSettings(options.max_length, options.batch_size, options.mixed_precision, options.cache_dtype,
                               options.fit.device)
    for label, source, fp in zip(labels, sources, fingerprints, strict=True):
        record = results["results"].setdefault(label, {"blocks": {}})
        todo = [(s, loss) for s, loss in options.blocks() if block_key(s, loss) not in record["blocks"]]
        if not todo:  # finished by an earlier run of the same command
            if record.get("encode") and "cut" not in record["encode"]:  # written before cuts were counted
                record["encode"]["cut"] = count_cut_candidates(source, candidates, options.max_length)
                save_results(results, out)
            continue
        features, record["encode"] = encode_candidates(source, fp, options.task, candidates, settings,
                                                       Path(options.cache_dir))
        shape = features["train"][0].shape  # (questions, l + 1, 4, d)
        record["num_hidden_states"], record["hidden_size"] = int(shape[1]), int(shape[3])
        for scorer, loss in todo:
            start = time.perf_counter()
            rows, scores = run_block(scorer, loss, candidates, features, options.fit)
            seconds = time.perf_counter() - start
            best = best_cell(rows)
            runs = {}
            for split, split_scores in scores.items():
                runs[split] = run_file(label, scorer, loss, split)
                write_run(out / runs[split], candidates[split].examples, split_scores.tolist(),
                          tag=f"{slug(label)}.{scorer}.{loss}")
            record["blocks"][block_key(scorer, loss)] = {
                "scorer": scorer, "loss": loss, "rows": rows, "seconds": round(seconds, 3),
                "best": {"row": best["row"], "pooling": best["pooling"], "runs": runs}}
            save_results(results, out)
        source.release()
    results["best"] = overall_best(results)
    blocks = [b for r in results["results"].values() for b in r["blocks"].values()]
    results["seconds"] = {"encode": round(sum(r.get("encode", {}).get("seconds", 0.0)
                                              for r in results["results"].values()), 3),
                          "fit": round(sum(b["seconds"] for b in blocks), 3)}
    save_results(results, out)
    return results


def overall_best(results: dict[str, Any]) -> dict[str, Any] | None:
    """The grid's best cell by dev MAP: its encoder, scorer, loss, feature set and run files."""
    best: dict[str, Any] | None = None
    for label, record in results["results"].items():
        for block in record["blocks"].values():
            cell = chosen_cell(block)
            if best is None or cell["dev"]["map"] > best["dev"]["map"]:
                best = {"label": label, "scorer": block["scorer"], "loss": block["loss"], **cell,
                        "runs": block["best"]["runs"]}
    return best
