"""Bad input to the Python API, table-driven: every library entry point (``build_model``,
``HireModel.from_pretrained``, ``load_tokenizer``, the model's ``forward``, ``build_head``, the batching helpers)
refuses nonsense with a ValueError whose message names the argument at fault, instead of building a model that
computes something else, or failing deep inside torch or the hub client.

A few cases go through the real ``hire`` command as well (exit status 2, one line, nothing written), where the
same fault reaches it: a folder without tokenizer files.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from badinput import check_fails_cleanly
from conftest import make_batch, make_config, make_model
from transformers import AutoModelForSequenceClassification

from hire import HireModel, build_model, load_tokenizer
from hire.data import Example, read_table
from hire.data.batching import Collator, LengthGroupedBatches, encode
from hire.model.heads import build_head, pool

IDS, MASK = make_batch()  # 3 examples of 3, 7 and 11 tokens, padded to 11
B, N = IDS.shape


Place = Callable[[str], str]  # expands {tmp} (the case's folder) and {enc} (the tiny encoder) in a path
Call = Callable[[Place], Any]


def build(**kwargs: Any) -> Call:
    """build_model on the tiny random BERT, with ``kwargs`` changed (a string: a path, placed)."""
    defaults = {"encoder": make_config("bert"), "head": "last-layer", "num_labels": 3}
    return lambda at: build_model(**{**defaults, **{k: at(v) if isinstance(v, str) else v
                                                    for k, v in kwargs.items()}})


def forward(head: str = "last-layer", num_labels: int = 3, **kwargs: Any) -> Call:
    """The model's forward on the mixed-length batch, with ``kwargs`` changed."""
    return lambda at: make_model(head, num_labels=num_labels)(**{"input_ids": IDS, "attention_mask": MASK, **kwargs})


PAIR = [Example("0", "a fine film", "a dull film")]
LONG_MASK = torch.cat([MASK, torch.zeros(B, 2, dtype=torch.long)], dim=1)
NO_TOKEN_MASK = MASK.clone()
NO_TOKEN_MASK[1] = 0

