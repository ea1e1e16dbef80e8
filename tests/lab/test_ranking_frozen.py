"""``hire rank-probe``: the frozen ranking grid (batched scorers, losses, features) and the command end to end."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from badinput import call_hire
from threadpoolctl import threadpool_limits
from tiny import save_tiny_encoder

from hire.data.ranking import RankingExample, read_ranking_file
from hire.data.trec import read_qrels, read_run
from hire.lab.pooling import POOLINGS
from hire.metrics import ranking_metrics
from hire.probing.classifiers import design_matrix
from hire.ranking import LOSSES, SCORERS
from hire.ranking import cli as rank_cli
from hire.ranking.data import Candidates
from hire.ranking.features import FeatureGroup, SplitData, feature_groups, gather, standardise_splits
from hire.ranking.scorers import BatchedScorer, cosine
from hire.ranking.settings import LEARNED, FitSettings
from hire.ranking.train import _batch_loss, fit_group

COLOURS = ["red", "blue", "green", "yellow", "black", "white", "purple", "orange"]
THINGS = ["apple", "sky", "grass", "sun", "coal", "snow", "plum", "carrot", "river", "stone", "cloud", "leaf", "sand",
          "rose", "lake", "fire", "moon", "tree", "wolf", "bear", "fish", "bird", "horse", "cat", "dog", "frog", "owl",
          "bee", "ant", "fox"]
WIKIQA_HEADER = "QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel\r\n"
COLUMNS = "qid=QuestionID,question=Question,pid=SentenceID,passage=Sentence,label=Label"


@pytest.fixture(autouse=True)
def _one_thread(single_thread: None) -> Iterator[None]:
    """Tiny problems: a second torch or BLAS thread on a busy 2-core machine only waits (see conftest)."""
    with threadpool_limits(1):
        yield


# --- synthetic features ---------------------------------------------------------------------------------------


def synthetic(questions: int, seed: int, states: int = 3, dim: int = 8) -> tuple[Candidates, np.ndarray, np.ndarray]:
    """Candidates (4-6 per question, one or two relevant) and pooled features ``(n, states, 4, dim)`` in which a
    relevant passage is its question's vector plus noise and the others are random."""
    rng = np.random.default_rng(seed)
    examples, q_feats, p_feats = [], [], []
    for q in range(questions):
        u = rng.normal(size=(states, 4, dim))
        q_feats.append(u)
        for j in range(int(rng.integers(4, 7))):
            relevant = j < 1 + q % 2
            p_feats.append(u + 0.5 * rng.normal(size=u.shape) if relevant else rng.normal(size=u.shape))
            examples.append(RankingExample(f"q{q}", f"question {q}", f"p{j}", f"passage {q} {j}", float(relevant)))
    order = rng.permutation(len(examples))  # candidates of a question need not be adjacent, nor relevant ones first
    examples = [examples[i] for i in order]
    c = Candidates.of(examples)  # questions numbered in order of first appearance, passages by distinct text
    q = np.asarray(q_feats, dtype=np.float32)[[int(text.split()[1]) for text in c.question_texts]]
    p = np.asarray(p_feats, dtype=np.float32)[order]  # every passage text differs: passage i is row i
    assert c.passage.tolist() == list(range(len(examples)))
    return c, q, p


def _data(group: FeatureGroup, seed: int, questions: int) -> SplitData:
    c, q, p = synthetic(questions, seed)
    return SplitData(c, gather(q, group), gather(p, group))  # passage texts are distinct: row i is passage i


def dev_map(examples: list[RankingExample], scores: list[float]) -> float:
    return ranking_metrics(examples, scores)["map"]


def test_candidates_group_questions_and_pair_better_with_worse() -> None:
    rows = [("a", "p1", 0.0), ("b", "p1", 1.0), ("a", "p2", 2.0), ("a", "p3", 1.0), ("b", "p2", 0.0)]
    c = Candidates.of([RankingExample(q, f"question {q}", p, f"text {p}", y) for q, p, y in rows])
    assert c.question.tolist() == [0, 1, 0, 0, 1] and c.question_texts == ["question a", "question b"]
    assert c.passage_texts == ["text p1", "text p2", "text p3"] and c.passage.tolist() == [0, 0, 1, 2, 1]
    assert [r.tolist() for r in c.rows] == [[0, 2, 3], [1, 4]]
    # graded: every (better, worse) pair of question a, positions within its rows (labels 0, 2, 1)
    assert sorted(map(tuple, c.pairs(0).tolist())) == [(1, 0), (1, 2), (2, 0)]
    assert c.pairs(1).tolist() == [[0, 1]]


