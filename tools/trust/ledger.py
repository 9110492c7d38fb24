"""The trusted side's own record of a session: what was asked, what the supervisor saw.

A worker that ran a policy's code answers what that code wants: an `ok` flag, an error, a
commit number, a list of objects it says it imported. None of that is evidence. The ledger
keeps what the trusted side knows for itself: each call as it validated it, and whether it
was refused before it reached the worker, timed out or crashed (the supervisor killed the
worker then). For an `import_file` it also keeps the file itself, as it was in the workspace
just before the call, copied into a vault the jail never sees (with its sha256 digest): the
verifier imports that copy again, so a file that was not there is an import that failed.

The verifier (tools/runtime/verifier.py) rebuilds the episode from this ledger in a clean worker:
it runs every recorded call itself and, at a code call (`cadquery_script`, `import_file`),
runs that one call again in a fresh worker of its own, started from the clean rebuild's
state. So no reward component reads an `ok` flag, a commit or a file the policy's worker
chose, and nothing a script leaves behind in its worker reaches a later call. See
docs/SECURITY.md, "Where each reward component comes from".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tools.trust import confined
from tools.trust.confined import ConfinedPathError

# Calls that run someone else's code or read someone else's file: the verifier runs each
# again in a fresh worker of its own (never in the clean worker, never in the policy's).
CODE_TOOLS = frozenset({"cadquery_script", "import_file"})
MAX_INPUT_BYTES = 512 << 20  # the files one import_file reads, all together (as tools.trust.outbox)
# A studio day; past either cap the history is folded into a base commit (tools/runtime/session.py).
MAX_ENTRIES = 20_000
MAX_ARGS_BYTES = 64 << 20  # scripts are up to 100 KB each
MAX_STATE_BYTES = 2 << 30  # one committed scene, all files together
MAX_MANIFEST_BYTES = 4 << 20
MAX_PARTS = 10_000
_BREP = re.compile(r"^[0-9a-f]{24}\.brep$")


@dataclass(frozen=True)
class VaultedCommit:
    """A worker's commit as the trusted side copied it at acknowledgement time."""

    commit: int  # the worker's commit number it was acknowledged as
    path: str  # the vault folder: scene.blend, parts.json, breps/
    digest: str  # sha256 over the files, in a fixed order
    parts: int


@dataclass(frozen=True)
class VaultedFiles:
    """The files an `import_file` call reads, as the trusted side copied them just before
    the call: `names` relative to the workspace, the copies under `path`."""

    path: str
    names: tuple[str, ...]
    digest: str


@dataclass
class Entry:
    """One call the session handled. `outcome`: refused (never reached the worker), timeout,
    crash (the worker was killed and restored), or answered (the worker replied; `reported_ok`
    is what it said, kept for the record and never used as evidence). `inputs`: an
    import's files as they were before the call (None: there was no such regular file)."""

    seq: int
    tool: str
    args: dict
    mutating: bool
    outcome: str
    reported_ok: bool = False
    inputs: VaultedFiles | None = None

    @property
    def code(self) -> bool:
        return self.tool in CODE_TOOLS


@dataclass
class Ledger:
    """Calls since the session's last reset (an empty scene), or since `base`."""

    vault: str
    base: VaultedCommit | None = None
    entries: list[Entry] = field(default_factory=list)
    next_seq: int = 0
    broken: str | None = None  # why this history cannot be rebuilt (the verifier refuses it)
    args_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls) -> Ledger:
        return cls(vault=tempfile.mkdtemp(prefix="modelwright-vault-"))  # 0700, ours

    def note(self, tool: str, args: dict, mutating: bool, outcome: str,
             reported_ok: bool = False, inputs: VaultedFiles | None = None) -> int:
        size = len(json.dumps(args, default=str))
        with self._lock:
            seq = self.next_seq
            self.next_seq += 1
            self.args_bytes += size
            self.entries.append(Entry(seq, tool, args, mutating, outcome, reported_ok, inputs))
            return seq

    def restart(self, base: VaultedCommit | None = None) -> None:
        """After a reset (base None: an empty scene) or when folding history into `base`."""
        with self._lock:
            keep = {base.path} if base is not None else set()
            for e in self.entries:
                if e.inputs is not None:
                    shutil.rmtree(e.inputs.path, ignore_errors=True)
            if self.base is not None and self.base.path not in keep:
                shutil.rmtree(self.base.path, ignore_errors=True)
            self.entries, self.base, self.args_bytes = [], base, 0

    @property
    def full(self) -> bool:
        return len(self.entries) >= MAX_ENTRIES or self.args_bytes >= MAX_ARGS_BYTES

    def snapshot(self) -> tuple[VaultedCommit | None, list[Entry]]:
        """The base and the entries as they stand (a copy of the list, entries are not edited)."""
        with self._lock:
            return self.base, list(self.entries)

    def take(self, scratch: str, commit: int) -> VaultedCommit:
        """Copy the worker's commit `commit` out of its scratch into the vault, now."""
        dest = tempfile.mkdtemp(prefix=f"c{commit:06d}-", dir=self.vault)
        try:
            return copy_commit(scratch, commit, dest)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise

    def take_inputs(self, workspace: str, rel: str) -> VaultedFiles | None:
        """Copy the files an `import_file` of `rel` reads out of the workspace into the vault,
        now, before the call; None if there is no such regular file to import (a missing
        file, a link, a FIFO, over the cap): the import then fails in the rebuild."""
        from tools.trust.outbox import import_names

        dest = tempfile.mkdtemp(prefix="in-", dir=self.vault)
        try:
            rel = os.path.normpath(rel).replace(os.sep, "/")
            return copy_inputs(workspace, import_names(workspace, rel), dest)
        except (ConfinedPathError, OSError):
            shutil.rmtree(dest, ignore_errors=True)
            return None
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise

    def close(self) -> None:
        shutil.rmtree(self.vault, ignore_errors=True)


