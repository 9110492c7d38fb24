#!/usr/bin/env bash
# `make envs-eval`: verifiers' own evaluation command (vf-eval) runs the Modelwright environment
# (environments/modelwright) against a local OpenAI-compatible server: it starts Modelwright's
# OpenEnv server (`modelwright envs serve`) and `transformers serve` on the packaged base
# (smollm2-135m-instruct), runs vf-eval on a few tasks, stops both, and prints the results.
#   TASKS="requests:1:110000 ..."   the task ids (default: three of the test split)
#   MAX_TOKENS=128                  tokens per model reply
set -euo pipefail
cd "$(dirname "$0")/.."
VF=${VF_VENV:-.venv-vf}
TASKS=${TASKS:-requests:1:110000 requests:1:110001 scene_editing:1:110000}
MAX_TOKENS=${MAX_TOKENS:-128}
OUT=${OUT:-runs/envs-eval}
say() { printf '[envs-eval] %s\n' "$*"; }
free_port() { .venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ENV_PORT=${ENV_PORT:-$(free_port)}
MODEL_PORT=${MODEL_PORT:-$(free_port)}
RELAY_PORT=${RELAY_PORT:-$(free_port)}
MODEL=$(.venv/bin/python -c 'from agents.models.registry import ensure_base; print(ensure_base())')
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/modelwright-envs-eval.XXXXXX")

pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop EXIT
say "Modelwright OpenEnv server on 127.0.0.1:$ENV_PORT (log: $LOGS/env.log)"
.venv/bin/modelwright envs serve --port "$ENV_PORT" --split test --max-steps 6 >"$LOGS/env.log" 2>&1 &
pids+=($!)
say "transformers serve $MODEL on 127.0.0.1:$MODEL_PORT (log: $LOGS/model.log)"
.venv/bin/transformers serve "$MODEL" --host 127.0.0.1 --port "$MODEL_PORT" --device cpu >"$LOGS/model.log" 2>&1 &
pids+=($!)
wait_for() {  # url, what, pid
  for _ in $(seq 600); do
    if .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$1" 2>/dev/null; then return 0; fi
    kill -0 "$3" 2>/dev/null || { echo "error: $2 exited: $(tail -n 3 "$4")" >&2; exit 3; }
    sleep 1
  done
  echo "error: $2 did not answer at $1 within 600 s" >&2; exit 3
}
# transformers serve ends its event streams without OpenAI's `data: [DONE]`, which verifiers
# waits for: a loopback relay adds it.
.venv/bin/python scripts/sse_done_proxy.py --port "$RELAY_PORT" --upstream "http://127.0.0.1:$MODEL_PORT" >"$LOGS/relay.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$ENV_PORT/health" "the OpenEnv server" "${pids[0]}" "$LOGS/env.log"
wait_for "http://127.0.0.1:$MODEL_PORT/v1/models" "transformers serve" "${pids[1]}" "$LOGS/model.log"
wait_for "http://127.0.0.1:$RELAY_PORT/v1/models" "the relay" "${pids[2]}" "$LOGS/relay.log"

ids=$(printf '"%s",' $TASKS); ids="[${ids%,}]"
say "vf-eval modelwright-env on $ids"
rm -rf "$OUT"
PATH="$PWD/$VF/bin:$PATH" LOCAL_MODEL_KEY=local "$VF/bin/vf-eval" modelwright-env \
  --env.taskset.task-ids "$ids" \
  --env.taskset.task.server-url "http://127.0.0.1:$ENV_PORT" \
  --env.agent.harness.id null --env.agent.runtime.type subprocess \
  --client.base-url "http://127.0.0.1:$RELAY_PORT/v1" --client.api-key-var LOCAL_MODEL_KEY \
  -m "$MODEL" --sampling.max-tokens "$MAX_TOKENS" --sampling.temperature 0 -c 1 \
  --no-push -o "$OUT"
"$VF/bin/python" - "$OUT" <<'PY'
import json, pathlib, sys
n = errors = 0
total = 0.0
for path in sorted(pathlib.Path(sys.argv[1]).glob("*/traces.jsonl")):
    for line in path.read_text().splitlines():
        ep = json.loads(line)
        for tr in ep["traces"]:
            rec = tr["info"].get("modelwright_record") or {}
            score = tr["rewards"].get("modelwright", {}).get("score")
            err = "; ".join(e.get("message", "")[:80] for e in tr.get("errors") or [])
            n, errors, total = n + 1, errors + bool(err), total + (score or 0.0)
            print(f"{tr['info'].get('modelwright_task', '?'):<24} reward {score}  success "
                  f"{rec.get('success')}  steps {rec.get('steps')}  calls {rec.get('calls')}  "
                  f"components {rec.get('components')}{'  error: ' + err if err else ''}")
    print(f"traces: {path}")
print(f"{n} rollouts, {errors} failed, mean modelwright reward {total / max(n, 1):.3f}")
sys.exit(1 if errors or not n else 0)
PY
