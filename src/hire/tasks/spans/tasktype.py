"""What training and evaluation ask of a span task (:data:`SPANS`): read SQuAD, cut each passage into windows,
predict the best span of every question over all its windows, score with the official SQuAD metrics.

Windows: the question and a window of the passage are encoded together (``truncation="only_second"``), windows
overlapping by ``doc_stride`` tokens; the answer's characters are mapped to tokens through the fast tokenizer's
offsets, and a window that does not hold the whole answer points at the first token ("no answer here"), as BERT's.

Prediction (BERT §4.2, as Hugging Face's ``run_qa`` and ``pipeline("question-answering")`` do): over every window
of a question, the 20 best start and end tokens inside the passage, every pair with ``end >= start`` and at most
``max_answer_length`` tokens, scored ``start + end``; the best is mapped back to the exact characters of the
original passage. The no-answer score is the lowest ``start[0] + end[0]`` over the windows; for SQuAD v2.0 a
question is answered "" where ``no_answer_score - best_span_score`` exceeds the threshold that the official v2
script's ``best_f1_thresh`` chooses on dev (:func:`squad_v2_scores`). No question is dropped.

Metrics: exact match and F1 with SQuAD's official answer normalisation (lower case, no punctuation, no articles,
one space), the maximum over the gold answers, from ``torchmetrics``' SQuAD metric (per question); v2.0's overall,
HasAns, NoAns and best-threshold figures are the official v2 script's (``evaluate-v2.0.py``), written out here
because no maintained library computes them offline. All as fractions (0-1), as hire's other metrics.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

from hire.checks import check_input_file, replacing, writing
from hire.data.examples import DataError
from hire.evaluation import model_outputs
from hire.tasks.spans import SPAN_TASKS
from hire.tasks.spans.data import SpanExample, read_span_file, read_squad_dir
from hire.tasktype import DataConfig, Predictions, TaskData, TaskType, read_split

N_BEST = 20  # start and end candidates per window (BERT's and Hugging Face's n_best_size)
LABELS = ["start", "end"]  # the model's two outputs at every token


@dataclass
class SpanSplit(Dataset):
    """A tokenized split: one item per window; ``example`` the question each window belongs to, ``offsets`` the
    character span of each passage token (None at the question's tokens and the special tokens)."""

    features: list[dict[str, Any]]
    example: list[int]
    offsets: list[list[tuple[int, int] | None]]
    labelled: bool
    questions: int

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"index": i, **self.features[i]}

    @property
    def lengths(self) -> list[int]:
        return [len(f["input_ids"]) for f in self.features]

    def windows_per_question(self) -> list[int]:
        counts = [0] * self.questions
        for e in self.example:
            counts[e] += 1
        return counts


