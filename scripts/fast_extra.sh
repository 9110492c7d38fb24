#!/usr/bin/env bash
# `make fast`: the `fast` extra (llama-cpp-python: `--variant fast`, `models export --quant
# q4_k_m|q4_0`) built from its source distribution (hash-pinned) into the project's venv: ~4 min
# on 2 idle cores (231 s measured), longer beside other work. Needs PyPI and a C++ compiler.
# - It names this CPU's instruction sets instead of -march=native: on a CPU with AMX,
#   -march=native compiles llama.cpp's AMX kernels, whose weight layout crashed the first decode
#   of the shipped agent (0.3.36). On a CPU other than x86-64 it builds natively.
# - Without OpenMP: llama.cpp's own threads meet at spinning barriers, where OpenMP's sleep at
#   every step under the passive wait policy the product sets for torch (x2.6 the time of a new
#   token on 2 threads).
# docs/MODELS.md, "Fast variant: llama.cpp". FAST_CMAKE_ARGS replaces the chosen flags.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
DISKCACHE="diskcache==5.6.3 --hash=sha256:5e31b2d5fbad117cc363ebaf6b689474db18a1f6438bc82358b024abd4c2ca19"
say() { printf '[fast] %s\n' "$*"; }

# x86-64 flag in /proc/cpuinfo -> ggml's CMake option
cmake_args() {
  local flags
  flags=" $( (grep -m1 '^flags' "${CPUINFO:-/proc/cpuinfo}" 2>/dev/null || true) | cut -d: -f2) "
  if [ "$flags" = "  " ] || [[ "$flags" != *" sse2 "* ]]; then
    echo "-DGGML_NATIVE=ON -DGGML_OPENMP=OFF"; return
  fi
  local args="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  local pair
  for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI \
              avx512f:AVX512 avx512_vnni:AVX512_VNNI avx512vbmi:AVX512_VBMI avx512_bf16:AVX512_BF16; do
    if [[ "$flags" == *" ${pair%%:*} "* ]]; then args+=" -DGGML_${pair#*:}=ON"
    else args+=" -DGGML_${pair#*:}=OFF"; fi
  done
  echo "$args"
}

# --print-cmake-args: the flags this CPU gets (CPUINFO=FILE reads another cpuinfo), no build
if [ "${1:-}" = "--print-cmake-args" ]; then cmake_args; exit 0; fi
[ -x "$PY" ] || { echo "error: $PY is missing: run make setup first" >&2; exit 3; }
ARGS=${FAST_CMAKE_ARGS:-$(cmake_args)}
req=$(mktemp)
trap 'rm -f "$req"' EXIT
printf 'llama-cpp-python==%s --hash=sha256:%s\n%s\n' "$VERSION" "$SHA256" "$DISKCACHE" > "$req"
say "building llama-cpp-python $VERSION from source (~4 min on 2 idle cores): CMAKE_ARGS=$ARGS"
# --no-cache-dir: a wheel pip built earlier with other flags would otherwise be reused
CMAKE_ARGS="$ARGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$PY" -m pip install -q --disable-pip-version-check --no-cache-dir --no-deps \
  --no-binary llama-cpp-python --require-hashes -r "$req" 2>&1 \
  | sed -e '/is ignored: it is neither a file nor a directory/d'
"$PY" -c 'import llama_cpp; info = llama_cpp.llama_print_system_info().decode(); print("[fast] llama.cpp", llama_cpp.__version__, "ready:", " ".join(p.split(" = ")[0].split(":")[-1].strip() for p in info.split("|") if p.strip().endswith("= 1")))'
