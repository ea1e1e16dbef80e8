"""What a saved model folder carries for others: a model card, and on request the modelling code.

``README.md`` (:func:`write_model_card`) says what the model is (task, encoder, head and options, labels) and,
when training passes a :class:`ModelCard`, its dev metrics, mean layer weights and training recipe.

:func:`export_code` copies the code a model runs on (the package :mod:`hire.model`, this module among it) into the
folder as flat modules with relative imports, and points ``config.json``'s ``auto_map`` at them: ``transformers``
then loads the folder with ``trust_remote_code=True`` where hire is not installed, as it does any model with custom
code. Every head's code is exported: any saved model can be re-saved, and the folder reads as one library.

This module is part of that code: it imports nothing from hire, and nothing outside the standard library.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Each exported module: its flat name in a saved folder, and its path in the hire package (every module of the
# hire.model package: a test checks that none is missing).
CODE_FILES = {
    "modeling_hire": "model/__init__.py",
    "hire_auto": "model/auto.py",
    "hire_batch": "model/batch.py",
    "hire_biencoder": "model/biencoder.py",
    "hire_choice": "model/choice.py",
    "hire_config": "model/config.py",
    "hire_losses": "model/losses.py",
    "hire_ranking": "model/ranking.py",
    "hire_registry": "model/registry.py",
    "hire_sequence": "model/sequence.py",
    "hire_spans": "model/spans.py",
    "hire_tokenizer": "model/tokenizer.py",
    "hire_tokens": "model/tokens.py",
    "encoder": "model/encoder.py",
    "recurrent": "model/recurrent.py",
    "heads": "model/heads/__init__.py",
    "heads_base": "model/heads/base.py",
    "heads_hire": "model/heads/hire.py",
    "heads_baselines": "model/heads/baselines.py",
    "sharing": "model/sharing.py",
    "optiontypes": "model/optiontypes.py",
}
_FLAT_NAMES = {("hire/" + path).removesuffix(".py").removesuffix("/__init__").replace("/", "."): flat
               for flat, path in CODE_FILES.items()}
BI_ENCODER_FILE = "bi_encoder.json"  # beside a bi-encoder's encoder: what makes the folder a hire bi-encoder
AUTO_MAP = {"AutoConfig": "modeling_hire.HireConfig",
            "AutoModelForSequenceClassification": "modeling_hire.HireModel",
            "AutoModelForTokenClassification": "modeling_hire.HireForTokenClassification",
            "AutoModelForQuestionAnswering": "modeling_hire.HireForQuestionAnswering",
            "AutoModelForMultipleChoice": "modeling_hire.HireForMultipleChoice"}


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "l") -> list[str]:
    """The lines of a Markdown table of text cells. ``align`` has a letter a column, ``l`` (left) or ``r`` (right,
    for numbers); its last letter stands for the columns after it: ``"lr"`` is text, then numbers.

    hire's one table writer. It lives here because the modelling code exported with a model (this module among
    it) may import nothing else; :mod:`hire.reporting` and the lab take it from here."""
    rule = "".join("---:|" if align[min(i, len(align) - 1)] == "r" else "---|" for i in range(len(header)))
    return ["| " + " | ".join(header) + " |", "|" + rule, *("| " + " | ".join(row) + " |" for row in rows)]


@dataclass
class ModelCard:
    """What training knows of a model beyond its configuration; every field is optional."""

    task: str | None = None  # e.g. "RTE", or the custom task's name
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # dev split -> metric -> value
    layer_weights: Sequence[float] | None = None  # mean weight of H_0 .. H_l over the dev examples
    recipe: dict[str, Any] | None = None  # the run's resolved configuration (config.yaml)


# Span and multiple-choice models: (pipeline tag, Auto class, what they output, how to use them).
_OTHER_USES = {
    "span": ("question-answering", "AutoModelForQuestionAnswering",
             "the start and the end score of an answer span at every token of the passage (no answer: the first "
             "token)",
             'answer = pipeline("question-answering", model="path/to/model")\n'
             'answer(question="a question", context="the passage that holds its answer")'),
    "choice": ("multiple-choice", "AutoModelForMultipleChoice",
               "one score per (context, choice) pair, a softmax across a question's choices",
               "import torch\nfrom transformers import AutoModelForMultipleChoice, AutoTokenizer\n"
               'model = AutoModelForMultipleChoice.from_pretrained("path/to/model")\n'
               'tokenizer = AutoTokenizer.from_pretrained("path/to/model")\n'
               'choices = ["ending one", "ending two"]\n'
               'batch = tokenizer(["the context"] * len(choices), choices, padding=True, return_tensors="pt")\n'
               "best = model(**{k: v.unsqueeze(0) for k, v in batch.items()}).logits.argmax(-1)"),
}


def write_model_card(directory: str | Path, config: Any, card: ModelCard, with_code: bool = False) -> Path:
    """Write ``README.md``: front matter for the Hugging Face Hub, the model, what ``card`` holds, how to load it."""
    path = Path(directory) / "README.md"
    task = card.task or ((card.recipe or {}).get("data") or {}).get("task")
    encoder_type = config.encoder_config.get("model_type", "?")
    layers, width = config.encoder_config.get("num_hidden_layers", "?"), config.encoder_config.get("hidden_size", "?")
    options = ", ".join(f"{k}={json.dumps(v)}" for k, v in config.head_options.items()) or "defaults"
    ranker = getattr(config, "task_type", "sequence") == "ranking"
    labels = "one real value (regression)" if config.regression else ", ".join(
        str(config.id2label[i]) for i in range(config.num_labels))
    if ranker:
        labels = (f"one relevance score per (question, passage) pair, read together (a cross-encoder); loss "
                  f"{config.task_options.get('rank_loss', 'pointwise')}")
    kind = getattr(config, "task_type", "sequence")
    if kind in _OTHER_USES:
        labels = _OTHER_USES[kind][2]
    tags = ", ".join(dict.fromkeys(["hire", config.head]))
    tagger = kind == "token"
    pipeline_tag = "token-classification" if tagger else _OTHER_USES.get(kind, ("text-classification",))[0]
    lines = ["---", "library_name: transformers", f"pipeline_tag: {pipeline_tag}", f"tags: [{tags}]", "---", "",
             f"# {config.head} on {config.encoder or encoder_type}" + (f", fine-tuned on {task}" if task else ""), "",
             f"A Transformer encoder fine-tuned with the head `{config.head}`, which reads all of its hidden layers "
             "(hire: HIRE, Zhao & Yang, *Deepening Hidden Representations from Pre-trained Language Models*, with "
             "its ablations and baselines).", "",
             *markdown_table(["", ""], [
                 ["encoder", f"`{config.encoder}` ({encoder_type}, {layers} layers, hidden size {width})"],
                 ["head", f"`{config.head}` ({options})"],
                 ["tags" if tagger else "scores" if ranker or kind in _OTHER_USES else "labels", labels],
                 *([["text columns", ", ".join(config.text_columns)]] if config.text_columns else [])])]
    if card.metrics:
        lines += ["", "## Dev metrics", "", *markdown_table(["split", "metric", "value"], [
            [split, name, f"{value:.4f}"] for split, values in card.metrics.items() for name, value in values.items()])]
    if card.layer_weights is not None:
        lines += ["", "## Mean layer weights over the dev examples", "", *markdown_table(
            [f"H_{i}" for i in range(len(card.layer_weights))], [[f"{w:.3f}" for w in card.layer_weights]])]
    if card.recipe:
        lines += ["", "## Training recipe", "", "```json", json.dumps(card.recipe, indent=2), "```"]
    use = ('tag = pipeline("token-classification", model="path/to/model", aggregation_strategy="simple")' if tagger
           else 'classify = pipeline("text-classification", model="path/to/model")')
    if ranker:  # the raw score ranks; a higher score is more relevant
        use = ('score = pipeline("text-classification", model="path/to/model", function_to_apply="none")\n'
               'score({"text": "a question", "text_pair": "a candidate passage"})')
    auto = "AutoModelForTokenClassification" if tagger else "AutoModelForSequenceClassification"
    if kind in _OTHER_USES:
        _, auto, _, use = _OTHER_USES[kind]
    lines += ["", "## Use", "", "```python", "import hire  # registers the model type 'hire' with transformers",
              "from transformers import pipeline", "", use, "```"]
    if with_code:
        lines += ["", "Without hire installed, the modelling code saved beside the weights runs instead:", "",
                  "```python", f"from transformers import {auto}",
                  f'model = {auto}.from_pretrained("path/to/model", trust_remote_code=True)', "```"]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_bi_encoder_card(directory: str | Path, config: dict[str, Any], encoder_config: dict[str, Any],
                          card: ModelCard) -> Path:
    """Write a bi-encoder's ``README.md``: the model (``config``: its ``bi_encoder.json``), how to get its vectors
    and scores with ``transformers`` alone (``AutoModel``, mean pooling, cosine times the scale), what ``card``
    holds."""
    path = Path(directory) / "README.md"
    task = card.task or ((card.recipe or {}).get("data") or {}).get("task")
    encoder_type = encoder_config.get("model_type", "?")
    layers, width = encoder_config.get("num_hidden_layers", "?"), encoder_config.get("hidden_size", "?")
    scale = config.get("scale", 20.0)
    lines = ["---", "library_name: transformers", "pipeline_tag: sentence-similarity", "tags: [hire, bi-encoder]",
             "---", "", f"# Bi-encoder on {config.get('encoder') or encoder_type}"
             + (f", fine-tuned on {task}" if task else ""), "",
             "A bi-encoder ranker (hire): one encoder reads a question and each passage apart; a text's vector is "
             "the mean of the encoder's last hidden state over its real tokens, and a (question, passage) pair "
             f"scores {scale:g} x their cosine similarity. The folder is the encoder as transformers saves it: "
             "`AutoModel` loads it, no hire needed.", "",
             *markdown_table(["", ""], [
                 ["encoder", f"`{config.get('encoder')}` ({encoder_type}, {layers} layers, hidden size {width})"],
                 ["vector", "mean of the last hidden state over real tokens (attention mask 1)"],
                 ["score", f"cosine similarity x {scale:g}"],
                 ["loss", str(config.get("rank_loss"))]])]
    if card.metrics:
        lines += ["", "## Dev metrics", "", *markdown_table(["split", "metric", "value"], [
            [split, name, f"{value:.4f}"] for split, values in card.metrics.items() for name, value in values.items()])]
    if card.recipe:
        lines += ["", "## Training recipe", "", "```json", json.dumps(card.recipe, indent=2), "```"]
    lines += ["", "## Use", "", "```python", "import torch", "from transformers import AutoModel, AutoTokenizer", "",
              'model = AutoModel.from_pretrained("path/to/model").eval()',
              'tokenizer = AutoTokenizer.from_pretrained("path/to/model")', "",
              "def vectors(texts):",
              '    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")',
              "    with torch.no_grad():",
              "        last = model(**batch).last_hidden_state",
              '    mask = batch["attention_mask"].unsqueeze(-1).float()',
              "    return (last * mask).sum(1) / mask.sum(1)  # mean over real tokens", "",
              'q = torch.nn.functional.normalize(vectors(["a question"]), dim=-1)',
              'p = torch.nn.functional.normalize(vectors(["a passage", "another passage"]), dim=-1)',
              f"scores = {scale:g} * q @ p.T  # higher ranks first", "```"]
    path.write_text("\n".join(lines) + "\n")
    return path


def export_code(directory: str | Path) -> list[Path]:
    """Copy the modelling code into ``directory`` as flat modules, and point ``config.json``'s ``auto_map`` at
    them. Works from the hire package and from a folder's own copy alike."""
    directory, here = Path(directory), Path(__file__).parent
    written = []
    for flat, packaged in CODE_FILES.items():  # from the hire package (this file is hire/model/sharing.py) or a copy
        source = here.parent / packaged if (here.parent / packaged).is_file() else here / f"{flat}.py"
        target = directory / f"{flat}.py"
        if target.exists() and target.resolve() == source.resolve():
            continue
        target.write_text(flat_imports(source.read_text(), source))
        written.append(target)
    config_path = directory / "config.json"
    values = json.loads(config_path.read_text())
    values["auto_map"] = {**values.get("auto_map", {}), **AUTO_MAP}
    config_path.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")
    return written


def flat_imports(code: str, source: Path | str = "<code>") -> str:
    """``from hire.model.heads.base import X`` -> ``from .heads_base import X``, for each exported module; any other
    import of hire is an error (the saved code would not run without it)."""

    def flat(match: re.Match[str]) -> str:
        module = match.group(2)
        if module not in _FLAT_NAMES:
            raise ValueError(f"{source}: imports {module}, which is not part of the exported code")
        return f"{match.group(1)}from .{_FLAT_NAMES[module]} import"

    code = re.sub(r"^(\s*)from (hire(?:\.\w+)*) import", flat, code, flags=re.MULTILINE)
    for node in ast.walk(ast.parse(code)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        if any(name == "hire" or name.startswith("hire.") for name in names):
            raise ValueError(f"{source}: imports hire in a way the export cannot rewrite ({', '.join(names)})")
    return code
