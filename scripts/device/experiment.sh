#!/usr/bin/env bash
# On the lent GPU machine, after scripts/device/run.sh: train an experiment's cells that have no record yet, JOBS at
# once (further `hire experiment run` options may follow, such as --only train.seed=1), for at most MINUTES; then
# stop them cleanly (a later call resumes them on the same warm machine) and put the records, the runs' logs and
# metrics and the machine's description in $OUT/<name>.tar.gz. Stopping and packing take up to a minute and a
# half: give the call's timeout_s that much more than MINUTES.
#
#   bash scripts/device/run.sh bash scripts/device/experiment.sh configs/experiments/wikiqa-minilm.yaml 8 8
#
# Here, afterwards: tar -xzf <files_at>/<name>.tar.gz (from the checkout's root: experiments/<name>/records/ and
# runs/device/<name>/), then `hire experiment report <experiment file>`.
set -uo pipefail
[ "$#" -ge 3 ] || { echo "usage: experiment.sh EXPERIMENT MINUTES JOBS [hire experiment run options]" >&2; exit 2; }
EXP=$1 MINUTES=$2 JOBS=$3
shift 3
[ -f "$EXP" ] || { echo "experiment.sh: error: $EXP: no such experiment file" >&2; exit 2; }
[[ "$MINUTES" =~ ^[0-9]+$ && "$JOBS" =~ ^[1-9][0-9]*$ ]] \
  || { echo "experiment.sh: error: MINUTES ($MINUTES) and JOBS ($JOBS): expected whole numbers, JOBS 1 or more" >&2; exit 2; }
NAME=$(python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$EXP")
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1   # the cells share the machine's cores; the GPU does the work
nvidia-smi -L > "$OUT/machine.txt" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  >> "$OUT/machine.txt"
date -u >> "$OUT/machine.txt"
setsid hire experiment run "$EXP" --jobs "$JOBS" --runs_dir runs/device "$@" > "$OUT/$NAME.log" 2>&1 &
pid=$!
deadline=$((SECONDS + MINUTES * 60))
while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 5; done
if kill -0 "$pid" 2>/dev/null; then
  echo "stopping at the $MINUTES-minute limit: unfinished cells resume in a later call" | tee -a "$OUT/$NAME.log"
  kill -INT -- -"$pid" 2>/dev/null
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$pid" 2>/dev/null
fi
wait "$pid" 2>/dev/null
hire experiment status "$EXP" --runs_dir runs/device >> "$OUT/$NAME.log" 2>&1
date -u >> "$OUT/machine.txt"
# each cell's log is mostly progress bars: its last 20 kB travel, beside the run folders without their weights
tails="runs/device/$NAME.log-tails"
rm -rf "$tails" && mkdir -p "$tails"
for f in "runs/device/$NAME"/logs/*.log; do [ -f "$f" ] && tail -c 20000 "$f" > "$tails/$(basename "$f")"; done
pack() { tar -czf "$OUT/$NAME.tar.gz" --exclude='.claims' --exclude='.lock' --exclude='best' --exclude='checkpoint*' \
  --exclude='tensorboard' --exclude='logs' --exclude='*.safetensors' --exclude='*.bin' "$@"; }
pack "experiments/$NAME/records" "runs/device/$NAME" "$tails"
if [ "$(stat -c %s "$OUT/$NAME.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then  # 16 MiB a file comes back
  echo "the run folders are too large to come back: records and log tails only" | tee -a "$OUT/$NAME.log"
  pack "experiments/$NAME/records" "$tails"
fi
ls -l "$OUT"
tail -n 20 "$OUT/$NAME.log"
