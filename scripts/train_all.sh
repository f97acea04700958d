#!/usr/bin/env bash
# Retrain every model shipped in attention_viz/data/models, redraw assets/dk_family.png, print the total wall time.
#
#   scripts/train_all.sh                 # JOBS=2 runs two one-thread trainings side by side (2 cores)
#   JOBS=1 DEVICE=cuda scripts/train_all.sh
#   MODELS=/tmp/smoke STEPS=20 scripts/train_all.sh   # a smoke test of the pipeline, nothing shipped touched
#
# Shipped: one scaled model per task (copy, reverse, sort, dates) and the d_k family on reverse: d_k in
# {4, 16, 64, 128}, each with scaling on (sqrt_dk) and off (none); same seed, data and steps.
# The reverse task model *is* the family's d_k=16 scaled member (one run, saved under both names).
# Per-run progress bars go to runs/train_all/NAME.log.
set -euo pipefail
cd "$(dirname "$0")/.."

MODELS=${MODELS:-attention_viz/data/models}
LOGS=runs/train_all
JOBS=${JOBS:-2}
DEVICE=${DEVICE:-cpu}
STEPS=${STEPS:-}                # set to override every run's step budget (smoke tests only)
FAMILY_STEPS=${STEPS:-2000}
TASK_STEPS=${STEPS:-2000}
SORT_STEPS=${STEPS:-1500}
DATES_STEPS=${STEPS:-3000}      # dates in words -> ISO; max_len 32 (the trainer's default for the task)
# The family figure: assets/ for the shipped models; beside any other models folder (smoke tests).
if [ "$MODELS" = attention_viz/data/models ]; then FIGURE=assets/dk_family.png; else FIGURE="$(dirname "$MODELS")/dk_family.png"; fi
mkdir -p "$MODELS" "$LOGS"
start=$(date +%s)

# One line per run: NAME then its flags. Longest runs first, so two workers finish together.
runs() {
  for d_k in 128 64; do
    echo "reverse_dk${d_k}_scaled --task reverse --d-k $d_k --scale sqrt_dk --steps $FAMILY_STEPS"
    echo "reverse_dk${d_k}_unscaled --task reverse --d-k $d_k --scale none --steps $FAMILY_STEPS"
  done
  echo "copy --task copy --d-k 16 --scale sqrt_dk --steps $TASK_STEPS"
  for d_k in 16 4; do
    echo "reverse_dk${d_k}_scaled --task reverse --d-k $d_k --scale sqrt_dk --steps $FAMILY_STEPS"
    echo "reverse_dk${d_k}_unscaled --task reverse --d-k $d_k --scale none --steps $FAMILY_STEPS"
  done
  echo "sort --task sort --d-k 16 --scale sqrt_dk --steps $SORT_STEPS"
  echo "dates --task dates --d-k 16 --scale sqrt_dk --steps $DATES_STEPS"
}

export MODELS LOGS DEVICE
runs | xargs -P "$JOBS" -L 1 bash -c '
  name=$0
  python -m attention_viz.train "$@" --seed 0 --threads 1 --device "$DEVICE" --out "$MODELS/$name" 2> "$LOGS/$name.log"
'

cp "$MODELS/reverse_dk16_scaled.safetensors" "$MODELS/reverse.safetensors"
cp "$MODELS/reverse_dk16_scaled.json" "$MODELS/reverse.json"

python -m attention_viz.train.family --models "$MODELS" --out "$FIGURE"
du -ch "$MODELS"/* "$FIGURE" | tail -1
echo "total wall time: $(( $(date +%s) - start )) s"
echo "CPU time (user, system) of this shell, then of every run it started:"
times
