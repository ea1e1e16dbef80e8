"""In CI (``HIRE_REQUIRE_DATA=1``, set by ``.ci/run``), an end-to-end test skipped because the shared data is missing
fails instead of passing green; elsewhere it still skips, saying what is missing (issue 74, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import TESTS


@pytest.mark.parametrize(("required", "outcome"), [("1", "2 error"), ("", "3 skipped")])
def test_a_test_skipped_for_missing_data_fails_where_the_data_is_required(required: str, outcome: str,
                                                                          tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        f"spec = importlib.util.spec_from_file_location('hire_tests_conftest', {str(TESTS / 'conftest.py')!r})\n"
        "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
        "pytest_runtest_makereport = module.pytest_runtest_makereport\n")
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n@pytest.mark.skipif(True, reason='no GLUE data at /nowhere')\ndef test_e2e():\n    pass\n\n"
        "@pytest.mark.skip(reason='root may write anywhere')\ndef test_other():\n    pass\n\n"
        "@pytest.fixture\ndef data():\n    pytest.skip('shared WikiQA data not found at /nowhere')\n\n"
        "def test_fixture(data):\n    pass\n")
    env = {**os.environ, "HIRE_REQUIRE_DATA": required}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert outcome in done.stdout, done.stdout
    assert "1 skipped" in done.stdout or not required  # a skip for another reason stays a skip
    if required:  # a skip at set-up (skipif, a fixture) is reported as an error of the test
        assert "HIRE_REQUIRE_DATA=1, but the test was skipped: Skipped: no GLUE data at /nowhere" in done.stdout
