"""Extractive question answering (hire.tasks.spans): the official metrics on hand-made cases, windows and the answer's
tokens, padding that changes no score for every head with a per-token form, bad input, and the real command end to
end (train, evaluate, save, reload, predict) on a tiny random encoder."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from tiny import save_tiny_encoder

from hire.cli import main
from hire.data.examples import DataError
from hire.tasks.spans.data import SpanExample, read_span_file
from hire.tasks.spans.tasktype import best_spans, encode_spans, squad_v1_scores, squad_v2_scores

WORDS = ["the", "tower", "is", "in", "paris", "river", "flows", "north", "city", "old", "bridge", "built", "in",
         "1889", "by", "eiffel", "where", "when", "who", "what", "was", "a", "of", "and", "it"]


def test_exact_match_and_f1_normalise_as_the_official_script():
    """Case, punctuation, articles and spaces do not count (a naive comparison would score 0); F1 counts shared
    words; the best of several gold answers counts."""
    exact, f1 = squad_v1_scores([["Eiffel tower"], ["Paris"], ["north", "the north bank"]],
                                ["The  Eiffel Tower!", "in the Paris city", "North bank"])
    assert exact == [1.0, 0.0, 1.0]  # the third matches its second gold once "the" is dropped
    assert f1[0] == 1.0 and abs(f1[1] - 0.5) < 1e-6  # paris of (in, paris, city): precision 1/3, recall 1
    assert f1[2] == 1.0  # the best of its golds (against "north" alone it would be 2/3)


def test_v2_figures_by_hand():
    """Two answerable and two unanswerable questions; the no-answer margin decides which are answered "". The best
    F1 threshold is the official find_best_thresh's: walk the questions by margin, answered ones adding their F1,
    unanswerable ones costing 1 where a text is predicted."""
    golds = [["paris"], ["1889"], [""], [""]]
    spans = [{"text": "paris", "score": 5.0, "no_answer_score": 1.0},   # margin -4: answered, right
             {"text": "1888", "score": 2.0, "no_answer_score": 3.0},    # margin 1: wrong text
             {"text": "tower", "score": 1.0, "no_answer_score": 0.5},   # margin -0.5: NoAns, a text predicted
             {"text": "city", "score": 1.0, "no_answer_score": 4.0}]    # margin 3: NoAns
    result = squad_v2_scores(golds, spans)
    # sorted margins: -4 (+1), -0.5 (-1), 1 (+0), 3 (-1); start at 2 (both NoAns right with no answer):
    # 3 at -4, 2 at -0.5, 2 at 1, 1 at 3 -> best 3/4 at threshold -4
    assert result["best_f1"] == 0.75 and result["best_f1_thresh"] == -4.0
    assert result["HasAns_total"] == 2 and result["NoAns_total"] == 2
    assert result["f1"] == 0.75  # at the best threshold: paris right, 1888 -> "" wrong, both NoAns ""
    at_zero = squad_v2_scores(golds, spans, threshold=0.0)  # margins above 0 answered "": q2, q4
    assert at_zero["exact"] == 0.5 and at_zero["NoAns_exact"] == 0.5


def passage(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def examples(n: int, seed: int, long_every: int = 0, impossible_every: int = 0) -> list[SpanExample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        before = passage(rng, 80 if long_every and i % long_every == 0 else rng.randint(3, 12))
        answer = rng.choice(["paris", "1889", "eiffel", "the old bridge"])
        context = f"{before} {answer} {passage(rng, rng.randint(2, 8))}"
        if impossible_every and i % impossible_every == 0:
            out.append(SpanExample(f"q{seed}-{i}", f"where is the {rng.choice(WORDS)}", context, (), True))
        else:
            out.append(SpanExample(f"q{seed}-{i}", f"what of {answer.split()[-1]}", context,
                                   ((answer, len(before) + 1),)))
    return out


def write_squad(path: Path, rows: list[SpanExample]) -> Path:
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": ex.context, "qas": [{"id": ex.qid, "question": ex.question, "is_impossible": ex.impossible,
                                         "answers": [{"text": t, "answer_start": s} for t, s in ex.answers]}]}
        for ex in rows]}]}
    path.write_text(json.dumps(data))
    return path


def write_jsonl(path: Path, rows: list[SpanExample]) -> Path:
    path.write_text("".join(json.dumps({"id": ex.qid, "context": ex.context, "question": ex.question,
                                        "answers": [{"text": t, "answer_start": s} for t, s in ex.answers]}) + "\n"
                            for ex in rows))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("spans")
    return {"train": write_jsonl(root / "train.jsonl", examples(40, 0, long_every=5)),
            "dev": write_squad(root / "dev.json", examples(12, 1, long_every=4)),
            "train_v2": write_jsonl(root / "train_v2.jsonl", examples(40, 2, impossible_every=3)),
            "dev_v2": write_squad(root / "dev_v2.json", examples(12, 3, impossible_every=3)),
            "encoder": save_tiny_encoder(root / "encoder", WORDS, max_words=100),
            "encoder3": save_tiny_encoder(root / "encoder3", WORDS, layers=3, max_words=100)}


def test_windows_hold_the_answer_tokens_and_every_question(world):
    from hire.model import load_tokenizer

    tokenizer = load_tokenizer(str(world["encoder"]))
    rows = examples(12, 1, long_every=4)
    split = encode_spans(rows, tokenizer, 32, 8)
    assert sorted(set(split.example)) == list(range(len(rows)))  # every question has a window
    assert any(c > 1 for c in split.windows_per_question())  # the long passages were cut into windows
    found = 0
    for f, item in enumerate(split.features):
        ex = rows[split.example[f]]
        s, e = item["start_positions"], item["end_positions"]
        if (s, e) == (0, 0):
            continue
        a, b = split.offsets[f][s][0], split.offsets[f][e][1]
        assert ex.context[a:b] == ex.answers[0][0]  # the tokens cover exactly the answer's characters
        found += 1
    assert found >= len(rows)  # each answer is inside at least one window


@pytest.mark.parametrize("head", ["last-layer", "hire", "scalar-mix", "concat-last-4", "hire-no-fusion"])
def test_padding_and_windows_change_no_span_score(world, head):
    """Each window's start and end scores, batched with longer windows, equal the scores of the window alone."""
    from hire.model import build_model, load_tokenizer
    from hire.tasks.spans.tasktype import SpanCollator

    encoder = world["encoder3"] if head == "concat-last-4" else world["encoder"]
    torch.manual_seed(0)
    model = build_model(str(encoder), head=head, num_labels=2, label_names=["start", "end"], task_type="span").eval()
    tokenizer = load_tokenizer(str(encoder))
    split = encode_spans(examples(6, 4, long_every=2), tokenizer, 32, 8, labelled=False)
    collate = SpanCollator(tokenizer.pad_token_id)
    with torch.no_grad():
        batch = collate([split[i] for i in range(len(split))])
        together = model(**{k: v for k, v in batch.items() if k != "index"})
        for i in range(len(split)):
            alone = model(**{k: v for k, v in collate([split[i]]).items() if k != "index"})
            n = len(split.features[i]["input_ids"])
            assert torch.allclose(together.start_logits[i, :n], alone.start_logits[0], atol=1e-5)
            assert torch.allclose(together.end_logits[i, :n], alone.end_logits[0], atol=1e-5)
            assert bool((together.start_logits[i, n:] < -1e30).all())  # padding never scores


