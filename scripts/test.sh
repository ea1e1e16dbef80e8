#!/usr/bin/env bash
# Set up (scripts/setup.sh), then lint, build the documentation strictly (a broken link, a page missing from the
# nav or a docstring reference to nothing fails it; a few seconds) and run the test suite. The long end-to-end
# tests marked slow run with `HIRE_SLOW_TESTS=1 python -m pytest tests -m slow` (CI runs both: .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
ruff check src tests benchmarks scripts docs/hooks.py
lint-imports  # the core never imports the lab (pyproject.toml's import-linter contract)
NO_MKDOCS_2_WARNING=1 mkdocs build --strict
python -m pytest tests "$@"
