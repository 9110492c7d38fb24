"""Files leave a worker's workspace only as regular files, reached without any link.

Each attack plants something in a folder the worker can write (a symlink, a symlinked folder,
a FIFO, a device) and checks that the trusted side neither writes nor reads outside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tools.trust import confined
from tools.trust.confined import ConfinedPathError


def _victim(tmp_path):
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("precious")
    return victim


def test_tools_run_refuses_links_in_its_out_folder_and_leaves_them(tmp_path):
    """The jail never sees `--out` (tests/security/test_trust_outbox.py); a link someone else
    left there under an output's name is refused in one line, never written through or removed."""
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / "results.jsonl")
    seq = tmp_path / "seq.jsonl"
    seq.write_text(json.dumps({"tool": "add_primitive", "args": {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}}) + "\n")
    p = subprocess.run([sys.executable, "-m", "studio.cli", "tools", "run", str(seq), "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == (f"error: {out}/results.jsonl is a symlink; it was left as it is "
                                "and nothing was written there")
    assert victim.read_text() == "precious" and (out / "results.jsonl").is_symlink()
    assert sorted(os.listdir(out)) == ["results.jsonl"]


def test_symlinked_parent_folder_is_never_entered(tmp_path):
    victim = _victim(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(victim.parent, ws / "renders")
    with pytest.raises(ConfinedPathError, match="not a plain folder"):
        confined.write_file(ws, "renders/victim.txt", b"overwritten")
    with pytest.raises(ConfinedPathError):
        confined.read_file(ws, "renders/victim.txt")
    with pytest.raises(ConfinedPathError):
        confined.copy_file(ws, "renders/victim.txt", tmp_path / "copy")
    confined.remove_file(ws, "renders/victim.txt")
    assert victim.read_text() == "precious" and not (tmp_path / "copy").exists()


def test_symlinked_workspace_root_and_dotdot_are_refused(tmp_path):
    victim = _victim(tmp_path)
    os.symlink(victim.parent, tmp_path / "ws")
    with pytest.raises(ConfinedPathError):
        confined.read_file(tmp_path / "ws", "victim.txt")
    real = tmp_path / "real"
    real.mkdir()
    for rel in ("../outside/victim.txt", str(victim), "a/../../outside/victim.txt", "x\0y"):
        with pytest.raises(ConfinedPathError):
            confined.read_file(real, rel)


def test_fifo_and_device_in_place_of_a_file_are_refused_without_blocking(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "final.glb")  # opening this for reading would block forever
    with pytest.raises(ConfinedPathError, match="not a regular file"):
        confined.read_file(ws, "final.glb")
    assert not confined.is_file(ws, "final.glb")
    with pytest.raises(ConfinedPathError, match="not a regular file"):
        confined.read_file("/dev", "zero")  # a device node reached without links
    confined.write_file(ws, "final.glb", b"glb")  # the FIFO is replaced by a regular file
    assert confined.read_file(ws, "final.glb") == b"glb"


@pytest.mark.timeout(120)  # a FIFO opened to write blocks until a reader comes: never, here
def test_a_log_opened_to_append_replaces_a_planted_link_fifo_or_folder(tmp_path):
    victim = _victim(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kept.log").write_bytes(b"before\n")
    with confined.open_append(ws, "kept.log") as f:  # a plain log is appended to, not replaced
        f.write(b"after\n")
    assert (ws / "kept.log").read_bytes() == b"before\nafter\n"
    os.symlink(victim, ws / "link.log")
    os.mkfifo(ws / "fifo.log")
    (ws / "dir.log").mkdir()
    os.symlink(victim, ws / "dir.log" / "inner")
    for name in ("link.log", "fifo.log", "dir.log"):
        with confined.open_append(ws, name) as f:
            f.write(b"log\n")
        assert not (ws / name).is_symlink() and (ws / name).is_file(), name
        assert (ws / name).read_bytes() == b"log\n", name
    assert victim.read_text() == "precious"


def test_size_cap_on_files_taken_out(tmp_path):
    (tmp_path / "big.bin").write_bytes(b"x" * 2048)
    with pytest.raises(ConfinedPathError, match="cap"):
        confined.read_file(tmp_path, "big.bin", max_bytes=1024)


def test_task_setup_writes_task_files_by_name_not_through_a_planted_link(session, tmp_path):
    """A worker plants `target.stl -> victim` in its workspace; the next task's setup writes
    its reference mesh there and must replace the link, not overwrite the victim."""
    from training.tasks import get_task

    task = next(t for t in (get_task(f"mesh_reconstruction:1:{k}") for k in range(5))
                if t.spec.files)
    victim = _victim(tmp_path)
    rel = next(iter(task.spec.files))
    target = session.workspace / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    os.symlink(victim, target)
    session.reset()
    task.setup(session)
    assert victim.read_text() == "precious"
    assert not target.is_symlink() and target.stat().st_size > 0
