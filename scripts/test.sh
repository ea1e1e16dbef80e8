#!/usr/bin/env bash
# Set up (scripts/setup.sh), then lint and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
ruff check src tests benchmarks
python -m pytest tests "$@"
