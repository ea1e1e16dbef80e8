#!/usr/bin/env bash
# The main job: fine-tune HIRE and the last-layer baseline on CoLA (real GLUE data) with the default
# encoder (all-MiniLM-L6-v2), then print their dev scores side by side. Up to about 30 minutes on 2 CPU cores, set-up included.
# Runs land in runs/main/; a second call resumes unfinished runs and re-prints finished ones.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
for head in last-layer hire; do
  if [ -f "runs/main/$head/metrics.json" ]; then
    echo "runs/main/$head is finished: keeping it (delete the folder to train again)"
  else
    hire train --config configs/cola-minilm.yaml --model.head "$head" --output_dir "runs/main/$head" "$@"
  fi
done
hire report runs/main/last-layer runs/main/hire --markdown runs/main/report.md
