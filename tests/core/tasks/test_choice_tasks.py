"""Multiple choice (hire.tasks.choice): the readers and their errors, padding, mixed numbers of choices and the order
of choices that change no score for every sentence head, and the real command end to end on a tiny random encoder."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from tiny import save_tiny_encoder

from hire.cli import main
from hire.data.examples import DataError
from hire.tasks.choice.data import ChoiceExample, read_choice_file
from hire.tasks.choice.tasktype import ChoiceCollator, encode_choices

WORDS = ["the", "man", "opens", "door", "eats", "apple", "sings", "song", "car", "drives", "away", "a", "she", "he",
         "then", "walks", "in", "out", "sleeps", "red", "blue"]


def questions(n: int, seed: int, mixed: bool = False) -> list[dict]:
    """A context names a thing; the right ending names it again (an easy pattern the tiny model can learn)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        thing = rng.choice(["door", "apple", "song", "car"])
        k = rng.choice([2, 3, 4]) if mixed else 4
        others = [t for t in ["door", "apple", "song", "car"] if t != thing]
        choices = [f"then {rng.choice(['opens', 'eats', 'sings'])} the {t}" for t in rng.sample(others, k - 1)]
        label = rng.randrange(k)
        choices.insert(label, f"then walks to the {thing}")
        out.append({"id": f"c{seed}-{i}", "context": f"the man sees the {thing}", "question": "he",
                    "choices": choices, "label": label})
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("choice")
    return {"train": write_jsonl(root / "train.jsonl", questions(40, 0, mixed=True)),
            "dev": write_jsonl(root / "dev.jsonl", questions(12, 1, mixed=True)),
            "encoder": save_tiny_encoder(root / "encoder", WORDS),
            "encoder3": save_tiny_encoder(root / "encoder3", WORDS, layers=3)}


