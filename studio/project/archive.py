"""A project file (`.mwproj`): one zip holding the worker's own committed state and a manifest.

Why a zip and not a folder: a project is one thing a person copies, mails and opens from
Recent; a zip is one file, and the outbox delivers it through the same checks as any export.

What it holds:
- `state/commits/NNNNNN/…` and `state/breps/…`: the tail of the worker's undo history exactly
  as the worker writes it (tools/worker/state.py: checkpoints are Blender main files, journal
  entries are calls, both with a parts manifest; B-reps in the content-addressed pool). On
  open these become a stashed state and `switch` makes it live, the same path the verifier
  uses, so the scene and its undo steps come back in the worker's own format.
- `manifest.json`: what only the studio knows (the undo stack's labels and calls, the journal
  of calls that built the scene, the view, the chat, the episode links, the task).

A project file is untrusted input. The trusted side reads only the zip directory and the
manifest, both size-checked; the state files are copied byte for byte into the jailed
worker's scratch and only the worker parses them.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any

from tools import TOOLS
from tools.errors import ErrorKind, ToolError
from tools.trust import confined

SUFFIX = ".mwproj"
FORMAT = "modelwright-project"
VERSION = 1
MAX_PROJECT_BYTES = 1 << 30
MAX_MEMBER_BYTES = 512 << 20
MAX_MANIFEST_BYTES = 8 << 20
MAX_PARTS_BYTES = 4 << 20
MAX_MEMBERS = 20_000
MAX_LIST = 100_000  # calls, chat lines, episode links
_COMMIT = re.compile(r"^state/commits/(\d{6})/(scene\.blend|parts\.json|call\.json)$")
_BREP = re.compile(r"^state/breps/([0-9a-f]{24}\.brep)$")
_BREP_NAME = re.compile(r"^[0-9a-f]{24}\.brep$")


class ProjectError(ToolError):
    """A project that cannot be saved or opened, in one line; nothing was changed."""

    def __init__(self, message: str):
        super().__init__(ErrorKind.VALIDATION, message)


@dataclass
class Project:
    """Everything a project file holds: `state` is {archive name: bytes} of the worker's files."""

    state: dict[str, bytes] = field(default_factory=dict)
    undo: list[dict] = field(default_factory=list)  # {"text", "calls": [{tool, args}], "agent"}
    journal: list[dict] = field(default_factory=list)
    view: dict = field(default_factory=dict)
    chat: dict = field(default_factory=dict)  # {"goal": str, "lines": [{"text", "color"}]}
    episodes: list[str] = field(default_factory=list)
    task: str | None = None

    def manifest(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "undo": self.undo,
            "journal": self.journal,
            "view": self.view,
            "chat": self.chat,
            "episodes": self.episodes,
            "task": self.task,
        }

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("manifest.json", json.dumps(self.manifest(), sort_keys=True))
            for name in sorted(self.state):
                z.writestr(name, self.state[name])
        return buf.getvalue()


# -- out of the worker ---------------------------------------------------------------------------
def take_state(scratch: str, undo_steps: int) -> tuple[dict[str, bytes], int]:
    """The worker's live commit and up to `undo_steps` before it (back to a checkpoint), read
    from its scratch with tools.trust.confined (hostile ground: no link followed, sizes capped).
    Returns the files by archive name and how many undo steps they hold."""
    with confined.parent_dir(scratch, "state/commits/x") as (dfd, _):
        names = sorted((n for n in os.listdir(dfd) if n.isdigit() and len(n) == 6), key=int)
    if not names:
        raise ProjectError("the scene has no committed state to save")
    first = max(0, len(names) - 1 - max(0, undo_steps))
    while first > 0 and not confined.is_file(scratch, f"state/commits/{names[first]}/scene.blend"):
        first -= 1  # journal entries need the checkpoint before them
    if not confined.is_file(scratch, f"state/commits/{names[first]}/scene.blend"):
        raise ProjectError("the worker's undo history has no checkpoint to start from")
    kept, out, budget = names[first:], {}, MAX_PROJECT_BYTES
    for i, name in enumerate(kept, start=1):
        src, dst = f"state/commits/{name}", f"state/commits/{i:06d}"
        parts = confined.read_file(scratch, f"{src}/parts.json", MAX_PARTS_BYTES)
        out[f"{dst}/parts.json"] = parts
        body = "scene.blend" if confined.is_file(scratch, f"{src}/scene.blend") else "call.json"
        out[f"{dst}/{body}"] = confined.read_file(scratch, f"{src}/{body}", budget)
        budget -= len(out[f"{dst}/{body}"])
        for brep in _brep_names(parts):
            if f"state/breps/{brep}" not in out:
                out[f"state/breps/{brep}"] = data = confined.read_file(
                    scratch, f"state/breps/{brep}", budget
                )
                budget -= len(data)
        if budget <= 0:
            raise ProjectError("the scene is over the project size cap")
    return out, len(kept) - 1


