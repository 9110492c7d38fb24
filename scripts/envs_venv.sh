#!/usr/bin/env bash
# `make envs-venv`: the verifiers environment's own venv (.venv-vf), beside the product's.
# verifiers 0.4.0 pins openai<3 and mcp==2.0.0 and brings Prime Intellect's packages, so it does
# not go into .venv (docs/ENVIRONMENTS.md); it talks to Modelwright's OpenEnv server over
# loopback instead. Installs environments/modelwright/requirements.lock (hash-checked; made by
# `make envs-lock`), then the environment package (modelwright_env) itself. Needs PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
VF=${VF_VENV:-.venv-vf}
DIR=environments/modelwright
say() { printf '[envs-venv] %s\n' "$*"; }
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for p in python3.13 .venv/bin/python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then PY=$p; break; fi
  done
fi
[ -n "$PY" ] || { echo "error: no Python 3.13 found to make $VF with (set PYTHON=...)" >&2; exit 3; }
pip_q() {
  "$VF/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | sed -e '/is ignored: it is neither a file nor a directory/d'
  return "${PIPESTATUS[0]}"
}
rm -f "$VF/.installed"
[ -x "$VF/bin/python" ] || { say "making $VF"; "$PY" -m venv "$VF"; }
say "installing $DIR/requirements.lock (verifiers 0.4.0) into $VF"
pip_q --require-hashes -r "$DIR/requirements.lock"
pip_q --no-deps --no-build-isolation --force-reinstall "./$DIR"
rm -rf "$DIR/build"
"$VF/bin/python" -c 'import modelwright_env, verifiers; print(f"[envs-venv] verifiers {verifiers.__version__}, modelwright_env ready")'
touch "$VF/.installed"
