#!/usr/bin/env bash
# GPU check for `modelwright serve`: vLLM serving a small random-initialised Qwen3-VL
# (the real architecture, ~0.13 B parameters, built locally: nothing is downloaded), chat
# requests with the full tool list and an image, a LoRA adapter served at startup and one
# hot-loaded, then tokens/s for one stream and for a concurrent batch.
#
# UNTESTED: written on a CPU-only machine; it has never run on a GPU. It needs a machine
# with an NVIDIA GPU and vLLM installed (`pip install -e '.[gpu]'`).
#
#   bash benchmarks/gpu_check.sh            # full profile
#   PROFILES="full fast" bash benchmarks/gpu_check.sh
#
# The prompt (system + the full tool list + one image) is ~6k tokens with this model's small
# 2048-token vocabulary, hence the 16k context.
# Env: PYTHON (default .venv/bin/python, else python3), PORT (8011), OUT (a results folder).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
PORT=${PORT:-8011}
PROFILES=${PROFILES:-full}
WORK=$(mktemp -d /tmp/mw-gpu-check.XXXXXX)
OUT=${OUT:-$WORK}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MODELWRIGHT_ADAPTER_REGISTRY="$WORK/adapters.json"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  || { echo "no nvidia-smi: this check needs an NVIDIA GPU" >&2; exit 2; }
"$PY" -c "import vllm; print('vllm', vllm.__version__)" \
  || { echo "vLLM is not installed; install the GPU extra: pip install -e '.[gpu]'" >&2; exit 2; }

echo "== building a small random Qwen3-VL and a random LoRA adapter in $WORK"
"$PY" - "$WORK" <<'PYEOF'
import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import GenerationConfig, Qwen3VLConfig, Qwen3VLForConditionalGeneration

from training.sft.tiny_model import build_processor, train_tokenizer

work = Path(sys.argv[1])
tok = train_tokenizer(0)
ids = tok.convert_tokens_to_ids
# head_dim 128 / vision head 64: sizes every attention backend supports (the CPU tiny
# model's head_dim 16 is not); mrope_section sums to head_dim / 2 as in Qwen3-VL.
config = Qwen3VLConfig(
    text_config=dict(vocab_size=len(tok), hidden_size=1024, intermediate_size=3072,
                     num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
                     head_dim=128, max_position_embeddings=32768, pad_token_id=ids("<|endoftext|>"),
                     rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                      "mrope_section": [24, 20, 20], "mrope_interleaved": True}),
    vision_config=dict(depth=4, hidden_size=512, intermediate_size=1024, num_heads=8,
                       patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                       out_hidden_size=1024, num_position_embeddings=2304,
                       deepstack_visual_indexes=[1, 2]),
    image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
    vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
    eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|endoftext|>"),
)
torch.manual_seed(0)
model = Qwen3VLForConditionalGeneration(config).to(torch.bfloat16)
model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id,
                                           pad_token_id=config.pad_token_id)
model.save_pretrained(work / "model")
build_processor(tok).save_pretrained(work / "model")
print("parameters:", sum(p.numel() for p in model.parameters()))
lora = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, init_lora_weights=False,
                                        target_modules=r".*language_model.*\.(q_proj|v_proj)"))
lora.save_pretrained(work / "adapter")
PYEOF

serve_pid=""
stop_server() {
  if [ -n "$serve_pid" ] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid"  # `&` jobs ignore SIGINT; serve maps TERM to Ctrl-C; wait "$serve_pid" || true
  fi
  serve_pid=""
}
trap stop_server EXIT

for profile in $PROFILES; do
  echo "== profile $profile: modelwright serve"
  "$PY" -m studio.cli serve --model "$WORK/model" --port "$PORT" --profile "$profile" \
      --adapter "sft=$WORK/adapter" --max-model-len 16384 --dry-run | tee "$OUT/command_$profile.txt"
  "$PY" -m studio.cli serve --model "$WORK/model" --port "$PORT" --profile "$profile" \
      --adapter "sft=$WORK/adapter" --max-model-len 16384 --health-timeout 600 \
      >"$OUT/serve_$profile.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 600); do
    grep -q "^serving " "$OUT/serve_$profile.log" && break
    kill -0 "$serve_pid" 2>/dev/null || { tail -50 "$OUT/serve_$profile.log"; exit 1; }
    sleep 1
  done
  grep "^serving " "$OUT/serve_$profile.log"

  echo "== hot-loading the adapter again under a fresh name"
  "$PY" -m studio.cli serve load-adapter policy "$WORK/adapter" --base-url "http://127.0.0.1:$PORT"

  echo "== chat requests with tools and an image"
  "$PY" - "$PORT" "$profile" "$OUT" <<'PYEOF'
import base64, io, json, sys, time
from concurrent.futures import ThreadPoolExecutor

from openai import OpenAI
from PIL import Image, ImageDraw

from tools import openai_tools

port, profile, out = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=300)
image = Image.new("RGB", (256, 256), "white")
ImageDraw.Draw(image).rectangle((64, 64, 192, 192), fill="steelblue")
buf = io.BytesIO()
image.save(buf, format="PNG")
url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
tools = openai_tools()
messages = [
    {"role": "system", "content": "You build 3D models with the tools."},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                 {"type": "text", "text": "Add a 1 m cube named Box."}]},
]
MAX_TOKENS = 256


def ask(model):
    reply = client.chat.completions.create(
        model=model, messages=messages, tools=tools, tool_choice="auto", max_tokens=MAX_TOKENS,
        temperature=1.0, extra_body={"ignore_eos": True})  # random weights: fix the length
    return reply.usage.prompt_tokens, reply.usage.completion_tokens


base = client.models.list().data[0].id
served = [m.id for m in client.models.list().data]
assert "sft" in served and "policy-v1" in served, served
for model in ("sft", "policy-v1"):
    ask(model)  # each adapter answers a request with tools and an image
ask(base)  # warm-up
t0 = time.perf_counter()
prompt, single = 0, 0
for _ in range(4):
    p, c = ask(base)
    prompt, single = p, single + c
single_tps = single / (time.perf_counter() - t0)
N = 32
t0 = time.perf_counter()
with ThreadPoolExecutor(N) as pool:
    batch = sum(c for _, c in pool.map(lambda _: ask(base), range(N)))
batch_tps = batch / (time.perf_counter() - t0)
result = {"profile": profile, "prompt_tokens": prompt, "tools": len(tools),
          "single_stream_tokens_per_s": round(single_tps, 1),
          f"batch{N}_tokens_per_s": round(batch_tps, 1),
          "batch_over_single": round(batch_tps / single_tps, 2)}
print(json.dumps(result))
with open(f"{out}/result_{profile}.json", "w") as f:
    json.dump(result, f)
PYEOF
  stop_server
  echo "== profile $profile: server stopped"
done
