"""A saved hire model is a transformers model: Auto classes, pipeline, the first config format, the model card,
and a folder saved with its code that loads in a fresh Python that cannot import hire."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from paths import SRC
from tiny import HIDE_HIRE, save_tiny_encoder
from transformers import AutoConfig, AutoModelForSequenceClassification, pipeline

from hire import HireConfig, HireModel, build_model, load_tokenizer
from hire.model.sharing import CODE_FILES, ModelCard, flat_imports, markdown_table

pytestmark = pytest.mark.usefixtures("single_thread")

TEXTS = ["a fine film", "a dull film with bad acting", "good fun", "not bad at all, not good either"]
LABELS = ["neg", "pos"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder", TEXTS)


def saved(folder: Path, encoder: Path, head: str = "hire", labels: list[str] | None = LABELS, **save: object
          ) -> HireModel:
    torch.manual_seed(0)
    model = build_model(str(encoder), head=head, num_labels=len(labels) if labels else 1, label_names=labels)
    model.config.text_columns = ["sentence"]
    model.save_pretrained(folder, load_tokenizer(encoder), **save)
    return model.eval()


def logits(model: torch.nn.Module, folder: Path) -> torch.Tensor:
    batch = load_tokenizer(folder)(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits


def run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)


def test_config_is_a_transformers_config(tmp_path: Path, encoder: Path) -> None:
    saved(tmp_path / "cls", encoder)
    values = json.loads((tmp_path / "cls" / "config.json").read_text())
    assert values["model_type"] == "hire" and values["architectures"] == ["HireModel"]
    assert values["id2label"] == {"0": "neg", "1": "pos"} and values["label2id"] == {"neg": 0, "pos": 1}
    assert values["label_names"] == LABELS and values["problem_type"] == "single_label_classification"
    assert values["head"] == "hire" and values["text_columns"] == ["sentence"]
    assert values["encoder_config"]["model_type"] == "bert"
    config = AutoConfig.from_pretrained(tmp_path / "cls")
    assert isinstance(config, HireConfig) and config.num_labels == 2 and not config.regression
    saved(tmp_path / "reg", encoder, labels=None)
    reg = HireConfig.from_pretrained(tmp_path / "reg")
    assert reg.num_labels == 1 and reg.regression and reg.problem_type == "regression" and reg.label_names is None


@pytest.mark.parametrize("labels", [LABELS, None], ids=["classification", "regression"])
def test_auto_model_and_pipeline_give_the_same_outputs(labels: list[str] | None, tmp_path: Path,
                                                       encoder: Path) -> None:
    model = saved(tmp_path, encoder, labels=labels)
    auto = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(auto) is HireModel and not auto.training
    expected = logits(model, tmp_path)
    assert torch.equal(logits(auto, tmp_path), expected)
    assert torch.equal(logits(HireModel.from_pretrained(tmp_path), tmp_path), expected)
    classify = pipeline("text-classification", model=str(tmp_path))
    if labels is None:  # the score is the prediction itself (logits are (B,), so ask for the top label only)
        scores = [classify(text)[0]["score"] for text in TEXTS]
        torch.testing.assert_close(torch.tensor(scores), expected, atol=1e-6, rtol=0)
    else:
        rows = classify(TEXTS, top_k=None)
        scores = torch.tensor([[next(r["score"] for r in row if r["label"] == name) for name in LABELS]
                               for row in rows])
        torch.testing.assert_close(scores, torch.softmax(expected, -1), atol=1e-6, rtol=0)


def test_import_hire_registers_the_model_type_without_torch(tmp_path: Path, encoder: Path) -> None:
    """``import hire`` alone loads no torch, yet transformers' Auto classes, imported after it, know "hire"."""
    model = saved(tmp_path / "model", encoder)
    torch.save(logits(model, tmp_path / "model"), tmp_path / "expected.pt")
    code = f"""
import sys
import hire
assert "torch" not in sys.modules
import torch
from transformers import AutoModelForSequenceClassification, pipeline
torch.set_num_threads(1)
folder = {str(tmp_path / "model")!r}
model = AutoModelForSequenceClassification.from_pretrained(folder)
assert type(model).__module__.startswith("hire.model."), type(model)  # hire's own class, not a folder's copy
batch = hire.load_tokenizer(folder)({TEXTS!r}, padding=True, return_tensors="pt")
with torch.no_grad():
    assert torch.equal(model(**batch).logits, torch.load({str(tmp_path / "expected.pt")!r}))
print(pipeline("text-classification", model=folder)("a fine film")[0]["label"])
"""
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] in LABELS