class SpanCollator:
    """Pads a list of windows (right padding, mask 0 at padding), with the answer's token positions where given."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        n = max(len(it["input_ids"]) for it in items)
        batch = {"input_ids": torch.tensor([it["input_ids"] + [self.pad_token_id] * (n - len(it["input_ids"]))
                                            for it in items]),
                 "attention_mask": torch.tensor([[1] * len(it["input_ids"]) + [0] * (n - len(it["input_ids"]))
                                                 for it in items]),
                 "index": torch.tensor([it["index"] for it in items])}
        if "token_type_ids" in items[0]:
            batch["token_type_ids"] = torch.tensor([it["token_type_ids"] + [0] * (n - len(it["token_type_ids"]))
                                                    for it in items])
        if "start_positions" in items[0]:
            batch["start_positions"] = torch.tensor([it["start_positions"] for it in items])
            batch["end_positions"] = torch.tensor([it["end_positions"] for it in items])
        return batch


def encode_spans(examples: Sequence[SpanExample], tokenizer: Any, max_length: int, stride: int,
                 labelled: bool = True) -> SpanSplit:
    """Every question with every window of its passage (see the module docstring). A question that leaves no room
    for the passage in ``max_length`` tokens is a DataError naming it."""
    if not examples:
        raise ValueError("no examples to encode (an empty split)")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("span tasks need a fast tokenizer (its offsets map answers to tokens)")
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    features, owner, offsets = [], [], []
    question_lengths = tokenizer([e.question for e in examples], add_special_tokens=False)["input_ids"]
    for i, (ex, q_tokens) in enumerate(zip(examples, question_lengths, strict=True)):
        room = max_length - specials - len(q_tokens)
        if room < 1:
            raise DataError(f"question {ex.qid}: {len(q_tokens)} tokens leave no room for the passage in "
                            f"--data.max_length {max_length} tokens; raise it or shorten the question")
        enc = tokenizer(ex.question, ex.context, truncation="only_second", max_length=max_length,
                        stride=min(stride, room - 1), return_overflowing_tokens=True, return_offsets_mapping=True)
        for w in range(len(enc["input_ids"])):
            sequence = enc.sequence_ids(w)
            window = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][w], sequence, strict=True)]
            if not any(window):
                raise DataError(f"question {ex.qid}: the passage has no tokens left after the question")
            item = {"input_ids": enc["input_ids"][w]}
            if "token_type_ids" in enc:
                item["token_type_ids"] = enc["token_type_ids"][w]
            if labelled:
                item["start_positions"], item["end_positions"] = _answer_tokens(ex, window)
            features.append(item)
            owner.append(i)
            offsets.append(window)
    return SpanSplit(features, owner, offsets, labelled, len(examples))


def _answer_tokens(ex: SpanExample, window: list[tuple[int, int] | None]) -> tuple[int, int]:
    """The first and last token of the first gold answer in this window, or (0, 0) ("no answer here": none, or not
    wholly inside the window)."""
    if ex.impossible or not ex.answers:
        return 0, 0
    text, start = ex.answers[0]
    end = start + len(text)
    inside = [t for t, o in enumerate(window) if o is not None]
    if window[inside[0]][0] > start or window[inside[-1]][1] < end:  # type: ignore[index]
        return 0, 0
    first = next(t for t in inside if window[t][1] > start)  # type: ignore[index]
    last = next(t for t in reversed(inside) if window[t][0] < end)  # type: ignore[index]
    return first, last


def best_spans(split: SpanSplit, starts: list[np.ndarray], ends: list[np.ndarray], contexts: Sequence[str],
               max_answer_length: int) -> list[dict[str, Any]]:
    """Each question's best span over its windows (see the module docstring): its text, character ``start`` and
    ``end`` (exclusive), ``score`` and the ``no_answer_score``."""
    best: list[dict[str, Any]] = [{"text": "", "start": None, "end": None, "score": -math.inf,
                                   "no_answer_score": math.inf} for _ in range(split.questions)]
    for f, (s, e) in enumerate(zip(starts, ends, strict=True)):
        q, window = split.example[f], split.offsets[f]
        found = best[q]
        found["no_answer_score"] = min(found["no_answer_score"], float(s[0] + e[0]))
        inside = np.array([t for t, o in enumerate(window) if o is not None])
        top_s = inside[np.argsort(-s[inside], kind="stable")[:N_BEST]]
        top_e = inside[np.argsort(-e[inside], kind="stable")[:N_BEST]]
        for i in top_s:
            for j in top_e:
                if j < i or j - i + 1 > max_answer_length:
                    continue
                score = float(s[i] + e[j])
                if score > found["score"]:
                    a, b = window[i][0], window[j][1]  # type: ignore[index]
                    found.update(text=contexts[q][a:b], start=a, end=b, score=score)
    return best


def squad_v1_scores(golds: Sequence[list[str]], predicted: Sequence[str]) -> tuple[list[float], list[float]]:
    """Each question's exact match and F1 (0 or 1, and 0-1) against its gold answers: ``torchmetrics``' SQuAD
    metric (the official normalisation, the maximum over the golds), one question at a time."""
    from torchmetrics.functional.text import squad

    exact, f1 = [], []
    for i, (gold, pred) in enumerate(zip(golds, predicted, strict=True)):
        result = squad([{"prediction_text": pred, "id": str(i)}],
                       [{"answers": {"answer_start": [0] * len(gold), "text": list(gold)}, "id": str(i)}])
        exact.append(float(result["exact_match"]) / 100)
        f1.append(float(result["f1"]) / 100)
    return exact, f1


def squad_v2_scores(golds: Sequence[list[str]], spans: Sequence[dict[str, Any]],
                    threshold: float | None = None) -> dict[str, float]:
    """The official SQuAD v2.0 figures (``evaluate-v2.0.py``, with its ``--na-prob-file``): each question's best span
    scored against its golds (an unanswerable question's gold is ""), the no-answer probability
    ``no_answer_score - score``; ``exact``/``f1`` where a question is answered "" above ``threshold`` (default: the
    best F1 threshold found here), ``HasAns_*``/``NoAns_*`` the same on the two halves, ``best_exact``/``best_f1`` and
    their thresholds: the official ``find_best_thresh``. Written out because no maintained library computes them
    offline; the per-question scores are torchmetrics' (:func:`squad_v1_scores`)."""
    texts = [s["text"] for s in spans]
    exact, f1 = squad_v1_scores(golds, texts)
    na = [s["no_answer_score"] - s["score"] if math.isfinite(s["score"]) else math.inf for s in spans]
    has = [gold != [""] for gold in golds]

    def best_threshold(raw: list[float]) -> tuple[float, float]:
        score = best = float(sum(not h for h in has))  # everything answered "": right on every NoAns question
        threshold_found = 0.0
        for q in sorted(range(len(spans)), key=lambda q: na[q]):
            score += raw[q] if has[q] else (-1 if texts[q] else 0)
            if score > best:
                best, threshold_found = score, na[q]
        return best / len(spans), threshold_found

    best_exact, exact_threshold = best_threshold(exact)
    best_f1, f1_threshold = best_threshold(f1)
    threshold = f1_threshold if threshold is None else threshold

    def applied(raw: list[float]) -> list[float]:
        return [float(not has[q]) if na[q] > threshold else raw[q] for q in range(len(spans))]

    out = {"exact": float(np.mean(applied(exact))), "f1": float(np.mean(applied(f1))), "threshold": threshold}
    for name, part in (("HasAns", True), ("NoAns", False)):
        rows = [q for q in range(len(spans)) if has[q] == part]
        if rows:
            out[f"{name}_exact"] = float(np.mean([applied(exact)[q] for q in rows]))
            out[f"{name}_f1"] = float(np.mean([applied(f1)[q] for q in rows]))
            out[f"{name}_total"] = float(len(rows))
    out.update(best_exact=best_exact, best_exact_thresh=exact_threshold, best_f1=best_f1,
               best_f1_thresh=f1_threshold)
    return out


class SpanTasks(TaskType):
    """Extractive question answering (see the module docstring)."""

    # -- reader --------------------------------------------------------------------------------------
    def load(self, cfg: DataConfig, with_train: bool = True) -> TaskData:
        task = cfg.task.lower()
        missing: dict[str, str] = {}
        if task in SPAN_TASKS:
            name, version = SPAN_TASKS[task]
            read = lambda split: read_squad_dir(cfg.data_dir, version, split)  # noqa: E731
            train = read("train") if with_train else []
            dev = read_split(read, "dev", "dev", with_train, missing)
            held, test = None, None
            v2 = version == "2.0"
        else:
            name = "custom"

            def read(path: str | None, option: str, require: bool = True) -> list[SpanExample] | None:  # type: ignore[misc]
                if path is None:
                    return None
                check_input_file(path, option)
                return read_span_file(path, option, require_answers=require)

            train = read(cfg.train_file, "--data.train_file") if with_train or cfg.train_file else []
            dev = read(cfg.dev_file, "--data.dev_file")
            given = read(cfg.test_file, "--data.test_file", require=False)
            labelled = given is not None and all(ex.labelled for ex in given)
            held, test = (given, None) if labelled else (None, given)
            v2 = any(ex.impossible for rows in (train, dev, held) for ex in rows or ())
        train = (train or [])[:cfg.max_train_examples]
        options = {"doc_stride": cfg.doc_stride, "max_answer_length": cfg.max_answer_length, "version": "2.0" if v2
                   else "1.1"}
        return TaskData(name, list(LABELS), ("best_f1",) if v2 else ("exact_match", "f1"), train,
                        {"dev": dev[:cfg.max_eval_examples]} if dev else {},
                        {"test": test[:cfg.max_eval_examples]} if test else {},
                        held_out={"test": held[:cfg.max_eval_examples]} if held else {}, options=options,
                        missing=missing)

    def model_options(self, task: TaskData) -> dict[str, Any]:
        """How its windows are read (``hire evaluate`` and ``hire predict`` read them the same way)."""
        return {"task_options": dict(task.options)}

    def prepare_evaluation(self, task: TaskData, config: dict[str, Any]) -> None:
        """The v2.0 no-answer threshold its run chose on dev (scoring a dev split chooses it again, on that split)."""
        chosen = (config.get("task_options") or {}).get("no_answer_threshold")
        if chosen is not None:
            task.options["no_answer_threshold"] = chosen

    # -- tokenization and collation ------------------------------------------------------------------
    def encode(self, task: TaskData, examples: Sequence[SpanExample], tokenizer: Any, max_length: int,
               labelled: bool = True) -> SpanSplit:
        return encode_spans(examples, tokenizer, max_length, int(task.options.get("doc_stride", 128)),
                            labelled and all(ex.labelled for ex in examples))

    def collator(self, pad_token_id: int) -> SpanCollator:
        return SpanCollator(pad_token_id)

    # -- predictions, metrics, files -----------------------------------------------------------------
    def predict(self, model: Any, loader: DataLoader, split: SpanSplit, accelerator: Accelerator,
                desc: str = "predict") -> Predictions:
        """Each window's start and end scores; :meth:`answers` turns them into each question's best span."""
        def take(batch: dict[str, torch.Tensor], out: Any) -> tuple[torch.Tensor, ...]:
            s = accelerator.pad_across_processes(out.start_logits, dim=1)
            e = accelerator.pad_across_processes(out.end_logits, dim=1)
            lw = out.layer_weights if out.layer_weights is not None else s.new_zeros(len(batch["index"]), 0)
            return batch["index"], s, e, lw

        (indices, starts, ends, weights), seconds = model_outputs(model, loader, accelerator, take, desc)
        per_start: list[np.ndarray | None] = [None] * len(split)
        per_end: list[np.ndarray | None] = [None] * len(split)
        per_weights: list[np.ndarray | None] = [None] * len(split)
        for index, s, e, w in zip(indices, starts, ends, weights, strict=True):
            for row, f in enumerate(index.tolist()):
                n = len(split.features[f]["input_ids"])
                per_start[f], per_end[f] = s[row, :n].numpy(), e[row, :n].numpy()
                per_weights[f] = w[row].numpy()
        layer = None
        if weights and weights[0].shape[-1]:  # each question's mean over its windows
            layer = np.zeros((split.questions, weights[0].shape[-1]))
            counts = np.zeros(split.questions)
            for f, w in enumerate(per_weights):
                layer[split.example[f]] += w  # type: ignore[operator]
                counts[split.example[f]] += 1
            layer /= counts[:, None]
        windows = {"starts": per_start, "ends": per_end, "split": split}
        return Predictions(_Windows(windows, split.questions), layer, seconds)

    def answers(self, task: TaskData, preds: Predictions, examples: Sequence[SpanExample]) -> list[dict[str, Any]]:
        """Each question's best span (:func:`best_spans`) and, for SQuAD v2.0, its answer under the threshold chosen
        on dev (``task.options["no_answer_threshold"]``; 0 before one is chosen, as Hugging Face's default)."""
        if preds.logits.spans is None:
            w = preds.logits.windows
            preds.logits.spans = best_spans(w["split"], w["starts"], w["ends"], [ex.context for ex in examples],
                                            int(task.options.get("max_answer_length", 30)))
        spans = preds.logits.spans
        v2 = task.options.get("version") == "2.0"
        threshold = float(task.options.get("no_answer_threshold", 0.0))
        out = []
        for ex, span in zip(examples, spans, strict=True):
            na = span["no_answer_score"] - span["score"] if math.isfinite(span["score"]) else math.inf
            empty = v2 and na > threshold
            out.append({"id": ex.qid, "answer": "" if empty else span["text"],
                        "start": None if empty else span["start"], "end": None if empty else span["end"],
                        "best_span": span["text"], "score": span["score"], "no_answer_score": span["no_answer_score"],
                        "no_answer_margin": na})
        return out

    def score(self, task: TaskData, preds: Predictions, examples: Sequence[SpanExample],
              split: SpanSplit) -> dict[str, float]:
        """v1.1: ``exact_match`` and ``f1`` (the score); v2.0: the official v2 figures, ``best_f1`` the score. On a
        dev split (one of ``task.dev``) the v2 threshold is chosen (best F1), and the later splits use it."""
        golds = [ex.golds for ex in examples]
        self.answers(task, preds, examples)
        spans = preds.logits.spans
        counts = split.windows_per_question()
        windows = {"questions": float(len(examples)), "windows": float(len(split)),
                   "questions_over_one_window": float(sum(c > 1 for c in counts))}
        if task.options.get("version") != "2.0":
            exact, f1 = squad_v1_scores(golds, [s["text"] for s in spans])
            return {"exact_match": float(np.mean(exact)), "f1": float(np.mean(f1)), **windows,
                    "score": float(np.mean(f1))}
        on_dev = any(examples is rows for rows in task.dev.values())
        chosen = None if on_dev else task.options.get("no_answer_threshold")
        result = squad_v2_scores(golds, spans, chosen)
        if on_dev:
            task.options["no_answer_threshold"] = result["best_f1_thresh"]
        return {**result, **windows, "score": result["best_f1"]}

    def write_predictions(self, path: Path, task: TaskData, examples: Sequence[SpanExample],
                          preds: Predictions) -> None:
        """One JSON line per question (id, question, answer and its character span, best span, scores), and the
        official predictions file beside it (``<split>.squad.json``: question id -> answer text; for v2.0 also
        ``<split>.na_probs.json``, the no-answer margins, for the official script's ``--na-prob-file``)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        found = self.answers(task, preds, examples)
        with writing(path), replacing(path) as tmp, tmp.open("w") as f:
            for ex, row, i in zip(examples, found, range(len(examples)), strict=True):
                line = {"id": ex.qid, "question": ex.question, **{k: v for k, v in row.items() if k != "id"},
                        "gold": [t for t, _ in ex.answers] if ex.labelled else None}
                if preds.layer_weights is not None:
                    line["layer_weights"] = [round(float(w), 6) for w in preds.layer_weights[i]]
                f.write(json.dumps(line) + "\n")
        for side, values in side_files(path, task, found).items():
            with writing(side), replacing(side) as tmp:
                tmp.write_text(json.dumps(values) + "\n")  # one line: the official scripts read it as JSON

    def final_options(self, task: TaskData) -> dict[str, Any]:
        """The v2.0 no-answer threshold chosen on dev, kept with the model for ``hire predict``."""
        chosen = task.options.get("no_answer_threshold")
        return {} if chosen is None else {"no_answer_threshold": chosen}


def side_files(path: Path, task: TaskData, found: Sequence[dict[str, Any]]) -> dict[Path, dict[str, Any]]:
    """The official files beside a predictions file: ``.squad.json`` (question id -> answer) and, for v2.0,
    ``.na_probs.json`` (question id -> no-answer margin)."""
    files: dict[Path, dict[str, Any]] = {path.with_suffix(".squad.json"): {row["id"]: row["answer"] for row in found}}
    if task.options.get("version") == "2.0":
        files[path.with_suffix(".na_probs.json")] = {row["id"]: _finite(row["no_answer_margin"]) for row in found}
    return files


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 1e30


class _Windows:
    """A split's predictions before they are questions: each window's scores; ``spans`` once computed. ``len`` is
    the number of questions (examples per second)."""

    def __init__(self, windows: dict[str, Any], questions: int) -> None:
        self.windows, self.spans, self.questions = windows, None, questions

    def __len__(self) -> int:
        return self.questions


SPANS = SpanTasks()

__all__ = ["SPANS", "SpanCollator", "SpanSplit", "SpanTasks", "best_spans", "encode_spans", "squad_v1_scores",
           "squad_v2_scores"]
