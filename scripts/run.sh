#!/usr/bin/env bash
# `make run`: open the studio; with no display, run the default session offscreen instead.
set -euo pipefail
cd "$(dirname "$0")/.."
MW=${MODELWRIGHT_BIN:-.venv/bin/modelwright}  # tests pass a stand-in
TASK=${MODELWRIGHT_TASK:-composition:2:5}
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec "$MW" studio
fi
OUT=${MODELWRIGHT_RUN_OUT:-runs/make-run}
# The episode goes where the user keeps their store (MODELWRIGHT_DATA_DIR), else beside the run.
DATA=${MODELWRIGHT_DATA_DIR:-$OUT/data}
mkdir -p "$OUT"
echo "No display found: running the default session offscreen instead"
echo "(task $TASK with the oracle policy, in the real studio window, rendered offscreen)."
export QT_QPA_PLATFORM=offscreen
"$MW" studio --task "$TASK" --policy oracle --autorun --exit-when-done \
  --screenshot "$OUT/screenshot.png" --data-dir "$DATA" | tee "$OUT/summary.json"
echo
echo "Screenshot of the window: $OUT/screenshot.png"
echo "Episode recorded in:      $DATA  (modelwright data list --data-dir $DATA)"
echo "Summary:                  $OUT/summary.json"
