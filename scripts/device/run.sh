#!/usr/bin/env bash
# On the lent GPU machine (the device tool's `run`), in the checkout's root: gather what this call carried
# (scripts/device/hire_device.py receive: the wheels and this checkout are installed, and hire imported, in the
# first call; the encoder once its last part has come), then run the rest of the command line with hire on PATH and
# the staged data found by its variables. A call with no command that carries only a part stops after gathering
# it (exit 0); a call with a command before everything has come runs nothing and exits 3.
#
# HIRE_DEVICE_LIMIT_S (the call's timeout_s, or less where less device time is left) sets HIRE_DEVICE_DEADLINE,
# the time (seconds since the epoch) by which the call must have returned: experiment.sh stops its cells in time
# to pack before it.
set -euo pipefail
started=$(date +%s)
cd "$(dirname "$0")/../.."
rc=0
python3 scripts/device/hire_device.py receive || rc=$?
if [ "$rc" = 3 ]; then   # not every part has come yet
  [ "$#" -eq 0 ] && exit 0
  echo "run.sh: error: not everything has come yet (see above): '$*' was not run; carry the rest first" >&2
  exit 3
fi
[ "$rc" = 0 ] || exit "$rc"
D=${HIRE_DEVICE_DIR:-/tmp/hire-device}
export PYTHONPATH="$D/site:$D/encoder-site${PYTHONPATH:+:$PYTHONPATH}" PATH="$D/site/bin:$PATH" HF_HUB_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false
for name in glue conll2003 wikiqa; do
  [ -d "$D/data/$name" ] && export "HIRE_$(echo "$name" | tr a-z A-Z)_DIR=$D/data/$name"
done
[ -d "$D/data/ud/en_ewt" ] && export HIRE_UD_DIR="$D/data/ud/en_ewt"
[ -d "$D/data/senteval" ] && export HIRE_SENTEVAL_DIR="$D/data/senteval"
if [ -n "${HIRE_DEVICE_LIMIT_S:-}" ]; then
  [[ "$HIRE_DEVICE_LIMIT_S" =~ ^[1-9][0-9]*$ ]] \
    || { echo "run.sh: error: HIRE_DEVICE_LIMIT_S=$HIRE_DEVICE_LIMIT_S: expected whole seconds" >&2; exit 2; }
  export HIRE_DEVICE_DEADLINE=$((started + HIRE_DEVICE_LIMIT_S - 10))
fi
[ "$#" -gt 0 ] && exec "$@"
python3 -c "import torch, transformers, hire; print('hire', hire.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
