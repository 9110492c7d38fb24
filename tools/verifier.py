"""A clean session holding another session's committed scene: where rewards are measured.

The worker a policy drove ran the policy's code, so anything it answers (`get_scene`, exports,
`cad_query`) is only as honest as that code. A worker commits the scene to disk after every
mutating call (tools/worker/state.py: the Blender main file and the CAD parts' B-reps); here
the trusted side copies the latest commit out of that worker's scratch (regular files only,
never through a link, names checked, sizes capped: tools/confined.py), hands it to a worker of
a separate pool that never runs policy code, and that worker loads it with scripts off
(`open_mainfile(use_scripts=False)`, SCRIPTED drivers and text blocks stripped on load) and
the B-reps from disk. Checkers then query that clean session.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tools import confined
from tools.confined import ConfinedPathError
from tools.errors import ToolError
from tools.interface import Session
from tools.session import ToolSession
from tools.supervisor import WorkerPool

_COMMIT = re.compile(r"^\d{6,12}$")
_BREP = re.compile(r"^[0-9a-f]{24}\.brep$")
MAX_STATE_BYTES = 2 << 30  # one committed scene, all files together
MAX_MANIFEST_BYTES = 4 << 20
MAX_PARTS = 10_000


def _latest_commit(scratch: str) -> str:
    try:
        with confined.parent_dir(scratch, "state/commits/_") as (dfd, _):
            names = os.listdir(dfd)
    except ConfinedPathError as e:
        raise ConfinedPathError(f"the session has no committed scene: {e.message}") from None
    for name in sorted((n for n in names if _COMMIT.match(n)), reverse=True):
        if confined.is_file(scratch, f"state/commits/{name}/parts.json"):
            return name
    raise ConfinedPathError("the session has no committed scene")


def _manifest(raw: bytes) -> dict[str, str]:
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise ConfinedPathError("the committed parts manifest is not JSON") from None
    if not isinstance(manifest, dict) or len(manifest) > MAX_PARTS or not all(
            isinstance(k, str) and 0 < len(k) <= 256 and isinstance(v, str) and _BREP.match(v)
            for k, v in manifest.items()):
        raise ConfinedPathError("the committed parts manifest is malformed")
    return manifest


def copy_committed_state(scratch: str, state_root: str, key: str) -> dict[str, Any]:
    """Copy the latest commit of the worker whose scratch is `scratch` into the stash `key`
    of a clean worker's state folder `state_root`; returns what was copied."""
    latest = _latest_commit(scratch)
    manifest = _manifest(confined.read_file(scratch, f"state/commits/{latest}/parts.json",
                                            MAX_MANIFEST_BYTES))
    stash = Path(state_root, "stash", key)
    commit = stash / "commits" / "000001"
    commit.mkdir(parents=True)
    (stash / "snapshots").mkdir()
    budget = MAX_STATE_BYTES
    budget -= confined.copy_file(scratch, f"state/commits/{latest}/scene.blend",
                                 commit / "scene.blend", budget)
    breps = Path(state_root, "breps")
    breps.mkdir(exist_ok=True)
    for fname in sorted(set(manifest.values())):
        if budget <= 0:
            raise ConfinedPathError("the committed scene is over its size cap")
        budget -= confined.copy_file(scratch, f"state/breps/{fname}", breps / fname, budget)
    (commit / "parts.json").write_text(json.dumps(manifest, sort_keys=True))
    _hand_over(state_root, [stash.parent, breps, *stash.rglob("*"), stash,
                            *(breps / f for f in set(manifest.values()))])
    return {"commit": latest, "parts": len(manifest), "bytes": MAX_STATE_BYTES - budget}


def _hand_over(state_root: str, paths: Iterable[Path]) -> None:
    """Give what the trusted side wrote into a worker's state the owner of that state folder:
    a jailed worker runs as another uid and must move and remove these files (as root the
    copies would otherwise be root's, read-only to the jail)."""
    st = os.stat(state_root)
    if os.geteuid() != 0 or (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()):
        return
    for p in paths:
        os.chown(p, st.st_uid, st.st_gid, follow_symlinks=False)


class CleanRoom:
    """A pool of workers that only ever load committed scenes (never a policy's code)."""

    def __init__(self, size: int = 1, pool: WorkerPool | None = None):
        # Checkers query the scene and never render: no warm-up render (1-2 s in the jail).
        # Importing CadQuery is most of a worker's start, and a clean worker serves one
        # verification: spares import it only while the scenes verified have CAD parts (a
        # worker that needs it and lacks it imports it on first use, tools/worker/lazy_cq.py).
        self.pool = pool or WorkerPool(size=size, test_hooks=False, warm_render=False,
                                       preload_cad=False)
        self._own_pool = pool is None
        self._lock = threading.Lock()

    @contextmanager
    def session_from(self, session: Session, files: Iterable[str] = ()) -> Iterator[Any]:
        """A clean ToolSession holding `session`'s committed scene, with the workspace files
        `files` copied in (regular files only; a missing or refused one is left out)."""
        scratch = os.fspath(session.scratch)
        src_ws = os.fspath(session.workspace)
        clean = ToolSession(self.pool)
        clean_scratch = os.fspath(clean.scratch)
        try:
            key = f"verify_{secrets.token_hex(6)}"
            copied = copy_committed_state(scratch, os.path.join(clean_scratch, "state"), key)
            if self._own_pool:
                self.pool.preload_cad = copied["parts"] > 0  # for the spares started next
            try:
                clean.switch(park=None, take=key)
            except ToolError as e:  # e.g. a commit the policy overwrote with garbage
                raise ConfinedPathError(f"the committed scene does not load: {e.message}") from None
            for rel in files:
                try:
                    data = confined.read_file(src_ws, rel)
                except ConfinedPathError:
                    continue
                confined.write_file(clean.workspace, rel, data)
            yield clean
        finally:
            shutil.rmtree(os.path.join(clean_scratch, "state", "stash"), ignore_errors=True)
            try:
                clean.workspace  # noqa: B018 - raises if the worker could not be restarted
                poisoned = False
            except ToolError:  # it crashed on the commit and its restart did too
                poisoned = True
            clean.close()
            if poisoned:
                shutil.rmtree(clean_scratch, ignore_errors=True)

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()