def test_gather_matches_the_probes_design_matrix() -> None:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(5, 4, len(POOLINGS), 6)).astype(np.float16)  # a float16 cache, 4 hidden states
    for group in feature_groups(4):
        got = gather(features, group, chunk=2)
        assert got.dtype == torch.float32
        for i, fs in enumerate(group.sets):
            np.testing.assert_array_equal(got[i].numpy(), design_matrix(features, None, fs))
    names = [(fs.row, fs.pooling) for g in feature_groups(4) for fs in g.sets]
    assert len(names) == len(set(names)) == (4 + 2) * len(POOLINGS)  # 0-3, first+last, all


def test_standardise_uses_the_training_statistics() -> None:
    group = feature_groups(3)[0]
    train, dev = _data(group, 0, 10), _data(group, 1, 5)
    raw_dev = dev.q.clone()
    both = torch.cat([train.q, train.p], dim=1)
    mean, std = both.mean(1, keepdim=True), both.std(1, keepdim=True, unbiased=False)
    standardise_splits(train, dev)
    stacked = torch.cat([train.q, train.p], dim=1)
    torch.testing.assert_close(stacked.mean(1), torch.zeros_like(stacked.mean(1)), atol=1e-5, rtol=0)
    torch.testing.assert_close(stacked.std(1, unbiased=False), torch.ones_like(stacked.mean(1)))
    torch.testing.assert_close(dev.q, (raw_dev - mean) / std)


def test_cosine_of_identical_vectors_is_one() -> None:
    u = torch.randn(3, 2, 16)  # (F, Q, D)
    question_of = torch.tensor([0, 0, 1, 1, 1])
    same = cosine(u, u[:, question_of], question_of)
    torch.testing.assert_close(same, torch.ones(3, 5))
    other = cosine(u, -u[:, question_of], question_of)
    torch.testing.assert_close(other, -torch.ones(3, 5))


def test_hinge_and_pointwise_losses_by_hand() -> None:
    scores = torch.tensor([[2.0, 0.5, 1.8], [0.0, 0.0, 0.0]])  # (F=2, B=3); candidate 0 better than 1 and 2
    pairs = torch.tensor([[0, 1], [0, 2]])
    # set 0: max(0, 1 - 1.5) = 0 and max(0, 1 - 0.2) = 0.8 -> 0.4; set 1: both 1 -> 1
    loss = _batch_loss(scores, torch.tensor([1.0, 0.0, 0.0]), pairs, "hinge", margin=1.0)
    torch.testing.assert_close(loss, torch.tensor(1.4))
    labels = torch.tensor([1.0, 0.0, 0.0])
    expected = sum(np.mean([np.log1p(np.exp(-s)) if y else np.log1p(np.exp(s)) for s, y in zip(row, labels.tolist(),
                                                                                               strict=True)])
                   for row in scores.tolist())
    torch.testing.assert_close(_batch_loss(scores, labels, None, "pointwise", 1.0), torch.tensor(expected,
                                                                                             dtype=torch.float32))


@pytest.mark.parametrize("kind", LEARNED)
def test_hinge_trained_scorer_ranks_the_relevant_passage_first(kind: str) -> None:
    """Relevant passages are their question plus noise: every learned scorer must learn to put them first."""
    group = feature_groups(3)[0].subset([5])  # hidden state 1, sep pooling
    train, dev = _data(group, 0, 40), _data(group, 1, 12)
    before = BatchedScorer(kind, group.sets, train.q.shape[-1], 16, seed=0)
    standardise_splits(train, dev)
    fit = fit_group(kind, "hinge", group, train, {"dev": dev}, dev_map,
                    FitSettings(epochs=15, patience=15, lr=1e-2, batch_questions=8, mlp_hidden=16))
    assert fit.dev_map[0] == pytest.approx(1.0)
    assert dev_map(dev.candidates.examples, fit.scores["dev"][0].tolist()) == pytest.approx(1.0)
    with torch.no_grad():  # and the untrained scorer does not (except the bilinear one, a dot product at first)
        untrained = before(dev.q, dev.p[:, torch.from_numpy(dev.candidates.passage)],
                           torch.from_numpy(dev.candidates.question))[0].tolist()
    assert kind == "bilinear" or dev_map(dev.candidates.examples, untrained) < 0.9


