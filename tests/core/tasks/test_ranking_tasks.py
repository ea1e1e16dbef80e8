"""Ranking end to end: a made-up ranking set in WikiQA's TSV layout trains cross-encoders through `hire train`
(pointwise and pairwise, several heads), dev MAP agrees with an independent scoring of the written run file and
qrels, a killed run resumes to the same result, the pairwise sampler keeps questions whole, the hinge loss matches
hand-computed values, padding changes no score, and a saved ranker scores alike through transformers'
AutoModelForSequenceClassification and `hire predict`."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import pytest
import torch
from badinput import hire_process, train_stopped_after
from worlds import COLUMNS, ranking_options, ranking_world

from hire.cli import main
from hire.data.ranking import read_ranking_file
from hire.data.trec import read_qrels, read_run
from hire.metrics import ranking_metrics
from hire.model import pairwise_hinge_loss, pointwise_loss
from hire.options import parse_options
from hire.tasks.ranking.tasktype import QuestionBatches
from hire.training import train


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return ranking_world(tmp_path_factory.mktemp("ranking"))


@pytest.mark.parametrize("head, loss", [("last-layer", "pointwise"), ("hire", "pairwise")])
def test_a_ranker_trains_and_its_dev_map_is_that_of_the_written_run(world, tmp_path, head, loss):
    out = tmp_path / "run"
    final = train(parse_options(ranking_options(world, out, "--model.head", head, "--train.rank_loss", loss)))
    dev = read_ranking_file(world["dev"], columns=dict(q.split("=") for q in COLUMNS.split(",")),
                            keep="has-positive").examples
    # The scores in metrics.json are those of the written run file against the written qrels, rescored here.
    run = read_run(out / "predictions" / "dev.run", known={ex.qid: {e.pid for e in dev if e.qid == ex.qid}
                                                             for ex in dev})
    qrels = read_qrels(out / "predictions" / "dev.qrels")
    assert {(q, p) for q, ps in qrels.items() for p in ps} == {(ex.qid, ex.pid) for ex in dev}
    again = ranking_metrics(dev, [run[ex.qid][ex.pid] for ex in dev])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dev"]["dev"]["map"] == pytest.approx(again["map"], abs=1e-12)
    assert metrics["dev"]["dev"]["mrr"] == pytest.approx(again["mrr"], abs=1e-12)
    assert metrics["dev"]["dev"]["score"] == metrics["dev"]["dev"]["map"]
    assert metrics["dev"]["dev"]["questions"] == 8  # 10 questions, every fifth without a correct answer
    assert set(final["held_out"]) == {"test"} and "map" in final["held_out"]["test"]
    assert (out / "predictions" / "test.run").is_file()
    rows = [json.loads(line) for line in (out / "predictions" / "dev.jsonl").read_text().splitlines()]
    assert len(rows) == len(dev) and {"qid", "pid", "rank", "score", "label"} <= set(rows[0])
    config = json.loads((out / "best" / "config.json").read_text())
    assert config["task_type"] == "ranking" and len(config["id2label"]) == 1
    assert config["task_options"]["rank_loss"] == loss
    if head == "hire":
        assert len(rows[0]["layer_weights"]) == 3  # embeddings and 2 layers


def test_the_pairwise_sampler_keeps_questions_whole_and_covers_each_once():
    rng = random.Random(3)
    sizes = [rng.randint(1, 9) for _ in range(40)] + [15]  # one question larger than a batch
    questions, start = [], 0
    for size in sizes:
        questions.append(list(range(start, start + size)))
        start += size
    sampler = QuestionBatches(questions, batch_size=12, seed=7)
    owner = {i: q for q, members in enumerate(questions) for i in members}
    orders = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)  # the same count every epoch
        seen = [i for batch in batches for i in batch]
        assert sorted(seen) == list(range(start))  # every candidate once
        for batch in batches:
            asked = {owner[i] for i in batch}
            assert sorted(batch) == sorted(i for q in asked for i in questions[q])  # whole questions only
            assert len(batch) <= 12 or len(asked) == 1  # a larger question is a batch of its own
        orders.append(batches)
    assert orders[0] != orders[1]  # shuffled by epoch
    sampler.set_epoch(1)
    assert list(sampler) == orders[1]  # a function of (seed, epoch): a resumed run sees the same batches


def test_the_hinge_loss_by_hand():
    scores = torch.tensor([2.0, 0.5, 1.8, 0.0, 3.0, 1.0])
    labels = torch.tensor([1.0, 0.0, 0.0, 2.0, 1.0, 0.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    # Question 0: pairs (0>1): max(0, 1 - 2 + 0.5) = 0; (0>2): max(0, 1 - 2 + 1.8) = 0.8.
    # Question 1 (graded): (3>4): 1 - 0 + 3 = 4; (3>5): 1 - 0 + 1 = 2; (4>5): 1 - 3 + 1 = 0. Mean of 5 pairs.
    assert float(pairwise_hinge_loss(scores, labels, groups, margin=1.0)) == pytest.approx((0 + 0.8 + 4 + 2 + 0) / 5)
    assert float(pairwise_hinge_loss(scores, labels, groups, margin=0.5)) == pytest.approx((0 + 0.3 + 3.5 + 1.5) / 5)
    # No pair in the batch (one label per question): zero, and still a tensor with a gradient path.
    flat = pairwise_hinge_loss(scores.requires_grad_(), torch.zeros(6), groups)
    assert float(flat.detach()) == 0.0 and flat.requires_grad
    expected = torch.nn.functional.binary_cross_entropy_with_logits(scores.detach(), (labels > 0).float())
    assert float(pointwise_loss(scores.detach(), labels)) == pytest.approx(float(expected))


@pytest.mark.parametrize("head", ["last-layer", "hire", "hire-lite", "scalar-mix", "concat-last-4"])
def test_every_head_ranks_and_padding_changes_no_score(world, head):
    from hire.data.ranking import RankingExample
    from hire.model import build_model, load_tokenizer
    from hire.tasks.ranking.tasktype import RankingCollator, encode_pairs

    torch.manual_seed(0)
    model = build_model(str(world["encoder3"]), head, num_labels=1, task_type="ranking",
                        task_options={"rank_loss": "pairwise", "rank_margin": 1.0}).eval()
    tokenizer = load_tokenizer(str(world["encoder"]))
    examples = [RankingExample("q", "where is the lake", str(i), text, float(i == 0)) for i, text in enumerate(
        ["the lake is in the north", "shops", "the old town has many shops near the river during summer"])]
    split = encode_pairs(examples, tokenizer, 32)
    collate = RankingCollator(tokenizer.pad_token_id)
    batch = collate([split[i] for i in range(3)])
    assert batch["attention_mask"].sum(1).tolist() != [batch["input_ids"].shape[1]] * 3  # padding present
    with torch.no_grad():
        together = model(**{k: v for k, v in batch.items() if k != "index"}).logits
        alone = torch.cat([model(**{k: v for k, v in collate([split[i]]).items() if k != "index"}).logits
                           for i in range(3)])
        assert together.shape == (3,)
        torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)
    model.train()
    out = model(**{k: v for k, v in batch.items() if k != "index"})
    out.loss.backward()  # the pairwise loss trains every head
    assert out.loss.item() >= 0


def test_a_long_passage_is_cut_with_one_warning_that_counts(world):
    from hire.data.ranking import RankingExample
    from hire.model import load_tokenizer
    from hire.tasks.ranking.tasktype import encode_pairs

    tokenizer = load_tokenizer(str(world["encoder"]))
    long = " ".join(["lake"] * 10_000)
    examples = [RankingExample("q", "where is the lake", "1", long, 1.0),
                RankingExample("q", "where is the lake", "2", "near the river", 0.0),
                RankingExample("r", "where is the tower", "1", long, 0.0)]
    with pytest.warns(RuntimeWarning, match=r"2 of 3 passages were cut short to fit --data.max_length 32") as seen:
        split = encode_pairs(examples, tokenizer, 32)
    assert len(seen) == 1
    assert split.truncated == 2 and max(split.lengths) == 32
    question = tokenizer("where is the lake", add_special_tokens=False)["input_ids"]
    assert split.features[0]["input_ids"][1:1 + len(question)] == question  # the question is never cut here


def test_a_bi_encoder_cuts_a_long_passage_and_a_long_question_with_one_warning_that_counts(world):
    from hire.data.ranking import RankingExample
    from hire.model import load_tokenizer
    from hire.tasks.ranking.tasktype import encode_apart

    tokenizer = load_tokenizer(str(world["encoder"]))
    long = " ".join(["lake"] * 10_000)
    examples = [RankingExample("q", "where is the lake", "1", long, 1.0),
                RankingExample("q", "where is the lake", "2", "near the river", 0.0),
                RankingExample("r", "where " * 40, "1", long, 0.0)]
    with pytest.warns(RuntimeWarning, match=r"^2 of 3 passages were cut short to fit --data.max_length 32 tokens "
                                            r"\(questions and passages are encoded apart\); 1 question\(s\) were "
                                            r"cut too$") as seen:
        split = encode_apart(examples, tokenizer, 32)
    assert len(seen) == 1 and split.truncated == 2
    assert [len(f["input_ids"]) for f in split.passage_texts] == [32, 5]
    assert len(split.question_texts[1]["input_ids"]) == 32
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a passage of exactly 30 words fits with [CLS] and [SEP]: no warning
        fits = encode_apart([RankingExample("q", "where is the lake", "1", " ".join(["lake"] * 30), 1.0)],
                            tokenizer, 32)
    assert fits.truncated == 0 and len(fits.passage_texts[0]["input_ids"]) == 32


@pytest.mark.parametrize("encode", ["encode_pairs", "encode_apart"])
@pytest.mark.parametrize("label", [None, float("nan")])
def test_a_labelled_split_refuses_a_candidate_without_a_finite_label(world, encode, label):
    import hire.tasks.ranking.tasktype as ranking
    from hire.data.ranking import RankingExample
    from hire.model import load_tokenizer

    tokenizer = load_tokenizer(str(world["encoder"]))
    examples = [RankingExample("q", "where is the lake", "1", "in the north", 1.0),
                RankingExample("q", "where is the lake", "2", "near the river", label)]
    with pytest.raises(ValueError, match="a labelled split needs a finite label on every candidate"):
        getattr(ranking, encode)(examples, tokenizer, 32)
    assert getattr(ranking, encode)(examples, tokenizer, 32, labelled=False).labels is None


def test_a_saved_ranker_scores_alike_in_transformers_and_hire_predict(world, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out = tmp_path / "run"
    train(parse_options(ranking_options(world, out, "--model.head", "hire", "--train.max_steps", "2",
                                "--train.eval_every", "2")))
    predictions = tmp_path / "ranked.jsonl"
    code = main(["predict", "--model", str(out / "best"), "--input", str(world["test"]), "--ranking_columns",
                 COLUMNS, "--output", str(predictions), "--max_length", "32"])
    assert code == 0
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    run = read_run(tmp_path / "ranked.run")
    assert {(r["qid"], r["pid"]): r["score"] for r in rows} == {(q, p): s for q, ps in run.items()
                                                               for p, s in ps.items()}
    assert '"map"' in capsys.readouterr().out  # a labelled input is also scored
    model = AutoModelForSequenceClassification.from_pretrained(out / "best").eval()
    tokenizer = AutoTokenizer.from_pretrained(out / "best")
    examples = read_ranking_file(world["test"], columns=dict(q.split("=") for q in COLUMNS.split(","))).examples
    with torch.no_grad():
        for ex in examples[:6]:
            enc = tokenizer(ex.question, ex.passage, truncation="only_second", max_length=32, return_tensors="pt")
            score = model(**enc).logits.reshape(()).item()
            mine = next(r["score"] for r in rows if (r["qid"], r["pid"]) == (ex.qid, ex.pid))
            assert score == pytest.approx(mine, abs=1e-5)


def test_a_run_stopped_mid_way_resumes_to_the_same_result(world, tmp_path, monkeypatch):
    """Stopped after step 3 (its checkpoint at step 2 kept, as after a kill), the same command resumes and ends
    where an uninterrupted run ends (in-process; the slow test below kills a real process)."""
    args = ["--model.head", "hire", "--train.rank_loss", "pairwise"]
    whole = train(parse_options(ranking_options(world, tmp_path / "whole", *args)))
    train_stopped_after(ranking_options(world, tmp_path / "parts", *args), 3, monkeypatch)
    assert json.loads((tmp_path / "parts" / "checkpoint" / "trainer_state.json").read_text())["step"] == 2
    resumed = train(parse_options(ranking_options(world, tmp_path / "parts", *args)))
    assert resumed["dev"] == whole["dev"] and resumed["held_out"] == whole["held_out"]
    a, b = ((tmp_path / d / "predictions" / "dev.run").read_text() for d in ("whole", "parts"))
    assert a == b


@pytest.mark.slow  # CI's slow run; fast: the in-process resume test above goes through the same loop
def test_a_killed_ranker_run_resumes_to_the_same_result(world, tmp_path):
    args = ["--model.head", "last-layer", "--train.rank_loss", "pairwise"]
    whole = train(parse_options(ranking_options(world, tmp_path / "whole", *args)))
    cmd = ["train", *ranking_options(world, tmp_path / "parts", *args)]
    killed = hire_process(*cmd, kill="step:5")
    assert killed.returncode == 137, killed.stderr[-2000:]
    resumed = hire_process(*cmd)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "Resuming" in resumed.stdout + resumed.stderr
    assert json.loads((tmp_path / "parts" / "metrics.json").read_text())["dev"] == whole["dev"]


def test_ranking_options_are_refused_elsewhere(world):
    from hire.config import ConfigError

    base = ["--output_dir", "/tmp/unused-run", "--data.task", "RTE"]
    with pytest.raises(ConfigError, match=r"--train\.rank_loss: only for ranking tasks"):
        parse_options([*base, "--train.rank_loss", "pairwise"]).validate()
    with pytest.raises(ConfigError, match=r"--data\.keep: only for ranking tasks"):
        parse_options([*base, "--data.keep", "all"]).validate()
