#!/usr/bin/env bash
# On the lent GPU machine, after scripts/device/run.sh: train an experiment's cells that have no record yet, JOBS at
# once (further `hire experiment run` options may follow, such as --only train.seed=1), for at most MINUTES, and
# earlier where run.sh set HIRE_DEVICE_DEADLINE (from HIRE_DEVICE_LIMIT_S): the cells stop 90 s before it, which
# leaves time to stop them and pack. They stop cleanly on SIGINT (a later call on the same warm machine resumes
# them). $OUT gets <name>.tar.gz (the records, the runs' metrics and logs' tails, without weights), <name>.log and
# machine.txt; while the cells train, <name>-records.tar.gz holds the records so far, so that a call killed at its
# limit still returns the finished cells.
#
#   HIRE_DEVICE_LIMIT_S=600 bash scripts/device/run.sh bash scripts/device/experiment.sh \
#       configs/experiments/wikiqa-minilm.yaml 8 8
#
# Here, afterwards: tar -xzf <files_at>/<name>.tar.gz (from the checkout's root: experiments/<name>/records/ and
# runs/device/<name>/), then `hire experiment report <experiment file>`.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ "$#" -ge 3 ] || { echo "usage: experiment.sh EXPERIMENT MINUTES JOBS [hire experiment run options]" >&2; exit 2; }
EXP=$1 MINUTES=$2 JOBS=$3
shift 3
[ -f "$EXP" ] || { echo "experiment.sh: error: $EXP: no such experiment file" >&2; exit 2; }
[[ "$MINUTES" =~ ^[0-9]+$ && "$JOBS" =~ ^[1-9][0-9]*$ ]] \
  || { echo "experiment.sh: error: MINUTES ($MINUTES) and JOBS ($JOBS): expected whole numbers, JOBS 1 or more" >&2; exit 2; }
[ -n "${OUT:-}" ] || { echo "experiment.sh: error: OUT is not set (the device tool sets it): nothing would come back" >&2; exit 2; }
NAME=$(python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1])).get('name') or '')" "$EXP")
[ -n "$NAME" ] || { echo "experiment.sh: error: $EXP has no name: (the records' folder is named by it)" >&2; exit 2; }
mkdir -p "$OUT"
stop_at=$(( $(date +%s) + MINUTES * 60 ))
if [ -n "${HIRE_DEVICE_DEADLINE:-}" ] && [ $((HIRE_DEVICE_DEADLINE - 90)) -lt "$stop_at" ]; then
  stop_at=$((HIRE_DEVICE_DEADLINE - 90))
fi
export OMP_NUM_THREADS=1   # the cells share the machine's cores; the GPU does the work
{ nvidia-smi -L; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  date -u; } > "$OUT/machine.txt" 2>&1
records="experiments/$NAME/records"
# Job control on: the runner gets its own process group (so one signal reaches it and its cells) in this session
# (so the tool's kill at the call's limit reaches it too). SIGINT is set back to its default before hire starts: a
# background job of a script without job control, or of a shell that was started with SIGINT ignored, would
# inherit it ignored (bash cannot undo that), and Python would then never stop cleanly on it.
set -m
python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
  hire experiment run "$EXP" --jobs "$JOBS" --runs_dir runs/device "$@" > "$OUT/$NAME.log" 2>&1 &
pid=$!
set +m
last_snapshot=$(date +%s)
while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$stop_at" ]; do
  sleep 5
  if [ $(( $(date +%s) - last_snapshot )) -ge 60 ] && [ -d "$records" ]; then
    tar -czf "$OUT/$NAME-records.tar.gz.part" "$records" && mv "$OUT/$NAME-records.tar.gz.part" "$OUT/$NAME-records.tar.gz"
    last_snapshot=$(date +%s)
  fi
done
if kill -0 "$pid" 2>/dev/null; then
  echo "stopping at the time limit: unfinished cells resume in a later call on this machine" | tee -a "$OUT/$NAME.log"
  kill -INT -- -"$pid" 2>/dev/null
  for _ in $(seq 45); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$pid" 2>/dev/null
fi
wait "$pid" 2>/dev/null
date -u >> "$OUT/machine.txt"
# each cell's log is mostly progress bars: its last 20 kB travel, beside the run folders without their weights
tails="runs/device/$NAME.log-tails"
rm -rf "$tails" && mkdir -p "$tails"
for f in "runs/device/$NAME"/logs/*.log; do [ -f "$f" ] && tail -c 20000 "$f" > "$tails/$(basename "$f")"; done
pack() { tar -czf "$OUT/$NAME.tar.gz" --exclude='.claims' --exclude='.lock' --exclude='best' --exclude='checkpoint*' \
  --exclude='tensorboard' --exclude='logs' --exclude='*.safetensors' --exclude='*.bin' "$@"; }
packed=()
for dir in "$records" "runs/device/$NAME" "$tails"; do [ -e "$dir" ] && packed+=("$dir"); done
pack "${packed[@]}"
if [ "$(stat -c %s "$OUT/$NAME.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then  # 16 MiB a file comes back
  echo "the run folders are too large to come back: without per-example predictions" | tee -a "$OUT/$NAME.log"
  pack --exclude='predictions*' "${packed[@]}"
fi
if [ "$(stat -c %s "$OUT/$NAME.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then
  echo "still too large: records and log tails only" | tee -a "$OUT/$NAME.log"
  pack "$records" "$tails"
fi
rm -f "$OUT/$NAME-records.tar.gz"   # the whole archive holds them
ls -l "$OUT"
hire experiment status "$EXP" --runs_dir runs/device >> "$OUT/$NAME.log" 2>&1
tail -n 20 "$OUT/$NAME.log"