@pytest.mark.parametrize(("kind", "loss"), [("bilinear", "hinge"), ("logistic", "pointwise"), ("mlp", "hinge"),
                                            ("mlp", "pointwise")])
def test_batched_training_equals_training_each_feature_set_alone(kind: str, loss: str) -> None:
    """The batch (same seed, same data order) changes nothing: each set's scores and chosen epoch are its own."""
    group = feature_groups(3)[0].subset([0, 3, 5, 10])  # sets of different rows and poolings
    settings = FitSettings(epochs=4, patience=2, lr=3e-2, batch_questions=4, mlp_hidden=8, seed=3)

    def fit(g: FeatureGroup):
        train, dev, test = _data(g, 0, 12), _data(g, 1, 6), _data(g, 2, 6)
        standardise_splits(train, dev, test)
        return fit_group(kind, loss, g, train, {"dev": dev, "test": test}, dev_map, settings)

    together = fit(group)
    assert len(set(together.best_epoch)) > 1 or len(set(map(tuple, together.scores["dev"].tolist()))) > 1
    for i in range(len(group.sets)):
        alone = fit(group.subset([i]))
        assert alone.best_epoch == [together.best_epoch[i]]
        assert alone.dev_map == pytest.approx([together.dev_map[i]], abs=1e-6)
        for split in ("dev", "test"):
            np.testing.assert_allclose(alone.scores[split][0], together.scores[split][i], rtol=1e-4, atol=1e-5)


def test_scorer_names_agree_with_the_command() -> None:
    assert (rank_cli.SCORERS, rank_cli.LOSSES) == (SCORERS, LOSSES)


# --- the command end to end, on a data set in WikiQA's layout that the tests make ---------------------------------


def write_wikiqa_like(folder: Path, seed: int = 0) -> list[str]:
    """30 questions in WikiQA's TSV layout (CRLF, its header): 'what colour is the X?' with 4-6 candidate
    sentences, one of which says it; train 16, dev 7, test 7 questions. Returns every text (for a vocabulary)."""
    rng = random.Random(seed)
    splits = {"train": range(0, 16), "dev": range(16, 23), "test": range(23, 30)}
    texts: list[str] = []
    folder.mkdir(parents=True, exist_ok=True)
    for split, questions in splits.items():
        lines = [WIKIQA_HEADER]
        for q in questions:
            thing, colour = THINGS[q], rng.choice(COLOURS)
            question = f"what colour is the {thing}?"
            candidates = [(f"the {thing} is {colour} .", 1)]
            candidates += [(f"a {rng.choice(THINGS)} near the {thing} can be {rng.choice(COLOURS)} .", 0)
                           for _ in range(rng.randint(3, 5))]
            rng.shuffle(candidates)
            for j, (sentence, label) in enumerate(candidates):
                lines.append(f"Q{q}\t{question}\tD{q}\t{thing}\tD{q}-{j}\t{sentence}\t{label}\r\n")
                texts.append(sentence)
            texts.append(question)
        (folder / f"{split}.tsv").write_text("".join(lines), newline="")
    return texts


@pytest.fixture(scope="module")
def ranking_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ranking")
    texts = write_wikiqa_like(root / "data")
    return {"root": root, "data": root / "data", "encoder": save_tiny_encoder(root / "encoder", texts)}


def rank_probe_args(world: dict[str, Path], out: Path, *extra: str) -> list[str]:
    data = world["data"]
    return ["rank-probe", "--encoders", str(world["encoder"]), "--labels", "tiny", "--task", "custom",
            "--train_file", str(data / "train.tsv"), "--dev_file", str(data / "dev.tsv"), "--test_file",
            str(data / "test.tsv"), "--columns", COLUMNS, "--output_dir", str(out), "--cache_dir",
            str(world["root"] / "cache"), "--epochs", "3", "--device", "cpu", "--mixed_precision", "no", *extra]