def test_the_best_span_reads_the_exact_characters_of_the_passage():
    split_examples = [SpanExample("q", "where", "The  Tower, in Paris.", ())]

    class Split:
        def __init__(self) -> None:
            self.example = [0]
            self.offsets = [[None, None, (0, 3), (5, 10), (10, 11), (12, 14), (15, 20), (20, 21), None]]
            self.questions = 1

    s = torch.tensor([0.0, 0, 0, 1, 0, 0, 5, 0, 0]).numpy()
    e = torch.tensor([0.0, 0, 0, 0, 0, 0, 1, 4, 0]).numpy()
    best = best_spans(Split(), [s], [e], [ex.context for ex in split_examples], 30)[0]  # type: ignore[arg-type]
    assert best["text"] == "Paris." and (best["start"], best["end"]) == (15, 21)
    assert best["no_answer_score"] == 0.0


@pytest.mark.parametrize("row, message", [
    ({"context": "the tower is in paris", "question": "where", "answers": [{"text": "paris", "answer_start": 4}]},
     r"answer_start 4 does not point at its text 'paris' \(the context there reads 'tower'\)"),
    ({"context": "", "question": "where", "answers": []}, "no context"),
    ({"context": "a b", "question": " ", "answers": []}, "no question"),
    ({"context": "a b", "question": "q", "answers": [{"text": "", "answer_start": 0}]}, "an answer must be"),
])
def test_a_bad_question_is_one_line_naming_the_file_and_the_question(tmp_path, row, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "q7", **row}) + "\n")
    with pytest.raises(DataError, match=rf"bad\.jsonl, line 1: {message}"):
        read_span_file(path)


def test_a_question_that_leaves_no_room_for_the_passage_is_refused(world):
    from hire.model import load_tokenizer

    tokenizer = load_tokenizer(str(world["encoder"]))
    long = SpanExample("q9", " ".join(["where"] * 40), "the tower is in paris", (("paris", 16),))
    with pytest.raises(DataError, match="question q9: 40 tokens leave no room for the passage"):
        encode_spans([long], tokenizer, 32, 8)


