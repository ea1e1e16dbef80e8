"""Where the tests find the repository, their helpers, the committed fixtures and the shared data: written once,
so that a test file can move between folders without counting ``parents``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parent  # this folder: conftest.py and the helper modules and scripts
REPO = TESTS.parent
SRC = REPO / "src" / "hire"
BENCHMARKS = REPO / "benchmarks"
SCRIPTS = REPO / "scripts"
FIXTURES = TESTS / "fixtures"
SHARED_DATA = REPO.parent / "shared" / "data"  # the shared data beside a clone, as CI lays it out


def load_script(path: Path) -> ModuleType:
    """A benchmark or script loaded as a module, as when it runs: its folder first on ``sys.path``, so that it
    finds the modules beside it (``bench_common``, ``speed_report``)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
