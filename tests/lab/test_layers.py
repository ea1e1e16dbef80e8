"""``hire deepen`` and ``hire reconstruct`` on tiny random encoders of every supported family (no download)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from badinput import hire_process
from tiny import SPECIALS, save_tiny_encoder
from transformers import (
    AlbertConfig,
    AlbertModel,
    AutoModel,
    AutoModelForMaskedLM,
    BertConfig,
    BertForMaskedLM,
    BertModel,
    BertTokenizerFast,
    DebertaConfig,
    DebertaV2Config,
    ElectraConfig,
    MPNetConfig,
    PretrainedConfig,
    PreTrainedModel,
    RobertaConfig,
    XLMRobertaConfig,
)

from hire.cli import main
from hire.config import ConfigError
from hire.data import default_glue_dir, read_glue_split
from hire.layers.deepen import deepen_checkpoint, deepen_model, layer_list
from hire.layers.plan import build_plan, describe_plan, parse_indices
from hire.layers.reconstruct import Decoder, count_correct

GLUE = default_glue_dir()
needs_glue = pytest.mark.skipif(not (GLUE / "CoLA").is_dir(), reason=f"no GLUE data at {GLUE}")
SMALL = {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
         "intermediate_size": 37, "max_position_embeddings": 64, "initializer_range": 0.2}
FAMILIES: dict[str, Callable[[], PretrainedConfig]] = {
    "bert": lambda: BertConfig(**SMALL),
    "roberta": lambda: RobertaConfig(**SMALL, pad_token_id=1),
    "xlm-roberta": lambda: XLMRobertaConfig(**SMALL, pad_token_id=1),
    "electra": lambda: ElectraConfig(**SMALL, embedding_size=16),  # embeddings projected up to the layers
    "mpnet": lambda: MPNetConfig(**SMALL),
    "deberta": lambda: DebertaConfig(**SMALL, relative_attention=True, max_relative_positions=16,
                                     pos_att_type=["c2p", "p2c"]),
    "deberta-v2": lambda: DebertaV2Config(**SMALL, relative_attention=True, position_buckets=8,
                                          pos_att_type=["c2p", "p2c"], norm_rel_ebd="layer_norm",
                                          conv_kernel_size=3),
}


@pytest.fixture(autouse=True)
def _one_thread(single_thread: None) -> Iterator[None]:
    yield


def tiny(family: str) -> PreTrainedModel:
    torch.manual_seed(0)
    return AutoModel.from_config(FAMILIES[family]()).eval()


def hidden_states(model: PreTrainedModel) -> list[torch.Tensor]:
    ids = torch.randint(3, 99, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        return list(model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states)


# --- plans ------------------------------------------------------------------------------------------------------


def test_plans() -> None:
    assert build_plan(6, duplicate=[4, 5]) == [0, 1, 2, 3, 4, 4, 5, 5]
    assert build_plan(3, duplicate=[1, 1]) == [0, 1, 1, 1, 2]
    assert build_plan(3, duplicate_all=True) == [0, 0, 1, 1, 2, 2]
    assert build_plan(3, layers=[2, 0]) == [2, 0]
    assert parse_indices("all", "--duplicate", allow_all=True) is None
    assert describe_plan([0, 1, 1], 3) == "3 -> 3 layers: 0 1 1' (layers 2 dropped)"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"duplicate": [6]}, "--duplicate: layer 6 does not exist; the encoder has 6 layers (0-5)"),
    ({"layers": [0, 9]}, "--layers: layer 9 does not exist"),
    ({"layers": []}, "--layers: the plan is empty"),
    ({}, "give exactly one of them"),
    ({"duplicate": [1], "layers": [1]}, "give exactly one of them"),
])
def test_bad_plans(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_plan(6, **kwargs)


@pytest.mark.parametrize(("text", "message"), [("4,x", "'x' is not a layer index"), ("-1", "negative"),
                                               (" , ", "give layer indices")])
def test_bad_indices(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_indices(text, "--duplicate", allow_all=True)


# --- deepening in memory and as a checkpoint -------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_identity_plan_changes_nothing(family: str) -> None:
    model = tiny(family)
    before = hidden_states(model)
    after = hidden_states(deepen_model(copy.deepcopy(model), [0, 1, 2]))
    assert len(after) == 4 and all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize("family", FAMILIES)
def test_duplicates_are_equal_independent_copies(family: str) -> None:
    model = deepen_model(tiny(family), [0, 1, 1, 2])
    layers = layer_list(model)
    assert model.config.num_hidden_layers == len(layers) == 4
    for (name, a), (_, b) in zip(layers[1].named_parameters(), layers[2].named_parameters(), strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr(), name
    for position, layer in enumerate(layers):  # the key-value cache index, where the family keeps one
        assert all(m.layer_idx == position for m in layer.modules() if isinstance(getattr(m, "layer_idx", None), int))
    with torch.no_grad():
        next(layers[2].parameters()).add_(1.0)
    assert not torch.equal(next(layers[1].parameters()), next(layers[2].parameters()))


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_reloads_deeper_and_equals_the_in_memory_copy(family: str, tmp_path: Path) -> None:
    model = tiny(family)
    model.save_pretrained(tmp_path / "src")
    record = deepen_checkpoint(str(tmp_path / "src"), str(tmp_path / "deep"), duplicate=[1, 2])
    assert record["plan"] == [0, 1, 1, 2, 2] and record["duplicate"] == [False, False, True, False, True]
    assert json.loads((tmp_path / "deep" / "deepen.json").read_text())["source_layers"] == 3
    loaded = AutoModel.from_pretrained(tmp_path / "deep").eval()
    assert loaded.config.num_hidden_layers == len(layer_list(loaded)) == 5
    a, b = layer_list(loaded)[1], layer_list(loaded)[2]
    assert all(torch.equal(x, y) and x.data_ptr() != y.data_ptr()
               for x, y in zip(a.parameters(), b.parameters(), strict=True))
    expected = hidden_states(deepen_model(model, record["plan"]))
    assert all(torch.equal(x, y) for x, y in zip(hidden_states(loaded), expected, strict=True))


def test_masked_lm_head_is_carried_over(tmp_path: Path) -> None:
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(**SMALL)).save_pretrained(tmp_path / "src")
    deepen_checkpoint(str(tmp_path / "src"), str(tmp_path / "deep"), layers=[2, 1, 0, 0])
    model, info = AutoModelForMaskedLM.from_pretrained(tmp_path / "deep", output_loading_info=True)
    assert not info["missing_keys"] and model.config.num_hidden_layers == 4


def test_deepen_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tiny("bert").save_pretrained(tmp_path / "src")
    torch.manual_seed(0)
    AlbertModel(AlbertConfig(**{**SMALL, "embedding_size": 16})).save_pretrained(tmp_path / "albert")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")

    def fails(*args: str) -> str:
        try:
            status = main(["deepen", *args])
        except SystemExit as usage_error:  # argparse's own errors
            status = usage_error.code
        assert status == 2
        return capsys.readouterr().err

    src, out = str(tmp_path / "src"), str(tmp_path / "out")
    assert "--duplicate: layer 3 does not exist; the encoder has 3 layers (0-2)" in fails(
        "--encoder", src, "--duplicate", "3", "--output", out)
    assert "not supported for deepening; supported: BERT" in fails(
        "--encoder", str(tmp_path / "albert"), "--duplicate", "0", "--output", out)
    assert "--layers: not allowed with --duplicate" in fails("--encoder", src, "--duplicate", "0", "--layers", "0",
                                                             "--output", out)
    assert "is not empty" in fails("--encoder", src, "--duplicate", "0", "--output", str(tmp_path / "full"))
    assert "--overwrite replaces only those" in fails(
        "--encoder", src, "--duplicate", "0", "--output", str(tmp_path / "full"), "--overwrite")
    assert "the same folder as --encoder" in fails("--encoder", src, "--duplicate", "0", "--output", src)
    assert not (tmp_path / "out").exists() and (tmp_path / "full" / "notes.txt").read_text() == "mine"
    with pytest.raises(ConfigError, match="model type 'albert' is not supported"):
        deepen_model(AutoModel.from_pretrained(tmp_path / "albert"), [0, 0])
    assert main(["deepen", "--encoder", src, "--duplicate", "0", "--output", out]) == 0
    assert main(["deepen", "--encoder", src, "--duplicate", "all", "--output", out, "--overwrite"]) == 0
    assert AutoModel.from_pretrained(out).config.num_hidden_layers == 6


@needs_glue
def test_deepened_encoder_trains_with_hire_train(tmp_path: Path) -> None:
    rows = read_glue_split("CoLA", "train")[:16]
    src = save_tiny_encoder(tmp_path / "src", [e.text_a for e in rows])
    assert main(["deepen", "--encoder", str(src), "--duplicate", "1", "--output", str(tmp_path / "deep")]) == 0
    result = hire_process(
        "train", "--output_dir", str(tmp_path / "run"), "--data.task", "CoLA", "--model.encoder",
        str(tmp_path / "deep"), "--data.max_train_examples", "16", "--data.max_eval_examples", "8",
        "--train.batch_size", "8", "--train.max_steps", "2", "--train.eval_every", "2", "--train.mixed_precision", "no",
        timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["steps"] == 2
    first = json.loads((tmp_path / "run" / "predictions" / "dev.jsonl").read_text().splitlines()[0])
    assert len(first["layer_weights"]) == 4  # 3 layers (1 duplicated) + the embeddings


# --- reconstruction ----------------------------------------------------------------------------------------------


def test_tied_embeddings_decode_the_embeddings_exactly() -> None:
    torch.manual_seed(0)
    weight = torch.nn.functional.normalize(torch.randn(99, 32), dim=-1)  # unit rows: each is its own argmax
    ids = torch.randint(0, 99, (300,))
    decoder = Decoder("tied-embeddings", "", lambda h: h @ weight.T)
    assert count_correct(decoder, weight[ids], ids, chunk=64) == 300
    assert count_correct(decoder, -weight[ids], ids) < 30


def word_tokenizer(folder: Path, texts: list[str]) -> BertTokenizerFast:
    """A word-level BERT tokenizer knowing every word of ``texts``. (The vocabulary file is passed by
    position: transformers 5 names the argument ``vocab``, 4.x ``vocab_file``.)"""
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join([*SPECIALS, *words]) + "\n")
    return BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)


def save_exact_masked_lm(folder: Path, tokenizer: BertTokenizerFast) -> Path:
    """A BERT whose embedding output is its word embedding and whose MLM head maps that back exactly:
    zero position and type embeddings, rows of E with mean 0 and variance 1 (LayerNorm leaves them as they
    are), a linear head transform that is the identity. Its layers above stay random."""
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(**{**SMALL, "vocab_size": len(tokenizer), "max_position_embeddings": 160},
                                       hidden_act="linear"))
    with torch.no_grad():
        emb = model.bert.embeddings
        words = torch.randn_like(emb.word_embeddings.weight)
        words -= words.mean(-1, keepdim=True)
        emb.word_embeddings.weight.copy_(words / words.std(-1, unbiased=False, keepdim=True))
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        transform = model.cls.predictions.transform
        transform.dense.weight.copy_(torch.eye(32))
        transform.dense.bias.zero_()
        model.cls.predictions.bias.zero_()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_plain_encoder(folder: Path, tokenizer: BertTokenizerFast) -> Path:
    """A random bare BertModel (no MLM head), as all-MiniLM-L6-v2 and the sentence-transformers models."""
    torch.manual_seed(1)
    config = BertConfig(**{**SMALL, "vocab_size": len(tokenizer), "num_hidden_layers": 2,
                           "max_position_embeddings": 160})
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@needs_glue
def test_reconstruct_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tokenizer = word_tokenizer(tmp_path / "vocab", [e.text_a for e in read_glue_split("CoLA", "dev")[:12]])
    plain = save_plain_encoder(tmp_path / "plain", tokenizer)
    exact = save_exact_masked_lm(tmp_path / "exact", tokenizer)
    assert main(["deepen", "--encoder", str(exact), "--duplicate", "0", "--output", str(tmp_path / "deeper")]) == 0
    out = tmp_path / "rec"
    args = ["reconstruct", "--task", "CoLA", "--max_examples", "12", "--batch_size", "5", "--output_dir", str(out),
            "--encoder", f"{exact},{tmp_path / 'deeper'}", "--encoder", str(plain)]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    by_label = {e["label"]: e for e in results["encoders"]}
    assert [e["decoder"] for e in results["encoders"]] == ["mlm-head", "mlm-head", "tied-embeddings"]
    assert "no trained masked-LM head (missing: cls.predictions" in by_label["plain"]["decoder_note"]
    assert by_label["exact"]["accuracy"][0] == by_label["deeper"]["accuracy"][0] == 1.0
    assert by_label["exact"]["tokens"] > 50 and len(by_label["deeper"]["accuracy"]) == 5
    assert by_label["deeper"]["deepen"]["duplicate"] == [False, True, False, False]
    assert "| H_2 | " in capsys.readouterr().out and "*" in (out / "reconstruction.md").read_text()
    csv_lines = (out / "reconstruction.csv").read_text().splitlines()
    assert csv_lines[0] == "hidden_state,exact,deeper,plain,deeper source layer" and len(csv_lines) == 6
    assert (out / "reconstruction.png").read_bytes()[:4] == b"\x89PNG"

    tied = ["reconstruct", "--task", "CoLA", "--max_examples", "12", "--output_dir", str(tmp_path / "tied"),
            "--encoder", str(exact), "--decoder", "tied-embeddings", "--x_axis", "layer"]
    assert main(tied) == 0
    record = json.loads((tmp_path / "tied" / "results.json").read_text())["encoders"][0]
    assert record["decoder"] == "tied-embeddings" and record["accuracy"][0] == 1.0
    png = (out / "reconstruction.png").read_bytes()
    assert main(["reconstruct", "--report_only", "--output_dir", str(out)]) == 0
    assert (out / "reconstruction.png").read_bytes() == png

    pairs = tmp_path / "pairs.tsv"  # a user's file of sentence pairs: both sides in one input
    pairs.write_text("first\tsecond\nthe book is here .\tit was read .\nsome text\tmore text\n")
    assert main(["reconstruct", "--input", str(pairs), "--text_columns", "first,second", "--encoder", str(exact),
                 "--output_dir", str(tmp_path / "pairs")]) == 0
    results = json.loads((tmp_path / "pairs" / "results.json").read_text())
    assert results["data"]["pair"] and results["data"]["examples"] == 2
    assert results["encoders"][0]["accuracy"][0] == 1.0

    def fails(*extra: str) -> str:
        assert main(["reconstruct", "--output_dir", str(tmp_path / "bad"), *extra]) == 2
        return capsys.readouterr().err

    assert "--decoder mlm-head" in fails("--encoder", str(plain), "--decoder", "mlm-head", "--max_examples", "2")
    assert "--task: unknown GLUE task 'NoSuch'" in fails("--encoder", str(plain), "--task", "NoSuch")
    assert "--labels: 1 names for 2 encoders" in fails("--encoder", f"{plain},{exact}", "--labels", "x")
    assert "--input" in fails("--encoder", str(plain), "--task", "CoLA", "--input", str(tmp_path / "x.tsv"))
    assert "--encoder: give at least one" in fails()
