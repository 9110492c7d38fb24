"""Mesa's shader cache for workers: a seed kept by the trusted side, a private copy per worker.

In the jail, Workbench's first render compiles its shaders with llvmpipe's JIT: 1-4 s of a
worker's start (0.3 s where a warm cache exists). Mesa caches compiled shaders on disk
(`MESA_SHADER_CACHE_DIR`), but a cache a worker writes is that worker's: shared, it would carry
state (native code) from one session into the next. Hence:
- the seed lives in the app user's cache folder (`MODELWRIGHT_SHADER_CACHE`, else
  `$XDG_CACHE_HOME/modelwright/shader-cache`), never bound into a jail;
- each worker starts with a private copy of it in its scratch, which dies with the worker;
- the seed is taken once, from the first worker that reaches `ready` with a compiled cache and
  no seed to start from: at that moment it has run only its own start (imports, an empty
  scene, the warm-up render) and no session's input; a restored worker (it loaded a session's
  commit before `ready`) never seeds. The copy goes through tools/trust/confined: regular files
  with Mesa's names only, never through a link, size-capped.
Remove the folder to take a new seed (e.g. after a Mesa upgrade, whose entries Mesa ignores).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile

from tools.sandbox import jail
from tools.trust import confined
from tools.trust.confined import ConfinedPathError

log = logging.getLogger("modelwright.tools")
ENV = "MODELWRIGHT_SHADER_CACHE"
SUB = "mesa_shader_cache"  # Mesa keeps its files under $MESA_SHADER_CACHE_DIR/mesa_shader_cache
_BUCKET = re.compile(r"^[0-9a-f]{2}$")
_ENTRY = re.compile(r"^[0-9a-f]{8,64}$")
MAX_FILES = 4096
MAX_BYTES = 64 << 20


def seed_dir() -> str:
    if os.environ.get(ENV):
        return os.environ[ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "modelwright", "shader-cache")


def worker_dir(scratch: str) -> str:
    """The worker's own cache folder (its `MESA_SHADER_CACHE_DIR`)."""
    return os.path.join(scratch, "shader-cache")


def give(scratch: str, uid: int, seed: bool = True) -> None:
    """Put a private copy of the seed (if there is one and `seed`) in the worker's scratch,
    before it starts, owned by the worker's host uid `uid`."""
    dest = worker_dir(scratch)
    os.makedirs(dest, exist_ok=True)
    jail.give_to_jail(dest, uid)
    src = os.path.join(seed_dir(), SUB)
    if not seed or not os.path.isdir(src):
        return
    try:
        shutil.copytree(src, os.path.join(dest, SUB), symlinks=True)  # the seed is ours
    except (OSError, shutil.Error) as e:
        log.warning("shader cache not copied: %s", e)
        return
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            jail.give_to_jail(os.path.join(root, name), uid)


def seeded() -> bool:
    """Whether a seed exists: a worker's first render then loads compiled shaders (~0.3 s)."""
    return os.path.isdir(os.path.join(seed_dir(), SUB))


def take_seed(scratch: str) -> bool:
    """Keep the worker's compiled cache as the seed when there is none; call it at `ready`,
    before the worker got any request. Returns whether a seed was taken."""
    final = os.path.join(seed_dir(), SUB)
    if os.path.isdir(final):
        return False
    entries = _entries(worker_dir(scratch))
    if not entries:
        return False
    os.makedirs(seed_dir(), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".seed-", dir=seed_dir())
    try:
        budget = MAX_BYTES
        for rel in entries:
            os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
            budget -= confined.copy_file(worker_dir(scratch), f"{SUB}/{rel}",
                                         os.path.join(tmp, rel), budget)
            if budget < 0:
                raise ConfinedPathError("the shader cache is over its size cap")
        os.rename(tmp, final)  # atomic; another worker's seed taken first wins
        return True
    except (OSError, ConfinedPathError) as e:
        if os.path.isdir(final):
            return False
        log.warning("shader cache seed not taken: %s", e)
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _entries(root: str) -> list[str]:
    """Mesa's cache files in a worker's cache folder (relative to its SUB folder): names
    checked, links and anything else left out."""
    out: list[str] = []
    for bucket in _names(root, SUB):
        if not _BUCKET.match(bucket):
            continue
        out += [f"{bucket}/{n}" for n in _names(root, f"{SUB}/{bucket}") if _ENTRY.match(n)
                and confined.is_file(root, f"{SUB}/{bucket}/{n}")]
        if len(out) > MAX_FILES:
            return []
    return out


def _names(root: str, rel: str) -> list[str]:
    try:
        with confined.parent_dir(root, f"{rel}/_") as (dfd, _):
            return os.listdir(dfd)
    except (ConfinedPathError, OSError):
        return []
