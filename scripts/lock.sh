#!/usr/bin/env bash
# `make lock`: regenerates requirements.lock, the hashed lock of modelwright[dev] (train and
# cluster included, not gpu) for Python 3.13 on linux x86_64, from pyproject.toml.
#
#   make lock                          keep every pin that pyproject.toml still allows; resolve
#                                      only what changed (a new or removed dependency, a bound)
#   make lock UPGRADE="torch trl"      also move these packages (and what they need) to the newest
#   make lock UPGRADE=all              re-resolve everything to the newest allowed
#
# The resolver is uv, installed by hash into a throwaway venv that is removed afterwards; it
# reads PyPI (or UV_INDEX_URL / UV_DEFAULT_INDEX, if set), not pip's config. Then `make setup`
# installs the new lock (the venv re-installs because the lock changed). Details: docs/INSTALL.md.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements.lock
say() { printf '[lock] %s\n' "$*"; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for p in .venv/bin/python python3.13 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then PY=$p; break; fi
  done
fi
[ -n "$PY" ] || { echo "error: no python found to install uv with (set PYTHON=...)" >&2; exit 3; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/modelwright-lock.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say "installing uv into a throwaway venv ($tmp)"
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes \
  -r scripts/lock-tools.txt 2>&1 | sed -e '/is ignored: it is neither a file nor a directory/d'

upgrade=()
case "${UPGRADE:-}" in
  "") ;;
  all) upgrade=(--upgrade) ;;
  *) for p in $UPGRADE; do upgrade+=(--upgrade-package "$p"); done ;;
esac

say "resolving pyproject.toml [dev] for Python 3.13, linux x86_64${UPGRADE:+ (upgrading: $UPGRADE)}"
# An existing requirements.lock is read as the preferred versions (uv's default for -o). uv
# writes a copy, which replaces the lock only if it differs: an unchanged lock keeps its time,
# so the venv does not re-install for nothing.
[ -f "$LOCK" ] && cp "$LOCK" "$tmp/$LOCK"
UV_PYTHON_DOWNLOADS=never "$tmp/venv/bin/uv" pip compile pyproject.toml \
  --extra dev \
  --python-version 3.13 --python-platform x86_64-manylinux_2_34 \
  --generate-hashes \
  --custom-compile-command "make lock" \
  --no-progress --quiet \
  "${upgrade[@]}" ${LOCK_ARGS:-} \
  -o "$tmp/$LOCK"
n=$(grep -c '^[A-Za-z0-9]' "$tmp/$LOCK")
if [ -f "$LOCK" ] && cmp -s "$tmp/$LOCK" "$LOCK"; then
  say "$LOCK is up to date ($n packages)"
else
  cp "$tmp/$LOCK" "$LOCK"
  say "wrote $LOCK ($n packages); install it with: make setup"
fi