def _brep_names(raw: bytes) -> list[str]:
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise ProjectError("the worker's parts manifest is not JSON") from None
    if not isinstance(manifest, dict) or not all(
        isinstance(v, str) and _BREP_NAME.match(v) for v in manifest.values()
    ):
        raise ProjectError("the worker's parts manifest is malformed")
    return sorted(set(manifest.values()))


# -- into the worker -----------------------------------------------------------------------------
def place_state(scratch: str, state: dict[str, bytes], key: str) -> list[str]:
    """Write a project's state into the worker's scratch as the stashed state `key` (B-reps
    into the pool, where a file of that name is already the content it names). Returns the
    paths written, relative to the scratch, for `hand_over`."""
    made = [
        "state/stash",
        f"state/stash/{key}",
        f"state/stash/{key}/commits",
        f"state/stash/{key}/snapshots",
    ]
    for name, data in sorted(state.items()):
        if m := _BREP.match(name):
            rel = f"state/breps/{m.group(1)}"
            if confined.is_file(scratch, rel):
                continue
        else:
            rel = f"state/stash/{key}/{name.removeprefix('state/')}"
            folder = rel.rsplit("/", 1)[0]
            if folder not in made:
                made.append(folder)
        confined.write_file(scratch, rel, data)
        made.append(rel)
    with confined.parent_dir(scratch, f"state/stash/{key}/snapshots/x", create=True):
        pass
    return made


def hand_over(scratch: str, rels: list[str]) -> None:
    """Give what we wrote the owner of the worker's state folder: a jailed worker runs as
    another uid and must move and remove these (as root they would be root's)."""
    root = os.path.join(scratch, "state")
    st = os.stat(root)
    if os.geteuid() != 0 or (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()):
        return
    for rel in rels:
        with confined.parent_dir(scratch, rel) as (dfd, name):
            os.chown(name, st.st_uid, st.st_gid, dir_fd=dfd, follow_symlinks=False)


# -- reading a file a person chose ---------------------------------------------------------------
def read_project(path: str | os.PathLike) -> Project:
    """Parse a project file: the zip directory and the manifest, size-checked and validated;
    the state files are returned as bytes, unparsed. ProjectError (one line) otherwise."""
    shown = os.path.basename(os.fspath(path))
    try:
        real = os.path.realpath(os.fspath(path))  # links in the path a person chose are theirs
        raw = confined.read_file(os.path.dirname(real), os.path.basename(real), MAX_PROJECT_BYTES)
    except (OSError, ToolError) as e:
        raise ProjectError(
            f"cannot open {shown}: {getattr(e, 'message', None) or e.strerror or e}"
        ) from None
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            infos = z.infolist()
            if len(infos) > MAX_MEMBERS or sum(i.file_size for i in infos) > MAX_PROJECT_BYTES:
                raise ProjectError(f"{shown} is over the project size cap")
            names = [i.filename for i in infos]
            if len(set(names)) != len(names) or "manifest.json" not in names:
                raise ProjectError(f"{shown} is not a Modelwright project (no single manifest)")
            state: dict[str, bytes] = {}
            manifest: Any = None
            for info in infos:
                if info.filename == "manifest.json":
                    manifest = json.loads(_member(z, info, MAX_MANIFEST_BYTES, shown))
                elif _COMMIT.match(info.filename) or _BREP.match(info.filename):
                    state[info.filename] = _member(z, info, MAX_MEMBER_BYTES, shown)
                else:
                    raise ProjectError(f"{shown} holds an unexpected file {info.filename[:80]!r}")
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        ValueError,
        EOFError,
        NotImplementedError,
    ) as e:
        raise ProjectError(
            f"{shown} is not a readable project file ({str(e)[:80] or type(e).__name__})"
        ) from None
    project = _validated(manifest, shown)
    _check_commits(state, shown)
    project.state = state
    return project


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, shown: str) -> bytes:
    if info.file_size > cap:
        raise ProjectError(f"{shown}: {info.filename[:80]} is over its size cap")
    with z.open(info) as f:
        data = f.read(cap + 1)  # the header's size is the file's claim, not a limit
    if len(data) > cap:
        raise ProjectError(f"{shown}: {info.filename[:80]} is over its size cap")
    return data