def test_importing_the_auto_tokenizer_first_still_registers_the_model_type(tmp_path: Path, encoder: Path) -> None:
    """transformers loads its Auto model classes while it imports ``AutoTokenizer`` (``hire deepen`` does this
    first); registering "hire" at that moment must neither warn nor fail."""
    saved(tmp_path / "model", encoder)
    code = f"""
import warnings
warnings.simplefilter("error")
import hire
from transformers import PreTrainedModel
from transformers import AutoTokenizer
from transformers import AutoModelForSequenceClassification
assert "hire.model" in __import__("sys").modules
model = AutoModelForSequenceClassification.from_pretrained({str(tmp_path / "model")!r})
print(type(model).__module__)
"""
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1].startswith("hire.model.")  # the installed package's class


REMOTE_HEADS = ("hire", "hire-random-last", "scalar-mix")


@pytest.fixture(scope="module")
def remote(encoder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """Each head of ``REMOTE_HEADS`` saved with its code in a folder of its own, then loaded from there by one Python
    in which hire cannot be imported (one interpreter and its imports for the three, not one each)."""
    root = tmp_path_factory.mktemp("remote")
    for head in REMOTE_HEADS:
        model = saved(root / head, encoder, head=head, with_code=True)
        torch.save(logits(model, root / head), root / f"{head}.pt")
    code = HIDE_HIRE + f"""
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline
torch.set_num_threads(1)
try:
    import hire
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("hire is importable")
for head in {REMOTE_HEADS!r}:
    folder = {str(root)!r} + "/" + head
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)
    assert type(model).__name__ == "HireModel" and type(model).__module__.startswith("transformers_modules."), head
    assert not any(name == "hire" or name.startswith("hire.") for name in sys.modules)
    batch = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)({TEXTS!r}, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    assert torch.equal(out.logits, torch.load({str(root)!r} + f"/{{head}}.pt")), (head, out.logits)
    model.save_pretrained(folder + "-again")  # a copy saves its code too
    label = pipeline("text-classification", model=folder, trust_remote_code=True)("a fine film")[0]["label"]
    print(head, "->", label)
"""
    return root, run_python(code, root)


@pytest.mark.parametrize("head", REMOTE_HEADS)
def test_folder_with_code_loads_where_hire_cannot_be_imported(
        head: str, remote: tuple[Path, subprocess.CompletedProcess]) -> None:
    root, result = remote
    folder = root / head
    assert {f"{name}.py" for name in CODE_FILES} <= {p.name for p in folder.iterdir()}
    assert json.loads((folder / "config.json").read_text())["auto_map"] == {
        "AutoConfig": "modeling_hire.HireConfig", "AutoModelForSequenceClassification": "modeling_hire.HireModel",
        "AutoModelForTokenClassification": "modeling_hire.HireForTokenClassification",
        "AutoModelForQuestionAnswering": "modeling_hire.HireForQuestionAnswering",
        "AutoModelForMultipleChoice": "modeling_hire.HireForMultipleChoice"}
    assert "trust_remote_code=True" in (folder / "README.md").read_text()
    assert result.returncode == 0, result.stderr[-3000:]
    labels = dict(line.split(" -> ") for line in result.stdout.splitlines() if " -> " in line)
    assert labels[head] in LABELS  # loaded, gave the logits hire gives, and its pipeline labelled a sentence
    again = root / f"{head}-again"
    assert (again / "modeling_hire.py").is_file() and (again / "heads_hire.py").is_file()


def test_exported_code_imports_nothing_of_hire() -> None:
    """Every exported module rewrites to relative imports; an import of a module left out is refused."""
    package = SRC
    for flat, path in CODE_FILES.items():
        code = flat_imports((package / path).read_text(), path)
        assert not re.search(r"^\s*(from|import) hire\b", code, flags=re.MULTILINE), flat
    assert "from .heads_base import Head" in flat_imports("from hire.model.heads.base import Head\n")
    with pytest.raises(ValueError, match=r"imports hire\.config"):
        flat_imports("from hire.config import ConfigError\n")
    with pytest.raises(ValueError, match="cannot rewrite"):
        flat_imports("import hire.model\n")


def test_the_exported_entry_module_names_every_module_itself(tmp_path: Path) -> None:
    """transformers 4 copies a folder's code into its module cache by the modules that ``modeling_hire.py``
    imports itself, not those its imports import (5 follows them), then loads them all: a module named only
    further down is missing there (FileNotFoundError, seen with 4.57). The exported entry module names every
    other one, by transformers' own reading of relative imports."""
    from transformers.dynamic_module_utils import get_relative_imports

    entry = tmp_path / "modeling_hire.py"
    entry.write_text(flat_imports((SRC / CODE_FILES["modeling_hire"]).read_text()))
    assert set(get_relative_imports(entry)) == set(CODE_FILES) - {"modeling_hire"}


def test_a_folder_of_another_model_is_refused(tmp_path: Path) -> None:
    """A config.json that is not a hire model's (another model type, or none) is a ValueError naming it."""
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="a 'bert' model, not a saved hire model"):
        HireModel.from_pretrained(tmp_path / "bert")
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "config.json").write_text('{"encoder": "bert-base-uncased", "head": "hire"}')
    with pytest.raises(ValueError, match=r"none/config\.json: no model_type, not a saved hire model"):
        HireModel.from_pretrained(tmp_path / "none")


