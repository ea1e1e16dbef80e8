"""The bi-encoder ranker (``--model.ranker bi``): a pair's score is 20 x the cosine of the two mean-pooled last
hidden states, computed here directly from the encoder; padding and the batch around a pair change no score; the
in-batch negatives loss matches hand-computed values; a made-up WikiQA-layout set trains through ``hire train``
with both losses, its dev MAP is that of the written run file, a stopped run resumes to the same result; the saved
folder is a plain transformers encoder whose mean-pooled vectors give ``hire predict``'s scores; bad options are
one line, exit status 2, nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from badinput import train_stopped_after
from worlds import COLUMNS, ranking_options, ranking_world

from hire.cli import main
from hire.data.ranking import RankingExample, read_ranking_file
from hire.data.trec import read_qrels, read_run
from hire.metrics import ranking_metrics
from hire.model import BI_SCALE, BiEncoder, build_bi_encoder, in_batch_negatives_loss, load_tokenizer
from hire.options import parse_options
from hire.tasks.ranking.tasktype import RankingCollator, encode_apart
from hire.training import train

COLUMN_MAP = dict(pair.split("=") for pair in COLUMNS.split(","))
TEXTS = {"q1": "where is the lake", "q2": "where is the old tower near the river"}
PASSAGES = ["the lake is in the north", "shops", "the old town has many shops near the river during summer",
            "the tower is in the west"]


def direct_vector(model: BiEncoder, tokenizer, text: str) -> torch.Tensor:
    """The text alone (no padding), through the encoder's own transformers model: the mean of its last hidden state
    over every token."""
    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        last = model.encoder.model(**enc).last_hidden_state[0]
    return last.mean(0)


def examples() -> list[RankingExample]:
    return [RankingExample(q, TEXTS[q], str(i), passage, float(i == j))
            for j, q in enumerate(TEXTS) for i, passage in enumerate(PASSAGES)]


def batch_of(split, indices):
    batch = RankingCollator(split.pad_token_id)([split[i] for i in indices])
    return {k: v for k, v in batch.items() if k != "index"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return ranking_world(tmp_path_factory.mktemp("ranking"))


def test_a_score_is_the_scaled_cosine_of_mean_pooled_vectors_whatever_the_padding_and_batch(world):
    torch.manual_seed(0)
    model = build_bi_encoder(str(world["encoder"])).eval()
    tokenizer = load_tokenizer(str(world["encoder"]))
    cases = examples()
    split = encode_apart(cases, tokenizer, 32)
    expected = torch.stack([
        BI_SCALE * F.cosine_similarity(direct_vector(model, tokenizer, ex.question),
                                       direct_vector(model, tokenizer, ex.passage), dim=0) for ex in cases])
    with torch.no_grad():
        together = model(**{k: v for k, v in batch_of(split, range(len(cases))).items()
                            if k not in ("labels", "groups")}).logits
        assert (batch_of(split, range(len(cases)))["attention_mask"] == 0).any()  # padding present
        torch.testing.assert_close(together, expected, rtol=1e-5, atol=1e-5)
        for i in range(len(cases)):  # each pair alone, and beside one other candidate: the same score
            alone = model(**{k: v for k, v in batch_of(split, [i]).items() if k not in ("labels", "groups")}).logits
            other = model(**{k: v for k, v in batch_of(split, [i, (i + 3) % len(cases)]).items()
                             if k not in ("labels", "groups")}).logits
            torch.testing.assert_close(alone[0], expected[i], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(other[0], expected[i], rtol=1e-5, atol=1e-5)
    # The collator encodes each distinct text of a batch once: 2 questions and 4 passages for 8 candidates.
    batch = batch_of(split, range(len(cases)))
    assert batch["query_input_ids"].shape[0] == 2 and batch["input_ids"].shape[0] == 4


def test_evaluation_encodes_each_distinct_text_once_and_scores_as_directly(world):
    from accelerate import Accelerator

    from hire.tasks.ranking.tasktype import RANKING

    torch.manual_seed(0)
    model = build_bi_encoder(str(world["encoder"])).eval()
    tokenizer = load_tokenizer(str(world["encoder"]))
    cases = examples()
    split = encode_apart(cases, tokenizer, 32)
    assert len(split.texts()) == 2 + 4  # each question and each distinct passage once
    calls = []
    model.encoder.model.register_forward_hook(lambda module, args, kwargs_out: calls.append(1))
    from hire.evaluation import eval_loader

    loader = eval_loader(split, 3, RankingCollator(split.pad_token_id))
    preds = RANKING.predict(model, loader, split, Accelerator(cpu=True))
    assert len(calls) == 2  # 6 texts in batches of 3
    expected = [BI_SCALE * F.cosine_similarity(direct_vector(model, tokenizer, ex.question),
                                               direct_vector(model, tokenizer, ex.passage), dim=0).item()
                for ex in cases]
    assert preds.logits.tolist() == pytest.approx(expected, abs=1e-5)


def test_the_in_batch_negatives_loss_by_hand():
    # Two questions in the batch (rows), three distinct passages (columns); a third question (group 2) has no
    # relevant candidate: it has no row, though its passage (column 2) is a negative for the others.
    similarity = torch.tensor([[3.0, 1.0, 0.0],
                               [0.5, 2.0, 1.5],
                               [9.0, 9.0, 9.0]])
    query_index = torch.tensor([0, 0, 1, 1, 2])
    passage_index = torch.tensor([0, 1, 1, 0, 2])
    labels = torch.tensor([1.0, 0.0, 2.0, 1.0, 0.0])
    groups = torch.tensor([0, 0, 1, 1, 2])
    # Candidate 0: q0 -> p0 against p0, p1, p2:   -log(e^3 / (e^3 + e^1 + e^0)).
    # Candidate 2: q1 -> p1; p0 is q1's other relevant passage (candidate 3), left out: -log(e^2 / (e^2 + e^1.5)).
    # Candidate 3: q1 -> p0; p1 left out likewise:                                   -log(e^0.5 / (e^0.5 + e^1.5)).
    by_hand = [-math.log(math.exp(3) / (math.exp(3) + math.exp(1) + 1)),
               -math.log(math.exp(2) / (math.exp(2) + math.exp(1.5))),
               -math.log(math.exp(0.5) / (math.exp(0.5) + math.exp(1.5)))]
    loss = in_batch_negatives_loss(similarity, query_index, passage_index, labels, groups)
    assert float(loss) == pytest.approx(sum(by_hand) / 3, rel=1e-6)
    # No relevant candidate at all: 0, still connected to the scores.
    none = in_batch_negatives_loss(similarity.requires_grad_(), query_index, passage_index, torch.zeros(5), groups)
    assert float(none.detach()) == 0.0 and none.requires_grad


@pytest.mark.parametrize("loss", ["in-batch", "pairwise"])
def test_a_bi_encoder_trains_and_its_dev_map_is_that_of_the_written_run(world, tmp_path, loss):
    out = tmp_path / "run"
    final = train(parse_options(ranking_options(world, out, "--model.ranker", "bi", "--train.rank_loss", loss)))
    dev = read_ranking_file(world["dev"], columns=COLUMN_MAP, keep="has-positive").examples
    run = read_run(out / "predictions" / "dev.run")
    qrels = read_qrels(out / "predictions" / "dev.qrels")
    assert {(q, p) for q, ps in qrels.items() for p in ps} == {(ex.qid, ex.pid) for ex in dev}
    again = ranking_metrics(dev, [run[ex.qid][ex.pid] for ex in dev])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dev"]["dev"]["map"] == pytest.approx(again["map"], abs=1e-12)
    assert metrics["dev"]["dev"]["score"] == metrics["dev"]["dev"]["map"]
    assert metrics["ranker"] == "bi" and metrics["head"] == "last-layer"
    assert "map" in final["held_out"]["test"]
    saved = json.loads((out / "best" / "bi_encoder.json").read_text())
    assert saved["rank_loss"] == loss and saved["pooling"] == "mean" and saved["similarity"] == "cosine"
    assert json.loads((out / "best" / "config.json").read_text())["model_type"] == "bert"  # the encoder's own


def test_the_bi_encoder_options_left_out_are_recorded_as_they_train(world, tmp_path):
    cfg = parse_options(ranking_options(world, tmp_path / "run", "--model.ranker", "bi"))
    cfg.validate()
    assert (cfg.model.head, cfg.train.rank_loss) == ("last-layer", "in-batch")
    again = parse_options(ranking_options(world, tmp_path / "run", "--model.ranker", "bi", "--model.head", "pool-mean",
                                  "--train.rank_loss", "pairwise"))
    again.validate()
    assert (again.model.head, again.train.rank_loss) == ("pool-mean", "pairwise")


def test_a_bi_encoder_run_stopped_mid_way_resumes_to_the_same_result(world, tmp_path, monkeypatch):
    args = ["--model.ranker", "bi"]
    whole = train(parse_options(ranking_options(world, tmp_path / "whole", *args)))
    train_stopped_after(ranking_options(world, tmp_path / "parts", *args), 3, monkeypatch)
    resumed = train(parse_options(ranking_options(world, tmp_path / "parts", *args)))
    assert resumed["dev"] == whole["dev"] and resumed["held_out"] == whole["held_out"]
    a, b = ((tmp_path / d / "predictions" / "dev.run").read_text() for d in ("whole", "parts"))
    assert a == b


def test_a_saved_bi_encoder_scores_alike_through_automodel_and_hire_predict(world, tmp_path, capsys):
    from transformers import AutoModel, AutoTokenizer

    out = tmp_path / "run"
    train(parse_options(ranking_options(world, out, "--model.ranker", "bi", "--train.max_steps", "2",
                                "--train.eval_every", "2")))
    predictions = tmp_path / "ranked.jsonl"
    code = main(["predict", "--model", str(out / "best"), "--input", str(world["test"]), "--ranking_columns",
                 COLUMNS, "--output", str(predictions), "--max_length", "32", "--batch_size", "5"])
    assert code == 0
    assert '"map"' in capsys.readouterr().out
    rows = {(r["qid"], r["pid"]): r["score"] for r in map(json.loads, predictions.read_text().splitlines())}
    run = read_run(tmp_path / "ranked.run")
    assert rows == {(q, p): s for q, ps in run.items() for p, s in ps.items()}
    # transformers alone: AutoModel, mean pooling over real tokens of the last hidden state, 20 x cosine.
    encoder = AutoModel.from_pretrained(out / "best").eval()
    tokenizer = AutoTokenizer.from_pretrained(out / "best")
    cases = read_ranking_file(world["test"], columns=COLUMN_MAP).examples[:8]

    def vectors(texts):
        batch = tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
        with torch.no_grad():
            last = encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return (last * mask).sum(1) / mask.sum(1)

    q, p = vectors([ex.question for ex in cases]), vectors([ex.passage for ex in cases])
    scores = 20 * F.cosine_similarity(q, p, dim=-1)
    assert scores.tolist() == pytest.approx([rows[ex.qid, ex.pid] for ex in cases], abs=1e-4)


@pytest.mark.parametrize(("extra", "message"), [
    (["--data.task", "RTE", "--model.ranker", "bi"], "--model.ranker bi: only for ranking tasks"),
    (["--model.ranker", "bi", "--model.head", "hire"], "--model.head hire: the bi-encoder takes last-layer or "
                                                        "pool-mean"),
    (["--model.ranker", "bi", "--train.rank_loss", "pointwise"], "--train.rank_loss pointwise: the bi-encoder"),
    (["--model.ranker", "bi", "--model.freeze_encoder", "true"], "--model.freeze_encoder: the bi-encoder"),
    (["--train.rank_loss", "in-batch"], "--train.rank_loss in-batch: for the bi-encoder only"),
])
def test_bad_bi_encoder_options_are_one_line_exit_2_nothing_written(world, tmp_path, capsys, extra,
                                                                       message):
    out = tmp_path / "run"
    argv = ranking_options(world, out, *extra)
    if "RTE" in extra:  # a GLUE task takes none of the ranking files
        argv = ["--output_dir", str(out), "--model.encoder", str(world["encoder"]), *extra]
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_saved_bi_encoder_is_no_init_from_and_is_not_exported(world, tmp_path, capsys):
    out = tmp_path / "run"
    train(parse_options(ranking_options(world, out, "--model.ranker", "bi", "--train.max_steps", "1",
                                "--train.eval_every", "1")))
    cross = tmp_path / "cross"
    assert main(["train", *ranking_options(world, cross, "--model.init_from", str(out / "best"))]) == 2
    assert f"--model.encoder {out / 'best'}" in capsys.readouterr().err
    assert not cross.exists()
    assert main(["export", "--model", str(out / "best"), "--output_dir", str(tmp_path / "copy")]) == 2
    assert "already a plain transformers encoder" in capsys.readouterr().err
    assert not (tmp_path / "copy").exists()


def test_questions_worded_alike_are_not_each_others_negatives():
    """Two questions with the same text share one question row; each one's relevant passage must not be a
    negative of the other's (the one vector would be pushed towards and away from it)."""
    similarity = torch.tensor([[2.0, 1.0, 0.5]])  # one question row, three passages
    query_index = torch.tensor([0, 0, 0])
    passage_index = torch.tensor([0, 1, 2])
    labels = torch.tensor([1.0, 1.0, 0.0])
    groups = torch.tensor([0, 1, 1])  # question 0 -> passage 0; question 1 (same words) -> passages 1 and 2
    loss = in_batch_negatives_loss(similarity, query_index, passage_index, labels, groups)
    first = -F.log_softmax(torch.tensor([2.0, 0.5]), 0)[0]  # passage 1 blocked for question 0
    second = -F.log_softmax(torch.tensor([1.0, 0.5]), 0)[0]  # passage 0 blocked for question 1
    assert loss.item() == pytest.approx(((first + second) / 2).item())
