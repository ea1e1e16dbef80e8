"""The seams of the core (issue 74): a kind of task is one package (``hire.tasks``), which the generic modules
reach only through the registry; the modelling code that a saved folder carries is one package, ``hire.model``,
that imports nothing else of hire; and model folders saved before the restructuring still load and predict the
same."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import FIXTURES

import hire
from hire.tasktype import task_kinds

SRC = Path(hire.__file__).parent
REPO = SRC.parent.parent
SAVED = FIXTURES / "saved-4b9b33a"  # written by scripts/interface_snapshot.py at 4b9b33a


def _kind_words() -> set[str]:
    """The names that identify a kind of task: the kinds' names and their models' task_type."""
    return {w for kind in task_kinds().values() for w in (kind.name, kind.model_type)}


def _owned(path: Path) -> bool:
    """Files that may name a kind: the kinds' own packages, and the exported model code (its classes register the
    task types they serve)."""
    return path.relative_to(SRC).parts[0] in ("model", "tasks")


def test_no_kind_of_task_is_named_outside_its_package():
    words = _kind_words()
    assert {"sequence", "token", "ranking"} <= words
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if _owned(path):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}")
    assert not found, "a generic module names a kind of task; ask the registry instead:\n" + "\n".join(found)


def test_the_check_sees_a_named_kind(tmp_path):
    """The check above can fail: a module that branches on a kind's name is found."""
    module = tmp_path / "generic.py"
    module.write_text('def f(config):\n    return config.get("task_type") == "ranking"\n')
    names = [n.value for n in ast.walk(ast.parse(module.read_text())) if isinstance(n, ast.Constant)]
    assert "ranking" in names and "ranking" in _kind_words()


def _import_contract() -> dict:
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["source_modules"] == ["hire.model"])


def test_the_model_package_contract_forbids_every_other_module_of_hire():
    """The contract lists modules by name: each top-level module and package of hire but hire.model is in it."""
    top = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    forbidden = {m.removeprefix("hire.") for m in _import_contract()["forbidden_modules"]}
    assert top - {"model"} == forbidden, "pyproject.toml's contract for hire.model must name every other module"


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter is not installed")
def test_the_model_package_contract_fails_when_the_model_code_imports_the_library(tmp_path):
    """A copy of hire in which hire.model imports hire.config breaks the contract (lint-imports exits 1)."""
    copy = tmp_path / "src" / "hire"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    lint = shutil.which("lint-imports")
    kept = subprocess.run([lint], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert kept.returncode == 0, kept.stdout[-2000:]
    batch = copy / "model" / "batch.py"
    batch.write_text(batch.read_text().replace("import torch\n", "import torch\n\nimport hire.config  # noqa\n", 1))
    broken = subprocess.run([lint], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert broken.returncode == 1 and "hire.model.batch -> hire.config" in broken.stdout, broken.stdout[-2000:]


def test_every_module_of_the_model_package_is_exported():
    from hire.model.sharing import CODE_FILES

    files = {str(p.relative_to(SRC)) for p in (SRC / "model").rglob("*.py")}
    assert files == set(CODE_FILES.values())


@pytest.mark.parametrize("run", ["sequence", "token", "ranking", "bi-encoder"])
def test_a_model_saved_before_the_restructuring_predicts_the_same(run, tmp_path):
    """A tiny model of each kind saved by hire at 4b9b33a (best/ folders and their predictions on a file of the
    kind's input, written by ``scripts/interface_snapshot.py``) loads and predicts to the last digit."""
    from hire.cli import main

    folder = tmp_path / run
    shutil.copytree(SAVED / run, folder)
    source = next(folder.glob("input.*"))
    words = ["predict", "--model", str(folder / "best"), "--input", str(source), "--output",
             str(tmp_path / "again.jsonl"), "--mixed_precision", "no", "--max_length", "32"]  # the runs' length
    if source.suffix == ".conll":
        words += ["--format", "conll"]
    if source.suffix == ".tsv":
        words += ["--format", "ranking", "--ranking_columns",
                  "qid=QuestionID,question=Question,pid=SentenceID,passage=Sentence,label=Label"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(words) == 0
    expected = [json.loads(line) for line in (folder / "expected.jsonl").read_text().splitlines()]
    again = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    # Every label, tag, rank and text the same; scores and probabilities to float32's last bits, which the number of
    # threads (and the CPU) may move: run with the same threads, this hire and that of 4b9b33a agree to the bit.
    assert _same(again, expected), f"{again[:3]} != {expected[:3]}"


def _same(a: object, b: object) -> bool:
    """Equal, floats to a relative 1e-5 (float32 keeps 7 digits)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_a_saved_folder_is_dispatched_to_its_own_class():
    """One function (hire.model.load_model) goes from a folder to its class; HireModel.from_pretrained of a
    tagger's or a ranker's folder gives the class its task type registered, as AutoModelFor... would."""
    from hire.model import BiEncoder, HireForRanking, HireForTokenClassification, HireModel, load_model

    kinds = {"sequence": HireModel, "token": HireForTokenClassification, "ranking": HireForRanking,
             "bi-encoder": BiEncoder}
    for run, cls in kinds.items():
        assert type(load_model(SAVED / run / "best")) is cls
    assert type(HireModel.from_pretrained(SAVED / "token" / "best")) is HireForTokenClassification


def test_hire_help_needs_no_torch():
    """The kinds' options compose the configuration without importing torch: ``hire train --help`` answers at
    once."""
    code = ("import sys\nfrom hire.cli import main\ntry:\n    main(['train', '--help'])\nexcept SystemExit:\n"
            "    pass\nassert 'torch' not in sys.modules, 'torch was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
