"""The core library never imports the lab: the import-linter contract in ``pyproject.toml`` holds, every module of
the package is on one side of it, and the contract does break when a core module imports the lab."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import REPO

try:
    import tomllib
except ImportError:  # Python 3.10: import-linter's own TOML reader
    import tomli as tomllib

ROOT = REPO
LINT = str(Path(sys.executable).with_name("lint-imports"))


def contract() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]


def lint(cwd: Path, src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def test_the_core_never_imports_the_lab() -> None:
    result = lint(ROOT, ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout  # the core never imports the lab; hire.model imports neither


def test_every_module_is_core_or_lab() -> None:
    """A new module must be put on one side of the contract (else nothing would check it)."""
    sides = {*contract()["source_modules"], *contract()["forbidden_modules"]}
    modules = {f"hire.{p.stem if p.is_file() else p.name}" for p in (ROOT / "src" / "hire").iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert modules == sides


def test_a_core_module_that_imports_the_lab_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src" / "hire", tmp_path / "src" / "hire",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    config = tmp_path / "src" / "hire" / "config.py"
    lab_import = "\n\ndef _tables() -> None:\n    from hire.experiments import tables  # noqa\n"
    config.write_text(config.read_text() + lab_import)
    result = lint(tmp_path, tmp_path / "src")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "hire.config -> hire.experiments.tables" in result.stdout
