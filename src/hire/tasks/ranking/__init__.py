"""Ranking tasks: candidates ranked per question (answer selection): WikiQA by name, or a user's files of
(qid, question, pid, passage, label) rows (``--data.task custom --data.format ranking``), by a cross-encoder (any
head) or a bi-encoder (``--model.ranker bi``). The kind (its options and checks) is here; what training and
prediction ask of it is :mod:`hire.tasks.ranking.tasktype`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from hire.checks import ConfigError
from hire.optionfields import Positive, option_field
from hire.tasktype import TaskKind, register_task_kind

if TYPE_CHECKING:
    from hire.config import DataConfig, RunConfig


@dataclass
class RankingDataOptions:
    """Which evaluation questions count, and the columns of a custom ranking file."""

    keep: Literal["has-positive", "has-both", "all"] = option_field(
        "has-positive", "ranking tasks: the evaluation questions that count: those with a relevant candidate "
        "(WikiQA's usual evaluation), those with a relevant one and two different grades (0/1 labels: a relevant "
        "and an irrelevant one), or all (training reads every question)")
    ranking_columns: dict[str, Any] = option_field(
        {}, "ranking files: the column of each field (qid, question, pid, passage, label) where it is not the "
        "field's name, e.g. qid=QuestionID,passage=Sentence; or 0-based indices for files without a header")


@dataclass
class RankingModelOptions:
    ranker: Literal["cross", "bi"] = option_field(
        "cross", "ranking tasks: cross (a cross-encoder: question and passage read together, any head) or bi (a "
        "bi-encoder: one encoder reads each apart, mean-pooled last layer, cosine x 20; head last-layer or pool-mean, "
        "the default last-layer; --train.rank_loss in-batch, the default, or pairwise)")


@dataclass
class RankingTrainOptions:
    rank_loss: Literal["pointwise", "pairwise", "in-batch"] = option_field(
        "pointwise", "ranking tasks: pointwise (binary cross-entropy of each pair's score; cross-encoder only), "
        "pairwise (the rank hinge loss over every relevant/irrelevant pair of a question; batches hold whole "
        "questions) or in-batch (bi-encoder only, its default: each relevant passage against every other passage "
        "of the batch, cross-entropy)")
    rank_margin: Positive = option_field(1.0, "ranking tasks, pairwise: the hinge's margin, max(0, margin - s_pos + "
                                         "s_neg)")


class RankingKind(TaskKind):
    name = "ranking"
    order = 2
    implementation = "hire.tasks.ranking.tasktype:RANKING"
    data_options = RankingDataOptions
    model_options = RankingModelOptions
    train_options = RankingTrainOptions
    formats = MappingProxyType({"ranking": "ranking (.tsv/.csv/.jsonl rows of qid, question, pid, passage, label: "
                                           "candidates to rank per question)"})
    predict_formats = ("ranking",)
    predictor = "hire.tasks.ranking.predict"
    named_help = "wikiqa (answer ranking)"
    data_dir_help = "WikiQA's (default: $HIRE_WIKIQA_DIR, else ../shared/data/wikiqa)"
    only_for = "ranking tasks (--data.task wikiqa, or custom files in --data.format ranking)"

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        return ("wikiqa", ("map",)) if name.lower() == "wikiqa" else None  # MAP alone is the score

    def task_names(self) -> tuple[str, ...]:
        return ("wikiqa",)

    def check_data(self, cfg: DataConfig) -> None:
        if cfg.task.lower() == "custom":
            check_ranking_columns(cfg.ranking_columns)

    def check_run(self, cfg: RunConfig, owner: bool) -> None:
        """``--model.ranker`` and the options it decides. A cross-encoder takes any head and the pointwise or
        pairwise loss, never ``in-batch``. A bi-encoder (ranking tasks only) trains its encoder (no frozen encoder,
        no ``init_from``: a saved bi-encoder is an encoder folder, given as ``--model.encoder``), has no head or
        output layer of its own (no head options, no classifier dropout), takes the heads of
        :data:`hire.model.BI_HEADS` (the last layer, mean-pooled; ``last-layer`` where no head is given) and the
        losses ``in-batch`` (where none is given) or ``pairwise``. The options left out take those values here, so
        that ``config.yaml`` records what trains."""
        m, t = cfg.model, cfg.train
        if m.ranker != "bi":
            if t.rank_loss == "in-batch":
                raise ConfigError("--train.rank_loss in-batch: for the bi-encoder only (--model.ranker bi); a "
                                  "cross-encoder trains pointwise or pairwise")
            return
        from hire.config import ModelArgs
        from hire.model.biencoder import BI_HEADS, BI_RANK_LOSSES

        if not owner:
            raise ConfigError(f"--model.ranker bi: only for {self.only_for}")
        if m.init_from is not None:
            raise ConfigError(f"--model.init_from {m.init_from}: not for the bi-encoder (--model.ranker bi); a saved "
                              "bi-encoder is an encoder folder: start from it with --model.encoder FOLDER")
        if m.freeze_encoder:
            raise ConfigError("--model.freeze_encoder: the bi-encoder trains its encoder (it has no head or output "
                              "layer of its own to train)")
        if m.head_options:
            raise ConfigError(f"--model.head_options {m.head_options}: the bi-encoder's heads "
                              f"({', '.join(BI_HEADS)}) take no options")
        if m.classifier_dropout != ModelArgs().classifier_dropout:
            raise ConfigError("--model.classifier_dropout: the bi-encoder has no output layer (its score is the "
                              "cosine of two vectors)")
        if not cfg.is_given("model.head"):
            m.head = BI_HEADS[0]
        elif m.head not in BI_HEADS:
            raise ConfigError(f"--model.head {m.head}: the bi-encoder takes {' or '.join(BI_HEADS)} (the last "
                              "layer mean-pooled over real tokens: questions and passages are encoded apart, one "
                              "vector each); other heads are for the cross-encoder (--model.ranker cross)")
        if not cfg.is_given("train.rank_loss"):
            t.rank_loss = BI_RANK_LOSSES[0]
        elif t.rank_loss not in BI_RANK_LOSSES:
            raise ConfigError(f"--train.rank_loss {t.rank_loss}: the bi-encoder trains with "
                              f"{' or '.join(BI_RANK_LOSSES)}")

    def describe(self) -> str:
        return "ranks passages"

    def own_layout(self, folder: Path) -> str | None:
        from hire.tasks.ranking.saved import BI_ENCODER_FILE

        if not (Path(folder).expanduser() / BI_ENCODER_FILE).is_file():
            return None
        return f"a bi-encoder, whose folder is a plain transformers encoder (with {BI_ENCODER_FILE} beside it)"

    def read_own_layout(self, folder: str | Path, option: str) -> dict[str, Any]:
        from hire.tasks.ranking.saved import bi_encoder_config

        return bi_encoder_config(folder, option)  # type: ignore[return-value]

    def evaluation_data(self, task: str, model: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """WikiQA, with the evaluation questions the model's run counted (``keep``)."""
        options = config.get("task_options") or {}
        return "WikiQA", {"task": "wikiqa", "keep": options.get("keep", "has-positive")}


