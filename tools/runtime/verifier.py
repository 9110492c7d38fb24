"""A clean session that rebuilds another session's episode: where rewards are measured.

The worker a policy drove ran the policy's code, so anything it answers (`ok` flags,
`get_scene`, exports, `cad_query`, commit numbers, imported names, files in its scratch) is
only as honest as that code. The verifier believes none of it. It takes the session's ledger
(tools/trust/ledger.py: what the trusted side itself saw of each call) and rebuilds the episode in
a worker of a separate pool that never ran policy code: from an empty scene (or the ledger's
vaulted base), it runs every recorded call itself, so each call's validity is the clean
worker's verdict, and the final scene is the one those calls make.

A call that runs someone else's code or reads someone else's file (`cadquery_script`,
`import_file`) is not run in the clean worker: it is run again in a fresh worker of a third
pool (a "code worker", one per call, killed after it), started from the clean rebuild's own
state just before the call (and, for an import, given the file as the trusted side copied it
before the call). So a script that patched its worker reaches no later call, a script that
raises fails whatever its policy worker answered afterwards, and an import of a file that was
not there fails. The code worker's commit after the call is copied out (tools.trust.confined, capped)
and loaded into the clean worker with scripts off as one undo step; the call counts as valid
only if the clean worker then finds what it made: a script's part, named as asked, a valid
solid; an import's objects, new in the scene. Checkers then query the clean session.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.errors import ErrorKind, ToolError
from tools.runtime.session import ToolSession
from tools.runtime.supervisor import WorkerPool
from tools.specs import TOOLS
from tools.text import printable_line
from tools.trust import confined
from tools.trust import ledger as ledger_mod
from tools.trust.confined import ConfinedPathError
from tools.trust.ledger import Entry, VaultedCommit

# Read-only tools that still leave something a later call reads: always run again.
STATEFUL_READS = frozenset({"snapshot", "export"})


@dataclass
class Rebuilt:
    """What a rebuild established: each ledger call's validity, as the clean worker saw it."""

    valid: dict[int, bool] = field(default_factory=dict)  # ledger seq -> ran and validated
    calls: int = 0  # calls run again in the clean worker
    reruns: int = 0  # code calls run again in a fresh code worker each
    overturned: int = 0  # calls whose reported `ok` the rebuild contradicts
    why: dict[int, str] = field(default_factory=dict)  # seq -> why a code call failed again
    retried: int = 0  # code calls run a second time, their first worker having crashed
    changed: set[int] = field(default_factory=set)  # seqs whose call changed the clean scene
    before: dict[int, str] = field(default_factory=dict)  # seq -> the scene hash before it
    scene_hash: str = ""  # the clean scene's, after the last call run again


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


def _crashed(code: ToolSession, r: Any) -> bool:
    """True if `r` failed because its worker died (a signal, an exit), not at a cap the
    supervisor holds it to (memory, disk: it would reach them again) nor by its own error."""
    w = code.worker
    return (r.error is not None and r.error.kind == ErrorKind.CRASH
            and not (w is not None and w.stopped_for))


