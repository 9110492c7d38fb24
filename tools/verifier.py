"""A clean session that rebuilds another session's episode: where rewards are measured.

The worker a policy drove ran the policy's code, so anything it answers (`ok` flags,
`get_scene`, exports, `cad_query`, commit numbers, files in its scratch) is only as honest as
that code. The verifier believes none of it. It takes the session's ledger (tools/ledger.py:
what the trusted side itself saw of each call) and rebuilds the episode in a worker of a
separate pool that never ran policy code: from an empty scene (or the ledger's vaulted base),
it runs every recorded call itself, so each call's validity is the clean worker's verdict,
and the final scene is the one those calls make. A call whose effect cannot be recomputed
without running someone else's code or file (`cadquery_script`, `import_file`) is taken as
the commit the trusted side vaulted when the worker acknowledged it (digest checked, loaded
with scripts off: `open_mainfile(use_scripts=False)`, SCRIPTED drivers and text blocks
stripped), and counts as valid only if the objects it claims to have made are there and
valid. Checkers then query that clean session.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools import ledger as ledger_mod
from tools.confined import ConfinedPathError
from tools.errors import ToolError
from tools.ledger import Entry, VaultedCommit
from tools.session import ToolSession
from tools.specs import TOOLS
from tools.supervisor import WorkerPool

# Read-only tools that still leave something a later call reads: always run again.
STATEFUL_READS = frozenset({"snapshot", "export"})


@dataclass
class Rebuilt:
    """What a rebuild established: each ledger call's validity, as the clean worker saw it."""

    valid: dict[int, bool] = field(default_factory=dict)  # ledger seq -> ran and validated
    calls: int = 0  # calls run again
    taken: int = 0  # code calls taken as their vaulted commit
    overturned: int = 0  # calls whose reported `ok` the rebuild contradicts


def _place(commit: VaultedCommit, state_root: str, folder: str) -> list[Path]:
    """Copy a vaulted commit into a clean worker's state folder: its main file and manifest
    into `folder` (relative to `state_root`), its B-reps into the pool. ConfinedPathError if
    it no longer matches the digest taken when the worker acknowledged it."""
    ledger_mod.check(commit)
    dest = Path(state_root, folder)
    dest.mkdir(parents=True)
    breps = Path(state_root, "breps")
    breps.mkdir(exist_ok=True)
    made = [dest, breps]
    for name in ("scene.blend", "parts.json"):
        shutil.copyfile(os.path.join(commit.path, name), dest / name)
        made.append(dest / name)
    for fname in sorted(set(ledger_mod.manifest_of(commit).values())):
        shutil.copyfile(os.path.join(commit.path, "breps", fname), breps / fname)
        made.append(breps / fname)
    return made


def _names(clean: ToolSession) -> set[str]:
    return {o.get("name") for o in clean.scene().get("objects", [])}


def _hand_over(state_root: str, paths: Iterable[Path]) -> None:
    """Give what the trusted side wrote into a worker's state the owner of that state folder:
    a jailed worker runs as another uid and must move and remove these files (as root the
    copies would otherwise be root's, read-only to the jail)."""
    st = os.stat(state_root)
    if os.geteuid() != 0 or (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()):
        return
    for p in paths:
        os.chown(p, st.st_uid, st.st_gid, follow_symlinks=False)


REPLAY_DEADLINE_S = 180.0


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
    def rebuild(self, base: VaultedCommit | None, entries: Iterable[Entry],
                wanted: set[int] = frozenset()) -> Iterator[tuple[Any, Rebuilt]]:
        """A clean ToolSession in which the ledger's calls were run again (read-only calls
        only when their seq is `wanted`: the ones a checker counts), and what it established."""
        entries = list(entries)
        if self._own_pool:  # for the spares started next: CadQuery only while scenes have CAD
            self.pool.preload_cad = (base is not None and base.parts > 0) or any(
                getattr(TOOLS.get(e.tool), "kernel", "") == "cadquery" for e in entries)
        # A replay runs calls that already ran once, never a policy's code; its time limit is
        # there for a hung worker. A clean worker imports CadQuery on its first CAD call, which
        # on a loaded machine can take longer than a policy's 30 s: a slow import must not
        # overturn an honest call (seen with 40+ processes on 2 cores).
        clean = ToolSession(self.pool, deadline_s=REPLAY_DEADLINE_S)
        clean_scratch = os.fspath(clean.scratch)
        state_root = os.path.join(clean_scratch, "state")
        done = Rebuilt()
        try:
            if base is not None:
                key = f"verify_{secrets.token_hex(6)}"
                made = _place(base, state_root, f"stash/{key}/commits/000001")
                os.makedirs(os.path.join(state_root, "stash", key, "snapshots"))
                _hand_over(state_root, [*made, *Path(state_root, "stash").rglob("*"),
                                        Path(state_root, "stash")])
                self._load(clean, lambda: clean.switch(park=None, take=key))
            for e in entries:
                self._again(clean, state_root, e, wanted, done)
            yield clean, done
        finally:
            shutil.rmtree(os.path.join(state_root, "stash"), ignore_errors=True)
            try:
                clean.workspace  # noqa: B018 - raises if the worker could not be restarted
                poisoned = False
            except ToolError:  # it crashed on the commit and its restart did too
                poisoned = True
            clean.close()
            if poisoned:
                shutil.rmtree(clean_scratch, ignore_errors=True)

    @staticmethod
    def _load(clean: ToolSession, load) -> None:
        try:
            load()
        except ToolError as e:  # e.g. a commit the policy's code filled with garbage
            raise ConfinedPathError(f"the committed scene does not load: {e.message}") from None

    def _again(self, clean: ToolSession, state_root: str, e: Entry, wanted: set[int],
               done: Rebuilt) -> None:
        """Run one ledger call again in the clean session (or take its vaulted commit)."""
        spec = TOOLS.get(e.tool)
        if e.outcome != "answered" or spec is None:  # refused, timed out or crashed: no effect
            done.valid[e.seq] = False
            return
        if e.code:
            ok = e.reported_ok and e.commit is not None and self._take(clean, state_root, e)
            done.taken += 1
        elif spec.mutating or e.tool in STATEFUL_READS or e.seq in wanted:
            ok = clean.call(e.tool, dict(e.args)).ok
            done.calls += 1
        else:
            return  # an observation nobody scores (the loop's own montage and scene page)
        done.valid[e.seq] = ok
        done.overturned += ok != e.reported_ok

    def _take(self, clean: ToolSession, state_root: str, e: Entry) -> bool:
        """Make a code call's vaulted commit live as one undo step; True if the objects the
        call claims to have made are there (and a script's part is a valid solid)."""
        name = f"mwv_{secrets.token_hex(8)}"
        made = _place(e.commit, state_root, f"snapshots/{name}")  # a digest mismatch: refused
        before = set() if e.tool == "cadquery_script" else _names(clean)
        _hand_over(state_root, made)
        try:
            if not clean.call("restore", {"name": name}).ok:
                return False
        finally:
            shutil.rmtree(os.path.join(state_root, "snapshots", name), ignore_errors=True)
        if not e.claims:
            return False
        if e.tool == "cadquery_script":
            r = clean.call("cad_query", {"name": e.claims[0]})
            return r.ok and r.output.get("valid") is True
        return set(e.claims) <= _names(clean) - before  # an import's objects are new ones

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()