def copy_inputs(workspace: str, names: list[str], dest: str) -> VaultedFiles:
    """Copy the files `names` from a worker's workspace into the trusted folder `dest`,
    through tools.trust.confined (no link followed, regular files only, MAX_INPUT_BYTES in all)."""
    budget = MAX_INPUT_BYTES
    for name in names:
        target = os.path.join(dest, "files", name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        budget -= confined.copy_file(workspace, name, target, budget)
        if budget < 0:
            raise ConfinedPathError(f"the files a call reads are over the "
                                    f"{MAX_INPUT_BYTES}-byte cap")
    return VaultedFiles(dest, tuple(names), _inputs_digest(dest, names))


def _inputs_digest(path: str, names: Iterable[str]) -> str:
    h = hashlib.sha256()
    for rel in sorted(names):
        data = _read(os.path.join(path, "files", rel))
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def input_files(inputs: VaultedFiles) -> dict[str, bytes]:
    """The vaulted files by workspace name; ConfinedPathError if they no longer match the
    digest taken when they were copied (the trusted side's own folder was changed)."""
    try:
        ok = _inputs_digest(inputs.path, inputs.names) == inputs.digest
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise ConfinedPathError("the vaulted import files do not match their digest")
    return {n: _read(os.path.join(inputs.path, "files", n)) for n in inputs.names}


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


def copy_commit(scratch: str, commit: int, dest: str) -> VaultedCommit:
    """Copy commit `commit` (a checkpoint: its main file, its parts manifest and the B-reps it
    names) from a worker's scratch into the trusted folder `dest`: regular files only, never
    through a link, names checked, sizes capped (tools/trust/confined.py). Returns it with its digest."""
    name = f"{int(commit):06d}"
    return copy_checkpoint(scratch, f"state/commits/{name}", dest, int(commit), name)


def copy_checkpoint(scratch: str, src: str, dest: str, commit: int = 0,
                    name: str = "") -> VaultedCommit:
    """Copy the checkpoint folder `src` (a commit's or a snapshot's, relative to the scratch)
    into `dest` as copy_commit does; `commit` is the number it is known by (0: none)."""
    name = name or os.path.basename(src)
    raw = confined.read_file(scratch, f"{src}/parts.json", MAX_MANIFEST_BYTES)
    manifest = _manifest(raw)
    budget = MAX_STATE_BYTES
    os.makedirs(os.path.join(dest, "breps"), exist_ok=True)
    try:
        budget -= confined.copy_file(scratch, f"{src}/scene.blend",
                                     os.path.join(dest, "scene.blend"), budget)
    except ConfinedPathError as e:
        raise ConfinedPathError(f"commit {name} is not a checkpoint the trusted side can take: "
                                f"{e.message}") from None
    for fname in sorted(set(manifest.values())):
        if budget <= 0:
            raise ConfinedPathError("the committed scene is over its size cap")
        budget -= confined.copy_file(scratch, f"state/breps/{fname}",
                                     os.path.join(dest, "breps", fname), budget)
    with open(os.path.join(dest, "parts.json"), "wb") as f:  # our own vault, not a user path
        f.write(json.dumps(manifest, sort_keys=True).encode())
    return VaultedCommit(int(commit), dest, digest_of(dest), len(manifest))


def digest_of(path: str) -> str:
    """sha256 over a vaulted commit's files (names and bytes, in sorted order)."""
    h = hashlib.sha256()
    manifest = json.loads(_read(os.path.join(path, "parts.json")))
    for rel in ["parts.json", "scene.blend", *(f"breps/{f}" for f in sorted(set(manifest.values())))]:
        data = _read(os.path.join(path, rel))
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def check(commit: VaultedCommit) -> None:
    """ConfinedPathError unless the vaulted commit still has the digest it was taken with."""
    try:
        ok = digest_of(commit.path) == commit.digest
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise ConfinedPathError(f"the vaulted commit {commit.commit} does not match its digest")


def manifest_of(commit: VaultedCommit) -> dict[str, Any]:
    return json.loads(_read(os.path.join(commit.path, "parts.json")))