def check_ranking_columns(columns: Any) -> None:
    """``--data.ranking_columns``: known fields, all names (non-empty strings) or all 0-based indices, no column
    read twice (:func:`hire.data.ranking.read_ranking_file`'s own check, as a ConfigError naming the option)."""
    from hire.data.ranking import FIELDS

    if not isinstance(columns, dict):
        raise ConfigError(f"--data.ranking_columns: a mapping of fields to columns, not {columns!r}")
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise ConfigError(f"--data.ranking_columns: unknown field(s) {unknown}; the fields are {list(FIELDS)}")
    kinds = {isinstance(v, int) and not isinstance(v, bool) for v in columns.values()}
    if kinds == {True}:
        missing = [name for name in FIELDS[:4] if name not in columns]
        if missing:
            raise ConfigError(f"--data.ranking_columns: columns given as indices (a file without a header) must "
                              f"give {missing} too")
        if any(v < 0 for v in columns.values()):
            raise ConfigError(f"--data.ranking_columns: column indices are 0-based and >= 0, not {columns}")
    elif kinds == {False}:
        bad = {k: v for k, v in columns.items() if not isinstance(v, str) or not v.strip()}
        if bad:
            raise ConfigError(f"--data.ranking_columns: column names must be non-empty strings, not {bad}")
    elif columns:
        raise ConfigError(f"--data.ranking_columns: all names (a file with a header) or all indices (one without), "
                          f"not {columns}")
    resolved = {**{name: name for name in FIELDS}, **columns} if kinds != {True} else dict(columns)
    if len(set(resolved.values())) < len(resolved):
        raise ConfigError(f"--data.ranking_columns: two fields read the same column: {resolved}")

RANKING_KIND = register_task_kind(RankingKind())