def test_markdown_table() -> None:
    """hire's one table writer: a letter per column, the last standing for the columns after it."""
    assert markdown_table(["a", "b", "c"], [["x", "1", "2"]], align="lr") == [
        "| a | b | c |", "|---|---:|---:|", "| x | 1 | 2 |"]
    assert markdown_table(["a", "b", "c"], [], align="lrl")[1] == "|---|---:|---|"
    assert markdown_table(["a", "b"], [["", "y"]]) == ["| a | b |", "|---|---|", "|  | y |"]


def test_model_card(tmp_path: Path, make_model) -> None:
    model = make_model("hire-lite", head_options={"extractor_stride": 2}, num_labels=2)
    model.save_pretrained(tmp_path / "plain")
    plain = (tmp_path / "plain" / "README.md").read_text()
    assert plain.startswith("---\nlibrary_name: transformers\n") and "`hire-lite` (extractor_stride=2)" in plain
    assert "Dev metrics" not in plain
    card = ModelCard(task="RTE", metrics={"dev": {"accuracy": 0.625, "score": 0.625}},
                     layer_weights=[0.1, 0.2, 0.3, 0.4], recipe={"train": {"lr": 2e-5}})
    model.save_pretrained(tmp_path / "trained", card=card)
    text = (tmp_path / "trained" / "README.md").read_text()
    assert "fine-tuned on RTE" in text and "| dev | accuracy | 0.6250 |" in text
    assert "| 0.100 | 0.200 | 0.300 | 0.400 |" in text and '"lr": 2e-05' in text


def test_fp64_model_keeps_fp64(make_model, make_batch) -> None:
    model = make_model("hire").double()
    with torch.no_grad():
        out = model(*make_batch())
    assert out.logits.dtype == torch.float64 and out.layer_weights.dtype == torch.float64


def test_missing_weights_get_pytorch_initialisation(tmp_path: Path, encoder: Path) -> None:
    """transformers' own way to change the label set: the new W2 is drawn as nn.Linear draws it."""
    saved(tmp_path, encoder)
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=5, ignore_mismatched_sizes=True)
    w = model.output.out.weight
    assert w.shape == (5, 32) and torch.isfinite(w).all() and 0 < w.abs().max() <= 32**-0.5


@pytest.mark.parametrize("task_type, auto", [("span", "AutoModelForQuestionAnswering"),
                                             ("choice", "AutoModelForMultipleChoice")])
def test_span_and_choice_models_load_with_their_code_where_hire_cannot_be_imported(
        tmp_path: Path, encoder: Path, task_type: str, auto: str) -> None:
    """A span model and a multiple-choice model saved with their code load through their Auto class with
    trust_remote_code where hire cannot be imported, and score as hire does."""
    torch.manual_seed(0)
    labels = {"span": (2, ["start", "end"]), "choice": (1, None)}[task_type]
    model = build_model(str(encoder), head="hire", num_labels=labels[0], label_names=labels[1],
                        task_type=task_type).eval()
    tokenizer = load_tokenizer(str(encoder))
    folder = tmp_path / task_type
    model.save_pretrained(folder, tokenizer, with_code=True)
    batch = tokenizer(["a fine film", "a dull film"], ["good fun", "bad acting"], padding=True, return_tensors="pt")
    if task_type == "choice":
        batch = {k: v.unsqueeze(0) for k, v in batch.items()}  # one question, two choices
    with torch.no_grad():
        out = model(**batch)
    expected = out.start_logits if task_type == "span" else out.logits
    torch.save((dict(batch), expected), tmp_path / "expected.pt")
    code = HIDE_HIRE + f"""
import torch
from transformers import {auto}
torch.set_num_threads(1)
model = {auto}.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules."), type(model)
batch, expected = torch.load({str(tmp_path / "expected.pt")!r})
with torch.no_grad():
    out = model(**batch)
got = out.start_logits if {task_type!r} == "span" else out.logits
assert torch.equal(got, expected), (got, expected)
print("same")
"""
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "same"
