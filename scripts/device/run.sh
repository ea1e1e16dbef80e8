#!/usr/bin/env bash
# On the lent GPU machine (the device tool's `run`), in the checkout's root: gather what this call carried
# (scripts/device/hire_device.py receive), then, once everything has come and is installed, run the rest of the
# command line with hire on PATH and the staged data found by its variables. A call that carries only a part
# stops after gathering it.
set -euo pipefail
cd "$(dirname "$0")/../.."
rc=0
python3 scripts/device/hire_device.py receive || rc=$?
[ "$rc" = 3 ] && exit 0   # not every part has come yet
[ "$rc" = 0 ] || exit "$rc"
D=${HIRE_DEVICE_DIR:-/tmp/hire-device}
export PYTHONPATH="$D/site${PYTHONPATH:+:$PYTHONPATH}" PATH="$D/site/bin:$PATH" HF_HUB_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false
for name in glue conll2003 wikiqa; do
  [ -d "$D/data/$name" ] && export "HIRE_$(echo "$name" | tr a-z A-Z)_DIR=$D/data/$name"
done
[ -d "$D/data/ud/en_ewt" ] && export HIRE_UD_DIR="$D/data/ud/en_ewt"
[ -d "$D/data/senteval" ] && export HIRE_SENTEVAL_DIR="$D/data/senteval"
[ "$#" -gt 0 ] && exec "$@"
python3 -c "import torch, transformers, hire; print('hire', hire.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