class CleanRoom:
    """A pool of workers that only ever load committed scenes (never a policy's code)."""

    def __init__(self, size: int = 1, pool: WorkerPool | None = None,
                 code_pool: WorkerPool | None = None):
        # Checkers query the scene and never render: no warm-up render (1-2 s in the jail).
        # Importing CadQuery is most of a worker's start, and a clean worker serves one
        # verification: spares import it only while the scenes verified have CAD parts (a
        # worker that needs it and lacks it imports it on first use, tools/worker/lazy_cq.py).
        self.pool = pool or WorkerPool(size=size, test_hooks=False, warm_render=False,
                                       preload_cad=False)
        self._own_pool = pool is None
        self._lock = threading.Lock()
        self._code_pool = code_pool  # made on the first code call (most episodes have none)
        self._own_code_pool = code_pool is None
        self._vault = tempfile.mkdtemp(prefix="modelwright-rerun-")  # 0700, ours

    @property
    def code_pool(self) -> WorkerPool:
        """Workers that run one code call again each: they run a policy's script or read its
        file, so they are never clean workers. A spare is kept warm, CadQuery imported."""
        with self._lock:
            if self._code_pool is None:
                self._code_pool = WorkerPool(size=1, test_hooks=False, warm_render=False,
                                             preload_cad=True)
            return self._code_pool

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
            done.scene_hash = clean.scene_hash()
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
        done.before[e.seq] = done.scene_hash
        if e.outcome != "answered" or spec is None:  # refused, timed out or crashed: no effect
            done.valid[e.seq] = False
            return
        if e.code:
            ok, why = self._rerun(clean, state_root, e, done)
            if not ok:
                done.why[e.seq] = why
            after = clean.scene_hash()
            done.reruns += 1
        elif spec.mutating or e.tool in STATEFUL_READS or e.seq in wanted:
            r = clean.call(e.tool, dict(e.args))
            ok, after = r.ok, r.scene_hash or done.scene_hash
            done.calls += 1
        else:
            return  # an observation nobody scores (the loop's own montage and scene page)
        done.valid[e.seq] = ok
        done.overturned += ok != e.reported_ok
        if ok and after != done.scene_hash:
            done.changed.add(e.seq)
        done.scene_hash = after

    def _rerun(self, clean: ToolSession, state_root: str, e: Entry,
               done: Rebuilt) -> tuple[bool, str]:
        """Run the code call `e` again in a fresh code worker started from the clean scene as
        it stands, and make what it committed live in the clean worker (one undo step).
        (True, "") if the call ran there and the clean worker finds what it made; else False
        and why not, in a line. A code worker that crashes (not stopped at a cap) may be the
        machine's fault, not the call's: the call gets one more fresh worker (`done.retried`;
        what the policy's worker answered is not asked), and still earns nothing it does not
        make there."""
        if e.tool == "import_file" and e.inputs is None:
            return False, "there was no file to import when the call was made"
        files = ledger_mod.input_files(e.inputs) if e.inputs is not None else {}  # digest
        start = self._checkpoint(clean, state_root)
        try:
            for last in (False, True):
                with ToolSession(self.code_pool, deadline_s=REPLAY_DEADLINE_S,
                                 recover=False) as code:
                    code_root = os.path.join(os.fspath(code.scratch), "state")
                    name = f"mwv_{secrets.token_hex(8)}"
                    _hand_over(code_root, _place(start, code_root, f"snapshots/{name}"))
                    if not code.call("restore", {"name": name}).ok:
                        raise ConfinedPathError("the rebuilt scene does not load in a fresh worker")
                    for rel, data in files.items():
                        confined.write_file(code.workspace, rel, data)
                    r = self._run_code(code, e)
                    if not r.ok:
                        if not last and _crashed(code, r):
                            done.retried += 1
                            continue
                        return False, f"it failed when run again: {printable_line(r.error)[:300]}"
                    acked = code.acked_commit
                    if acked is None:
                        return False, "the code worker acknowledged no commit"
                    try:  # its product, as the code worker committed it: hostile ground
                        product = code.ledger.take(os.fspath(code.scratch), acked)
                    except (ToolError, OSError, ValueError) as err:
                        return False, f"its commit was refused: {printable_line(err)[:300]}"
                    return self._take(clean, state_root, e, product)
            raise AssertionError("unreachable: the last try returns")
        finally:
            shutil.rmtree(start.path, ignore_errors=True)

    def _run_code(self, code: ToolSession, e: Entry) -> Any:
        """The code call `e` run again in the code worker `code`: its ToolResult."""
        return code.call(e.tool, dict(e.args))

    def _checkpoint(self, clean: ToolSession, state_root: str) -> VaultedCommit:
        """The clean scene as it stands, copied out as a checkpoint (a snapshot the clean
        worker writes under a secret name, taken into this room's vault and removed)."""
        name = f"mwr_{secrets.token_hex(8)}"
        if not clean.call("snapshot", {"name": name}).ok:
            raise ConfinedPathError("the rebuilt scene could not be saved for a code call")
        dest = tempfile.mkdtemp(prefix="start-", dir=self._vault)
        try:
            return ledger_mod.copy_checkpoint(os.fspath(clean.scratch),
                                              f"state/snapshots/{name}", dest)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(os.path.join(state_root, "snapshots", name), ignore_errors=True)

    def _take(self, clean: ToolSession, state_root: str, e: Entry,
              product: VaultedCommit) -> tuple[bool, str]:
        """Make a code worker's commit live in the clean worker as one undo step; (True, "")
        if what the call made is there: a script's part, a valid solid; an import's new
        objects. Else False and why not."""
        name = f"mwv_{secrets.token_hex(8)}"
        made = _place(product, state_root, f"snapshots/{name}")  # a digest mismatch: refused
        before = set() if e.tool == "cadquery_script" else _names(clean)
        _hand_over(state_root, made)
        try:
            r = clean.call("restore", {"name": name})
            if not r.ok:
                return False, f"its commit did not load: {printable_line(r.error)[:300]}"
        finally:
            shutil.rmtree(os.path.join(state_root, "snapshots", name), ignore_errors=True)
        if e.tool == "cadquery_script":
            r = clean.call("cad_query", {"name": e.args.get("name")})
            if r.ok and r.output.get("valid") is True:
                return True, ""
            return False, "it made no valid solid of that name"
        if _names(clean) - before:  # an import made objects the scene lacked
            return True, ""
        return False, "it made no new object"

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()
        if self._own_code_pool and self._code_pool is not None:
            self._code_pool.close()
        shutil.rmtree(self._vault, ignore_errors=True)