def train_words(world: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["train", "--output_dir", str(out), "--data.task", "custom", "--data.format", "squad",
            "--data.train_file", str(world["train"]), "--data.dev_file", str(world["dev"]), "--data.max_length", "32",
            "--data.doc_stride", "8", "--model.encoder", str(world["encoder"]), "--train.batch_size", "8",
            "--train.max_steps", "6", "--train.eval_every", "3", "--train.lr", "3e-3", "--train.mixed_precision", "no",
            *extra]


@pytest.mark.parametrize("head", ["hire", "last-layer"])
def test_a_span_model_trains_evaluates_reloads_and_predicts_every_question(world, tmp_path, head, capsys):
    run = tmp_path / "run"
    assert main(train_words(world, run, "--model.head", head)) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    dev = metrics["dev"]["dev"]
    assert {"exact_match", "f1", "score"} <= dev.keys() and dev["questions"] == 12
    ids = {q["id"] for a in json.loads(world["dev"].read_text())["data"] for p in a["paragraphs"] for q in p["qas"]}
    rows = [json.loads(line) for line in (run / "predictions" / "dev.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rows} == ids  # questions in = questions scored
    official = json.loads((run / "predictions" / "dev.squad.json").read_text())
    assert set(official) == ids
    # the official answers are exact substrings of their passages
    contexts = {q["id"]: p["context"] for a in json.loads(world["dev"].read_text())["data"] for p in a["paragraphs"]
                for q in p["qas"]}
    assert all(r["answer"] == contexts[r["id"]][r["start"]:r["end"]] for r in rows)
    capsys.readouterr()
    out = tmp_path / "again.jsonl"
    assert main(["predict", "--model", str(run / "best"), "--input", str(world["dev"]), "--output", str(out)]) == 0
    again = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["answer"] for r in again] == [r["answer"] for r in rows]
    printed = capsys.readouterr().out
    assert '"f1"' in printed  # a labelled input is scored


def test_a_v2_model_chooses_its_no_answer_threshold_on_dev_and_keeps_it(world, tmp_path):
    run = tmp_path / "run"
    words = train_words(world, run)
    words[words.index(str(world["train"]))] = str(world["train_v2"])
    words[words.index(str(world["dev"]))] = str(world["dev_v2"])
    assert main(words) == 0
    dev = json.loads((run / "metrics.json").read_text())["dev"]["dev"]
    assert {"best_f1", "best_f1_thresh", "HasAns_f1", "NoAns_f1"} <= dev.keys() and dev["score"] == dev["best_f1"]
    config = json.loads((run / "best" / "config.json").read_text())
    assert config["task_options"]["no_answer_threshold"] == dev["best_f1_thresh"]
    assert (run / "predictions" / "dev.na_probs.json").is_file()


def test_doc_stride_must_be_below_the_window(world, tmp_path, capsys):
    words = train_words(world, tmp_path / "r")
    words[words.index("--data.doc_stride") + 1] = "32"
    assert main(words) == 2
    assert "--data.doc_stride 32: two windows must overlap by fewer tokens than a window holds" in \
        capsys.readouterr().err


def test_a_saved_span_model_loads_in_transformers_and_scores_alike(world, tmp_path):
    """AutoModelForQuestionAnswering loads a saved span model (after import hire) and gives hire's start and end
    scores. transformers 5 removed pipeline("question-answering") (its migration guide): where the pipeline exists
    it must find hire predict's answers, with the same window, stride and longest answer."""
    import transformers
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    import hire  # noqa: F401 (registers the model type "hire")

    run = tmp_path / "run"
    assert main(train_words(world, run, "--model.head", "hire")) == 0
    rows = [json.loads(line) for line in (run / "predictions" / "dev.jsonl").read_text().splitlines()]
    contexts = {q["id"]: (q["question"], p["context"]) for a in json.loads(world["dev"].read_text())["data"]
                for p in a["paragraphs"] for q in p["qas"]}
    model = AutoModelForQuestionAnswering.from_pretrained(str(run / "best")).eval()
    assert type(model).__name__ == "HireForQuestionAnswering"
    tokenizer = AutoTokenizer.from_pretrained(str(run / "best"))
    question, context = contexts[rows[1]["id"]]
    batch = tokenizer(question, context, truncation="only_second", max_length=32, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    start, end = int(out.start_logits[0].argmax()), int(out.end_logits[0].argmax())
    assert out.start_logits.shape == batch["input_ids"].shape and 0 <= start < batch["input_ids"].shape[1] > end
    if "question-answering" not in transformers.pipelines.SUPPORTED_TASKS:
        return  # transformers 5: no question-answering pipeline to compare with
    from transformers import pipeline

    answer = pipeline("question-answering", model=str(run / "best"), device="cpu")
    for row in rows[:6]:
        question, context = contexts[row["id"]]
        got = answer(question=question, context=context, max_seq_len=32, doc_stride=8, max_answer_len=30,
                     max_question_len=16)
        assert got["answer"] == row["answer"]


def test_a_line_separator_inside_a_passage_ends_no_question(tmp_path):
    """JSON lines end at a newline alone: a U+2028 or a form feed inside a JSON string is part of the text."""
    path = tmp_path / "qa.jsonl"
    context = "the tower\u2028is in\x0cparis"
    path.write_text(json.dumps({"id": "q1", "context": context, "question": "where",
                                "answers": [{"text": "paris", "answer_start": context.index("paris")}]},
                               ensure_ascii=False) + "\r\n")
    [ex] = read_span_file(path)
    assert ex.context == context and ex.answers == (("paris", context.index("paris")),)