def test_rank_probe_command_end_to_end(ranking_world: dict[str, Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    result = call_hire(rank_probe_args(ranking_world, out), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    blocks = results["results"]["tiny"]["blocks"]
    assert list(blocks) == ["cosine/none", *[f"{s}/{loss}" for s in LEARNED for loss in LOSSES]]
    cells = {(r, p) for r in ("0", "1", "2", "first+last (1+2)", "all (0-2)") for p in POOLINGS}
    for block in blocks.values():  # every cell, with dev and test metrics
        assert {(c["row"], c["pooling"]) for c in block["rows"]} == cells and len(block["rows"]) == len(cells)
        for c in block["rows"]:
            assert set(c["dev"]) >= {"map", "mrr", "p@1"} and c["test"]["questions"] == 7
    assert results["data"]["questions"] == {"train": 16, "dev": 7, "test": 7}
    assert set(results["bm25"]) >= {"dev", "test", "settings"} and results["machine"]["cpu_count"]

    # the written run files rescore to the recorded metrics (the block's dev-chosen cell, and BM25)
    data = {s: read_ranking_file(ranking_world["data"] / f"{s}.tsv", "tsv", dict(
        qid="QuestionID", question="Question", pid="SentenceID", passage="Sentence", label="Label"), "has-positive")
        .examples for s in ("dev", "test")}
    for split, examples in data.items():
        qrels = read_qrels(out / "qrels" / f"{split}.qrels")
        assert {(e.qid, e.pid): int(e.label or 0) for e in examples} == {
            (q, p): g for q, grades in qrels.items() for p, g in grades.items()}
        known = {q: set(g) for q, g in qrels.items()}
        for block in blocks.values():
            chosen = next(c for c in block["rows"] if (c["row"], c["pooling"]) == (block["best"]["row"],
                                                                                   block["best"]["pooling"]))
            run = read_run(out / block["best"]["runs"][split], known)
            rescored = ranking_metrics(examples, [run[e.qid][e.pid] for e in examples])
            assert rescored == pytest.approx(chosen[split])
            assert chosen["dev"]["map"] == max(c["dev"]["map"] for c in block["rows"])
        run = read_run(out / results["bm25"]["runs"][split], known)
        assert ranking_metrics(examples, [run[e.qid][e.pid] for e in examples]) == pytest.approx(results["bm25"][split])

    # the report redraws from results.json alone, byte for byte
    drawn = {p: p.read_bytes() for p in [out / "report.md", *sorted((out / "figures").glob("*.png")),
                                         *sorted((out / "tables").glob("*.csv"))]}
    assert len(drawn) == 1 + len(POOLINGS) + 1
    report = drawn[out / "report.md"].decode()
    assert "BM25" in report and "**" in report and "†" in report
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "results.json").write_bytes((out / "results.json").read_bytes())
    assert call_hire(["rank-probe-report", str(alone)], tmp_path).returncode == 0
    for path, content in drawn.items():
        assert (alone / path.relative_to(out)).read_bytes() == content, path

    # resumable: a second run recomputes no finished block; a new loss adds only its blocks
    import hire.ranking.frozen as frozen

    calls: list[tuple[str, str]] = []
    real = frozen.run_block
    monkeypatch.setattr(frozen, "run_block", lambda s, loss, *a, **k: calls.append((s, loss)) or real(s, loss, *a, **k))
    before = json.loads((out / "results.json").read_text())["results"]
    assert call_hire(rank_probe_args(ranking_world, out), tmp_path).returncode == 0
    assert calls == [] and json.loads((out / "results.json").read_text())["results"] == before
    result = call_hire(rank_probe_args(ranking_world, out, "--scorers", "logistic", "--losses", "hinge"), tmp_path)
    assert result.returncode == 0 and calls == []  # a subset of what is there


def test_rank_probe_grows_by_scorer_and_refuses_other_options(ranking_world: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = rank_probe_args(ranking_world, out, "--scorers", "cosine")
    assert call_hire(args, tmp_path).returncode == 0
    shutil.rmtree(out / "runs")  # as in a committed copy of the folder (run files left behind): the next adds them
    assert call_hire([*args[:-2], "--scorers", "cosine,logistic", "--losses", "hinge"], tmp_path).returncode == 0
    results = json.loads((out / "results.json").read_text())
    assert list(results["results"]["tiny"]["blocks"]) == ["cosine/none", "logistic/hinge"]
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["tiny.logistic.hinge.dev.run",
                                                                 "tiny.logistic.hinge.test.run"]
    assert results["config"]["scorers"] == ["cosine", "logistic"]
    refused = call_hire([*args, "--seed", "5"], tmp_path)
    assert refused.returncode == 2 and "holds rank-probe results of other options" in refused.stderr


def test_rank_probe_warns_of_a_10000_word_passage_cut_short(ranking_world: dict[str, Path], tmp_path: Path) -> None:
    """The frozen grid encodes each text apart, at most --max_length tokens: a longer passage is cut, and one
    warning per split says how many were (the fine-tuned rankers' warning is tested in test_ranking_tasks)."""
    data = tmp_path / "data"
    shutil.copytree(ranking_world["data"], data)
    long = " ".join(["colour"] * 10_000)
    with (data / "dev.tsv").open("a", newline="") as f:
        f.write(f"Q16\twhat colour is the {THINGS[16]}?\tD16\t{THINGS[16]}\tD16-long\t{long}\t0\r\n")
    passages = {e.passage for e in read_ranking_file(data / "dev.tsv", "tsv", dict(
        qid="QuestionID", question="Question", pid="SentenceID", passage="Sentence", label="Label"), "has-positive")
        .examples}
    args = rank_probe_args({**ranking_world, "data": data}, tmp_path / "out", "--scorers", "cosine")
    result = call_hire(args, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    warned = [line for line in result.stderr.splitlines() if "warning:" in line]
    assert len(warned) == 1 and warned[0].startswith("hire rank-probe: warning: ") and warned[0].endswith(
        f" dev-passages: 1 of {len(passages)} texts were cut short to fit --max_length 128 tokens (the features read "
        "only their first tokens)"), warned
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["results"]["tiny"]["blocks"]["cosine/none"]["rows"][0]["dev"]["questions"] == 7
    # The count is recorded too, by split and side, and the report says it.
    cut = results["results"]["tiny"]["encode"]["cut"]
    assert cut["dev"] == {"questions": [0, 7], "passages": [1, len(passages)]}
    assert all(n == 0 for split in ("train", "test") for n, _ in cut[split].values())
    report = (tmp_path / "out" / "report.md").read_text()
    assert (f"Texts longer than --max_length 128 tokens, cut short (their features read the first 128 tokens): "
            f"tiny: 1 of {len(passages)} dev passages.") in report
    # A results file written before the count was recorded gains it on the next run, from the tokenizer alone;
    # its encoding time stays as recorded.
    del results["results"]["tiny"]["encode"]["cut"]
    results["results"]["tiny"]["encode"]["seconds"] = 12.5
    (tmp_path / "out" / "results.json").write_text(json.dumps(results))
    again = call_hire(args, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    encode = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["tiny"]["encode"]
    assert encode["cut"] == cut and encode["seconds"] == 12.5


def test_rank_probe_takes_a_random_twin(ranking_world: dict[str, Path], tmp_path: Path) -> None:
    from transformers import BertModel

    trained = tmp_path / "trained"
    shutil.copytree(ranking_world["encoder"], trained)
    torch.manual_seed(1)  # save_tiny_encoder draws seed 0's weights, as the random: twin does
    BertModel(BertModel.from_pretrained(trained).config).save_pretrained(trained)
    specs = [str(trained), f"random:{trained}"]
    out = tmp_path / "out"
    args = rank_probe_args(ranking_world, out, "--scorers", "cosine")
    args[args.index("--encoders") + 1] = ",".join(specs)
    del args[args.index("--labels"):args.index("--labels") + 2]  # the labels default to the specs
    result = call_hire(args, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert [e["label"] for e in results["encoders"]] == specs
    assert [e["kind"] for e in results["encoders"]] == ["pretrained", "random"]
    assert results["encoders"][0]["fingerprint"] != results["encoders"][1]["fingerprint"]
    rows = [results["results"][spec]["blocks"]["cosine/none"]["rows"] for spec in specs]
    assert len(rows[0]) == len(rows[1]) > 0 and rows[0] != rows[1]
    report = (out / "report.md").read_text()
    assert f"random:{trained}" in report
    # two encoders: one figure per pooling with both encoders' lines (cosine is the only block here)
    assert "## Encoders compared" in report and "for cosine." in report
    assert sorted(p.name for p in (out / "figures").glob("encoders-*.png")) == [
        "encoders-cls.png", "encoders-max.png", "encoders-mean.png", "encoders-sep.png"]

    bad = rank_probe_args(ranking_world, tmp_path / "bad", "--scorers", "cosine")
    bad[bad.index("--encoders") + 1] = "random:"
    refused = call_hire(bad, tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "--encoders random:: random: needs an encoder after it" in refused.stderr
    assert not (tmp_path / "bad").exists()