def _check_commits(state: dict[str, bytes], shown: str) -> None:
    commits: dict[str, set[str]] = {}
    for name in state:
        if m := _COMMIT.match(name):
            commits.setdefault(m.group(1), set()).add(m.group(2))
    order = sorted(commits, key=int)
    if not order or order != [f"{i:06d}" for i in range(1, len(order) + 1)]:
        raise ProjectError(f"{shown} holds no scene (its commits are missing or out of order)")
    for number, files in commits.items():
        if files not in ({"scene.blend", "parts.json"}, {"call.json", "parts.json"}):
            raise ProjectError(f"{shown}: commit {number} is incomplete")
    if "scene.blend" not in commits[order[0]]:
        raise ProjectError(f"{shown}: its first commit is not a checkpoint")


def _validated(m: Any, shown: str) -> Project:
    bad = ProjectError(f"{shown} has a malformed manifest")
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise ProjectError(f"{shown} is not a Modelwright project")
    if m.get("version") != VERSION:
        raise ProjectError(
            f"{shown} is project format version {str(m.get('version'))[:20]}; "
            f"this studio reads version {VERSION}"
        )
    undo = m.get("undo", [])
    if not isinstance(undo, list) or len(undo) > MAX_LIST:
        raise bad
    for entry in undo:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("text"), str)
            and isinstance(entry.get("agent", False), bool)
            and _calls_ok(entry.get("calls"))
            and entry["calls"]
        ):
            raise bad
    journal = m.get("journal", [])
    if not _calls_ok(journal):
        raise bad
    view = m.get("view", {})
    if not isinstance(view, dict) or not _view_ok(view):
        raise bad
    chat = m.get("chat", {})
    lines = chat.get("lines", []) if isinstance(chat, dict) else None
    if not (
        isinstance(chat, dict)
        and isinstance(chat.get("goal", ""), str)
        and isinstance(lines, list)
        and len(lines) <= MAX_LIST
        and all(
            isinstance(x, dict)
            and isinstance(x.get("text"), str)
            and isinstance(x.get("color"), str | None)
            for x in lines
        )
    ):
        raise bad
    episodes = m.get("episodes", [])
    if not (
        isinstance(episodes, list)
        and len(episodes) <= MAX_LIST
        and all(isinstance(e, str) and 0 < len(e) <= 128 for e in episodes)
    ):
        raise bad
    task = m.get("task")
    if not (task is None or isinstance(task, str) and 0 < len(task) <= 256):
        raise bad
    return Project(undo=undo, journal=journal, view=view, chat=chat, episodes=episodes, task=task)


def _calls_ok(calls: Any) -> bool:
    return (
        isinstance(calls, list)
        and len(calls) <= MAX_LIST
        and all(
            isinstance(c, dict) and c.get("tool") in TOOLS and isinstance(c.get("args", {}), dict)
            for c in calls
        )
    )


def _view_ok(view: dict) -> bool:
    if not view:
        return True
    numbers = [view.get(k) for k in ("azimuth_deg", "elevation_deg", "distance", "lens_mm")]
    target = view.get("target")
    units = view.get("units", "auto")
    return (
        units in ("auto", "mm", "m")
        and all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in numbers
        )
        and isinstance(target, list)
        and len(target) == 3
        and all(isinstance(x, int | float) and math.isfinite(x) and abs(x) < 1e6 for x in target)
    )