# (id, the call, what the ValueError must say); {tmp} is the test's own folder.
CASES: list[tuple[str, Call, str]] = [
    # -- build_model: the label set
    ("num-labels-0", build(num_labels=0), "num_labels must be an integer >= 1"),
    ("num-labels-negative", build(num_labels=-3), "num_labels must be an integer >= 1 (1 = regression, 2 or more"),
    ("num-labels-float", build(num_labels=2.5), "num_labels must be an integer >= 1"),
    ("num-labels-bool", build(num_labels=True), "num_labels must be an integer >= 1"),
    ("num-labels-string", build(num_labels="2"), "num_labels must be an integer >= 1"),
    ("label-names-twice", build(num_labels=2, label_names=["pos", "pos"]), "label_names: 'pos' given twice"),
    ("label-names-count", build(num_labels=3, label_names=["a", "b"]), "label_names: 2 label names for 3 labels"),
    ("label-names-string", build(num_labels=2, label_names="ab"), "label_names must be a list of class names"),
    ("label-names-set", build(num_labels=2, label_names={"a", "b"}), "label_names must be a list of class names"),
    ("label-names-not-strings", build(num_labels=2, label_names=[0, 1]), "label_names must be non-empty strings"),
    ("label-names-empty-name", build(num_labels=2, label_names=["a", " "]), "label_names must be non-empty strings"),
    ("label-names-regression", build(num_labels=1, label_names=["score"]), "num_labels=1 is regression"),
    # -- build_model: the head, its options, the rest
    ("head-not-a-name", build(head=3), "a head is named by a string"),
    ("head-options-list", build(head="hire", head_options=[("fusion_layers", 1)]), "head_options must be a mapping"),
    ("head-options-string", build(head="hire", head_options="fusion_layers=1"), "head_options must be a mapping"),
    ("head-option-string-value", build(head="hire", head_options={"fusion_layers": "2"}),
     "option fusion_layers: expected an integer, not '2'"),
    ("head-option-float-for-int", build(head="hire", head_options={"fusion_layers": 2.0}),
     "option fusion_layers: expected an integer"),
    ("head-option-bool-for-int", build(head="hire-mean-last", head_options={"k": True}),
     "option k: expected an integer"),
    ("head-option-literal", build(head="hire", head_options={"score_activation": "tanh"}),
     "option score_activation: expected one of relu, none, not 'tanh'"),
    ("extractor-hidden-0", build(head="hire", head_options={"extractor_hidden": 0}),
     "extractor_hidden: must be >= 1, not 0"),
    ("fusion-hidden-0", build(head="hire", head_options={"fusion_hidden": 0}), "fusion_hidden: must be >= 1, not 0"),
    ("lite-extractor-hidden-0", build(head="hire-lite", head_options={"extractor_hidden": 0}), "extractor_hidden"),
    ("head-dropout-1.5", build(head="hire", head_options={"dropout": 1.5}), "dropout: must be in [0, 1), not 1.5"),
    ("head-dropout-negative", build(head="hire-no-fusion", head_options={"dropout": -0.1}),
     "dropout: must be in [0, 1), not -0.1"),
    ("classifier-dropout-1", build(classifier_dropout=1.0), "classifier_dropout must be a probability in [0, 1)"),
    ("classifier-dropout-string", build(classifier_dropout="0.1"), "classifier_dropout must be a probability"),
    ("freeze-encoder-string", build(freeze_encoder="no"), "freeze_encoder must be True or False, not 'no'"),
    ("encoder-none", build(encoder=None), "encoder must be a hub name, a folder or a transformers config"),
    ("encoder-empty", build(encoder=""), "encoder must be a hub name, a folder or a transformers config"),
    # -- a local path that is missing is "no such folder", not the hub's "Repo id must be in the form ..."
    ("encoder-missing-absolute", build(encoder="{tmp}/no/such/dir"), "encoder '{tmp}/no/such/dir': no such folder"),
    ("encoder-missing-dot", build(encoder="./no-such-encoder"), "encoder './no-such-encoder': no such folder"),
    ("encoder-missing-dotdot", build(encoder="../no-such-encoder"), "no such folder"),
    ("encoder-missing-home", build(encoder="~/no-such-hire-encoder"), "no-such-hire-encoder': no such folder"),
    ("encoder-missing-nested", build(encoder="runs/x/best"), "encoder 'runs/x/best': no such folder"),
    ("encoder-missing-pathlib", build(encoder=Path("no-such-encoder")), "encoder 'no-such-encoder': no such folder"),
    ("encoder-a-file", build(encoder="{tmp}/notes.txt"), "notes.txt': a file, not a folder"),
    ("encoder-no-config", build(encoder="{tmp}/folder"), "not a Hugging Face model folder (no config.json)"),
    ("from-pretrained-missing", lambda at: HireModel.from_pretrained("/no/such/dir"), "'/no/such/dir': no such folder"),
    ("from-pretrained-file", lambda at: HireModel.from_pretrained(at("{tmp}/notes.txt")), "a file, not a folder"),
    ("tokenizer-missing", lambda at: load_tokenizer("/no/such/dir"), "tokenizer '/no/such/dir': no such folder"),
    ("tokenizer-missing-relative", lambda at: load_tokenizer("./no/such"), "tokenizer './no/such': no such folder"),
    # -- a folder without tokenizer files: say so, not "install sentencepiece", nor an empty vocabulary
    ("tokenizer-files-missing-encoder", lambda at: load_tokenizer(at("{tmp}/no_tokenizer")),
     "{tmp}/no_tokenizer: no tokenizer files in this folder (looked for tokenizer.json, vocab.txt"),
    ("tokenizer-files-missing-config-only", lambda at: load_tokenizer(at("{tmp}/tokenizer_config_only")),
     "{tmp}/tokenizer_config_only: no tokenizer files"),
    ("tokenizer-files-missing-saved-model", lambda at: load_tokenizer(at("{tmp}/saved_no_tokenizer")),
     "{tmp}/saved_no_tokenizer: no tokenizer files"),
    # -- forward: every tensor of the batch's shape, the mask 0/1 and right-padded, labels one per example
    ("mask-shorter", forward(attention_mask=MASK[:, :5]),
     f"attention_mask must be a tensor of the shape of input_ids {(B, N)}"),
    ("mask-longer", forward(attention_mask=LONG_MASK), "attention_mask must be a tensor of the shape of input_ids"),
    ("mask-1d", forward(attention_mask=MASK[0]), "attention_mask must be a tensor of the shape of input_ids"),
    ("mask-a-list", forward(attention_mask=MASK.tolist()), "attention_mask must be a tensor"),
    ("mask-values", forward(attention_mask=MASK * 2), "attention_mask must hold only 0 (padding) and 1"),
    ("mask-example-without-tokens", forward(attention_mask=NO_TOKEN_MASK),
     "attention_mask: example(s) [1] of the batch have no real token"),
    ("ids-float", forward(input_ids=IDS.float()), "input_ids must be an int64 (or int32) tensor of token ids"),
    ("ids-1d", forward(input_ids=IDS[0], attention_mask=None), "input_ids must be an int64 (or int32) tensor"),
    ("ids-outside-vocabulary", forward(input_ids=IDS + 1000), "outside the encoder's vocabulary (0 to 98)"),
    ("token-types-shape", forward(token_type_ids=torch.zeros(B, 4, dtype=torch.long)),
     "token_type_ids must be an integer tensor of the shape of input_ids"),
    ("labels-float-for-classes", forward(labels=torch.tensor([0.0, 1.0, 2.0])),
     "labels must be an integer tensor of class indices of shape (3,)"),
    ("labels-too-many", forward(labels=torch.tensor([0, 1, 2, 0])), "labels must be an integer tensor of class"),
    ("labels-2d", forward(labels=torch.tensor([[0], [1], [2]])), "one per example, not a tensor of dtype int64 and "
                                                                  "shape (3, 1)"),
    ("labels-out-of-range", forward(labels=torch.tensor([0, 3, 1])), "labels must be class indices 0 to 2"),
    ("labels-negative", forward(labels=torch.tensor([0, -1, 1])), "labels must be class indices 0 to 2"),
    ("regression-labels-2d", forward(num_labels=1, labels=torch.zeros(B, 1)),
     "labels must be a real-valued tensor of shape (3,)"),
    ("regression-labels-broadcast", forward(num_labels=1, labels=torch.zeros(1)), "labels must be a real-valued"),
    ("regression-labels-nan", forward(num_labels=1, labels=torch.tensor([0.5, math.nan, 1.0])),
     "labels must be finite numbers"),
    # -- an empty batch: a clear error, not a reshape error from deep inside a head
    ("empty-batch", forward(head="hire", input_ids=IDS[:0], attention_mask=MASK[:0]),
     "input_ids of shape (0, 11): an empty batch"),
    ("no-tokens", forward(head="hire", input_ids=IDS[:, :0], attention_mask=MASK[:, :0]),
     "input_ids of shape (3, 0): an empty batch"),
    ("collate-nothing", lambda at: Collator(0)([]), "an empty batch: no examples to pad"),
    ("collate-no-tokens", lambda at: Collator(0)([{"index": 4, "input_ids": []}]), "example(s) [4] have no tokens"),
    ("encode-nothing", lambda at: encode([], load_tokenizer(at("{enc}")), 16, None), "no examples to encode"),
    ("batches-of-0", lambda at: LengthGroupedBatches([3, 4], 0, shuffle=False), "batch_size must be an integer >= 1"),
    ("encode-max-length-only-specials", lambda at: encode(PAIR, load_tokenizer(at("{enc}")), 3, None),
     "max_length must be an integer >= 5 (the special tokens and one token of each text), not 3"),
    ("encode-max-length-0", lambda at: encode([Example("0", "a fine film")], load_tokenizer(at("{enc}")), 0, None),
     "max_length must be an integer >= 3 (the special tokens and one token of the text), not 0"),
    ("read-table-same-column-twice", lambda at: read_table(at("{tmp}/pairs.csv"), ["first", "first"], "label"),
     "text_columns names the same column twice (['first', 'first'])"),
    # -- the heads, the model's other methods
    ("build-head-options-list", lambda at: build_head("hire", 32, 4, [("dropout", 0.1)]), "head_options must be a"),
    ("build-head-option-type", lambda at: build_head("pool-mean", 32, 4, {"layer": 1.0}),
     "option layer: expected an integer"),
    ("pool-unknown-mode", lambda at: pool(torch.zeros(B, N, 32), MASK, "avg"), "pooling mode must be 'cls', 'sep'"),
    ("freeze-encoder-method-string", lambda at: make_model("last-layer").freeze_encoder("no"),
     "freeze_encoder must be True or False, not 'no'"),
    ("save-tokenizer-not-a-tokenizer", lambda at: make_model("last-layer").save_pretrained(at("{tmp}/out"), "bert"),
     "tokenizer must be a transformers tokenizer (load_tokenizer), not 'bert'"),
]


