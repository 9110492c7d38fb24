#!/usr/bin/env bash
# `make run`: open the studio; with no display, run the default session offscreen instead.
set -euo pipefail
cd "$(dirname "$0")/.."
MW=.venv/bin/modelwright
TASK=${MODELWRIGHT_TASK:-composition:2:5}
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec "$MW" studio
fi
OUT=${MODELWRIGHT_RUN_OUT:-runs/make-run}
mkdir -p "$OUT"
echo "No display found: running the default session offscreen instead"
echo "(task $TASK with the oracle policy, in the real studio window, rendered offscreen)."
export QT_QPA_PLATFORM=offscreen
"$MW" studio --task "$TASK" --policy oracle --autorun --exit-when-done \
  --screenshot "$OUT/screenshot.png" --data-dir "$OUT/data" | tee "$OUT/summary.json"
echo
echo "Screenshot of the window: $OUT/screenshot.png"
echo "Episode recorded in:      $OUT/data  (modelwright data list --data-dir $OUT/data)"
echo "Summary:                  $OUT/summary.json"