@pytest.mark.parametrize("name, text, message", [
    ("q.jsonl", '{"context": "a", "choices": ["x"], "label": 0}', r"q\.jsonl, line 1: 1 choice\(s\); a question needs"),
    ("q.jsonl", '{"context": "a", "choices": ["x", "y"], "label": 2}', "label 2 is outside its 2 choices"),
    ("q.jsonl", '{"context": "a", "choices": ["x", "y"], "label": "z"}', "the answer 'z' is not one of its choices"),
    ("q.jsonl", '{"choices": ["x", "y"], "label": 0}', "no context and no question"),
    ("q.tsv", "i\tprompt\ta\tb\tc\t1\n", r"q\.tsv, line 1: 6 tab-separated fields; CODAH has 7"),
    ("q.json", '[[["M: hi"], [{"question": "q", "choice": ["a", "b", "c"], "answer": "d"}], "d1"]]',
     r"q\.json: question d1-0: the answer 'd' is not one of its choices"),
])
def test_a_bad_question_is_one_line_naming_the_file_and_the_question(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        read_choice_file(path)


def test_swag_csv_and_dream_json_are_read(tmp_path):
    swag = tmp_path / "swag.csv"
    swag.write_text("fold-ind,sent1,sent2,ending0,ending1,ending2,ending3,label\n"
                    "7,The man opens the door.,He,walks in.,sleeps.,sings.,eats.,0\n")
    [ex] = read_choice_file(swag)
    assert ex.context == "The man opens the door." and ex.second(ex.choices[0]) == "He walks in." and ex.label == 0
    dream = tmp_path / "dream.json"
    dream.write_text(json.dumps([[["M: hi", "W: hello"], [{"question": "who?", "choice": ["m", "w", "x"],
                                                              "answer": "w"}], "d-1"]]))
    [ex] = read_choice_file(dream)
    assert ex.context == "M: hi\nW: hello" and ex.label == 1 and ex.qid == "d-1-0"


@pytest.mark.parametrize("head", ["last-layer", "hire", "scalar-mix", "concat-last-4", "pool-mean"])
def test_padding_and_the_number_and_order_of_choices_change_no_score(world, head):
    """A question's choice scores are the same alone and in a batch padded to more choices and longer pairs, and
    reordering its choices reorders its scores."""
    from hire.model import build_model, load_tokenizer

    encoder = world["encoder3"] if head == "concat-last-4" else world["encoder"]
    torch.manual_seed(0)
    model = build_model(str(encoder), head=head, num_labels=1, task_type="choice").eval()
    tokenizer = load_tokenizer(str(encoder))
    rows = [ChoiceExample(q["id"], q["context"], q["question"], tuple(q["choices"]), q["label"])
            for q in questions(6, 2, mixed=True)]
    split = encode_choices(rows, tokenizer, 24)
    collate = ChoiceCollator(tokenizer.pad_token_id)

    def scores(items: list[dict]) -> torch.Tensor:
        batch = collate(items)
        return model(**{k: v for k, v in batch.items() if k not in ("index", "labels")}).logits

    with torch.no_grad():
        together = scores([split[i] for i in range(len(split))])
        for i, ex in enumerate(rows):
            alone = scores([split[i]])[0]
            k = len(ex.choices)
            assert torch.allclose(together[i, :k], alone, atol=1e-5)
            assert bool((together[i, k:] < -1e30).all())  # a padded choice takes no probability
            flipped = ChoiceExample(ex.qid, ex.context, ex.question, tuple(reversed(ex.choices)), None)
            again = scores([encode_choices([flipped], tokenizer, 24, labelled=False)[0]])[0]
            assert torch.allclose(again, alone.flip(0), atol=1e-5)


def test_a_choice_model_trains_evaluates_reloads_and_predicts_every_question(world, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--output_dir", str(run), "--data.task", "custom", "--data.format", "choices",
                 "--data.train_file", str(world["train"]), "--data.dev_file", str(world["dev"]),
                 "--data.max_length", "24", "--model.encoder", str(world["encoder"]), "--model.head", "hire",
                 "--train.batch_size", "8", "--train.max_steps", "6", "--train.eval_every", "3", "--train.lr", "3e-3",
                 "--train.mixed_precision", "no"]) == 0
    dev = json.loads((run / "metrics.json").read_text())["dev"]["dev"]
    assert {"accuracy", "score"} <= dev.keys() and dev["questions"] == 12
    rows = [json.loads(line) for line in (run / "predictions" / "dev.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [q["id"] for q in questions(12, 1, mixed=True)]
    assert all(len(r["probabilities"]) == len(r["choices"]) for r in rows)
    capsys.readouterr()
    out = tmp_path / "again.jsonl"
    assert main(["predict", "--model", str(run / "best"), "--input", str(world["dev"]), "--output", str(out)]) == 0
    assert [json.loads(line)["prediction"] for line in out.read_text().splitlines()] == [r["prediction"] for r in rows]
    assert '"accuracy"' in capsys.readouterr().out
    from transformers import AutoModelForMultipleChoice

    import hire  # noqa: F401 (registers the model type "hire")

    model = AutoModelForMultipleChoice.from_pretrained(str(run / "best"))
    assert type(model).__name__ == "HireForMultipleChoice"


def test_a_line_separator_inside_a_question_ends_no_question(tmp_path):
    """JSON lines and CODAH's TSV end lines at a newline alone, not at U+2028 or a form feed inside the text."""
    rows = tmp_path / "q.jsonl"
    rows.write_text(json.dumps({"context": "a\u2028b", "choices": ["x\x0cy", "z"], "label": 0},
                               ensure_ascii=False) + "\n")
    [ex] = read_choice_file(rows)
    assert ex.context == "a\u2028b" and ex.choices == ("x\x0cy", "z")
    codah = tmp_path / "q.tsv"
    codah.write_text("i\tthe man\u2028walks\ta\tb\tc\td\t2\r\n")
    [ex] = read_choice_file(codah)
    assert ex.context == "the man\u2028walks" and ex.label == 2