def folders_without_tokenizer(root: Path, shared: dict[str, Path]) -> None:
    """An encoder folder without its tokenizer files, one with tokenizer_config.json alone, and a saved model
    without a tokenizer."""
    for name, source, files in (
            ("no_tokenizer", shared["enc"], ["config.json", "model.safetensors"]),
            ("tokenizer_config_only", shared["enc"], ["config.json", "model.safetensors", "tokenizer_config.json"]),
            ("saved_no_tokenizer", shared["single"], ["config.json", "model.safetensors"])):
        (root / name).mkdir()
        for file in files:
            shutil.copy(source / file, root / name / file)


@pytest.mark.parametrize(("call", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_api_refuses_bad_input_with_a_clear_value_error(call: Call, message: str, shared: dict[str, Path],
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "pairs.csv").write_text("first,second,label\na fine film,a dull film,pos\n")
    folders_without_tokenizer(tmp_path, shared)
    monkeypatch.chdir(tmp_path)  # the relative paths of the cases are missing there

    def at(text: str) -> str:
        return text.replace("{tmp}", str(tmp_path)).replace("{enc}", str(shared["enc"]))

    with pytest.raises(ValueError) as err:
        call(at)
    assert at(message) in str(err.value)
    assert "Repo id must be in the form" not in str(err.value) and "sentencepiece" not in str(err.value)


def test_masks_and_labels_of_any_integer_dtype_give_the_same_results() -> None:
    """A 0/1 mask as integers, booleans or floats is the same mask; class labels may be any integer dtype, and
    -100 labels are ignored, as in transformers."""
    model = make_model("hire", num_labels=3)
    labels = torch.tensor([0, 1, 2])
    with torch.no_grad():
        expected = model(IDS, MASK, labels=labels)
        for mask in (MASK.bool(), MASK.float(), MASK.int()):
            assert torch.equal(model(IDS, mask).logits, expected.logits)
        for dtype in (torch.int32, torch.int16, torch.uint8):
            assert torch.equal(model(IDS.int(), MASK, labels=labels.to(dtype)).loss, expected.loss)
        loss = model(IDS, MASK, labels=torch.tensor([0, -100, 2])).loss
        assert torch.allclose(loss, model(IDS[[0, 2]], MASK[[0, 2]], labels=torch.tensor([0, 2])).loss)


def test_a_path_object_and_a_home_path_load_as_folders(shared: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """``pathlib.Path`` arguments work, and ``~`` means the home folder, as on the command line."""
    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copytree(shared["enc"], tmp_path / "enc")
    model = build_model(Path(shared["enc"]), head="last-layer", num_labels=2)
    assert model.config.encoder == str(shared["enc"])
    assert build_model("~/enc", head="last-layer").encoder.hidden_size == 32
    assert load_tokenizer("~/enc")("a fine film")["input_ids"] == load_tokenizer(shared["enc"])("a fine film")[
        "input_ids"]
    assert HireModel.from_pretrained(Path(shared["single"])).config.label_names == ["neg", "pos"]


def test_transformers_asked_for_another_label_set_drops_the_saved_class_names(shared: dict[str, Path]) -> None:
    """``from_pretrained(folder, num_labels=5)`` (transformers' way to change the label set) gives 5 unnamed
    labels, not 5 outputs under the 2 class names saved, which a prediction would then read."""
    model = AutoModelForSequenceClassification.from_pretrained(shared["single"], num_labels=5,
                                                               ignore_mismatched_sizes=True)
    assert model.config.num_labels == 5 and model.config.label_names is None
    assert model.config.id2label == {i: f"LABEL_{i}" for i in range(5)}


# The real command: the encoder folder without tokenizer files is refused in one line, before anything is written.
CLI_CASES: list[tuple[str, list[str], str]] = [
    ("train-encoder-without-tokenizer",
     ["train", "--output_dir", "{tmp}/run", "--data.task", "custom", "--data.train_file", "{tmp}/train.csv",
      "--data.dev_file", "{tmp}/dev.csv", "--model.encoder", "{tmp}/no_tokenizer", "--model.head", "last-layer",
      "--train.mixed_precision", "no", "--train.max_steps", "1"],
     "--model.encoder {tmp}/no_tokenizer: no tokenizer files in this folder"),
    ("predict-model-without-tokenizer",
     ["predict", "--model", "{tmp}/saved_no_tokenizer", "--input", "{tmp}/input.csv", "--text_columns", "sentence"],
     "{tmp}/saved_no_tokenizer: no tokenizer files in this folder"),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_names_the_folder_without_tokenizer(args: list[str], message: str, shared: dict[str, Path],
                                                tmp_path: Path, via: str) -> None:
    folders_without_tokenizer(tmp_path, shared)
    check_fails_cleanly(args, message, shared, tmp_path, via)
