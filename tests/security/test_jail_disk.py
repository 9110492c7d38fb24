"""A worker's disk is capped (tools/sandbox/diskwatch.py): its scratch holds at most the cap.

As root each scratch is an ext4 image of exactly the cap, loop-mounted; as an ordinary user
the supervisor walks it. Each attack writes far past the cap from a `cadquery_script` with full
Python (past the lint) and must end in a typed `crash` naming the disk cap, with the host's
free space measured while it runs, and the session serving again after, scene as before. The
cap is made small (MODELWRIGHT_WORKER_DISK_MB, read when a worker starts) to keep it cheap.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from tools import ErrorKind, ToolSession, WorkerPool
from tools.sandbox import diskwatch

from .conftest import payload

CAP_MB = 128

WRITE = r'''
import time
cap = PARAMS["cap_mb"] << 20
how = PARAMS["how"]
block = b"x" * (1 << 20)
err = None
try:
    if how == "one_file":  # then the call ends with the error it got
        with open("junk.bin", "wb") as f:
            for i in range(8 * cap >> 20):
                f.write(block)
                f.flush()
    elif how == "files_held":  # 1 MB files, then the call waits: only the watch ends it
        os.makedirs("junk", exist_ok=True)
        for i in range(8 * cap >> 20):
            with open(f"junk/{i:05d}", "wb") as f:
                f.write(block)
    elif how == "unlinked":  # in no folder: only the open descriptor holds it
        f = open("gone.bin", "wb")
        os.unlink("gone.bin")
        for i in range(8 * cap >> 20):
            f.write(block)
            f.flush()
            os.fsync(f.fileno())
except OSError as e:
    err = e
if how == "one_file" and err is not None:
    raise err
time.sleep(600)  # held until the supervisor stops the worker
'''


@pytest.fixture
def small_disk_pool(monkeypatch):
    monkeypatch.setenv("MODELWRIGHT_WORKER_DISK_MB", str(CAP_MB))
    pool = WorkerPool(size=0, test_hooks=True, prewarm=False)
    yield pool
    pool.close()


class _Sampler:
    """The host's free space under the pool, and (as root) the blocks the scratch's image
    holds on the host, sampled while the attack runs."""

    def __init__(self, root: str, scratch: str):
        self.root, self.image = root, diskwatch.image_of(scratch)
        self.before = self.free()
        self.lowest, self.image_peak = self.before, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def free(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.lowest = min(self.lowest, self.free())
            try:
                self.image_peak = max(self.image_peak, os.stat(self.image).st_blocks * 512)
            except OSError:
                pass

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {"free_before_mb": self.before >> 20, "free_lowest_mb": self.lowest >> 20,
                "free_after_mb": self.free() >> 20, "image_peak_mb": self.image_peak / 2**20}


def attack(pool: WorkerPool, how: str) -> dict:
    """Write 8x the cap `how`; what the session answered, what the host saw, what it holds after."""
    with ToolSession(pool, deadline_s=300) as s:
        assert s.call("add_primitive", {"kind": "cube", "name": "Kept", "dimensions": [1, 1, 1]}).ok
        scratch = str(s.scratch)
        mounted = os.path.ismount(scratch)
        code = payload(WRITE, str(s.workspace / "never.json"), {"cap_mb": CAP_MB, "how": how})
        sampler = _Sampler(pool.root, scratch)
        r = s.call("cadquery_script", {"code": code, "name": "hog"})
        host = sampler.stop()
        after = [o["name"] for o in s.scene()["objects"]]  # waits for the restarted worker
        used_after = diskwatch.usage(str(s.scratch), [])[0]
        nxt = s.call("add_primitive", {"kind": "cube", "name": "Next", "dimensions": [1, 1, 1]})
        return {"how": how, "uid": os.geteuid(), "mounted": mounted, "ok": r.ok,
                "kind": r.error and r.error.kind.value, "message": r.error and r.error.message,
                "restarts": s.restarts, "after": after, "used_after_mb": used_after / 2**20,
                "next_ok": nxt.ok, **host}


def check(out: dict) -> None:
    print(f"\n[disk cap {CAP_MB} MB, {out['how']}, uid {out['uid']}, "
          f"{'loop file system' if out['mounted'] else 'watched'}] host free space: before "
          f"{out['free_before_mb']} MB, lowest {out['free_lowest_mb']} MB, after "
          f"{out['free_after_mb']} MB; the image's peak on the host {out['image_peak_mb']:.1f} MB;"
          f" scratch after the restart {out['used_after_mb']:.1f} MB; error: {out['message']}")
    assert not out["ok"] and out["kind"] == ErrorKind.CRASH.value, out
    assert f"disk space ({CAP_MB} MB" in out["message"] and "\n" not in out["message"], out
    assert out["restarts"] == 1
    assert out["after"] == ["Kept"] and out["next_ok"], out  # restarted, from the last commit
    assert out["used_after_mb"] <= CAP_MB / 2, out  # the junk went, room for the next calls
    if out["mounted"]:  # the kernel's bound: the worker's whole share of the host disk
        assert out["image_peak_mb"] <= CAP_MB, out


@pytest.mark.parametrize("how", ["one_file", "files_held", "unlinked"])
def test_writing_past_the_disk_cap_stops_the_worker(small_disk_pool, how):
    check(attack(small_disk_pool, how))


@pytest.mark.skipif(os.geteuid() != 0, reason="as an ordinary user the suite itself is this case")
@pytest.mark.parametrize("how", ["files_held", "unlinked"])
def test_the_disk_cap_holds_when_the_app_runs_as_an_ordinary_user(ordinary_user, how):
    r = ordinary_user.python("-m", "security.test_jail_disk", how)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert not out["mounted"]  # an ordinary user cannot mount: the watch holds the cap
    check(out)


def test_an_honest_session_keeps_its_commits_and_exports_under_the_cap(small_disk_pool):
    """Everything the scratch holds still works on a capped one: commits, undo, snapshots,
    exports, a restore after a crash."""
    with ToolSession(small_disk_pool, deadline_s=120) as s:
        assert s.call("cadquery_script", {"code": "import cadquery as cq\nresult = cq.Workplane().box(1, 2, 3)\n",
                                          "name": "b"}).ok
        assert s.call("snapshot", {"name": "one"}).ok
        assert s.call("add_primitive", {"kind": "cube", "name": "C", "dimensions": [1, 1, 1]}).ok
        assert s.call("export", {"format": "glb", "path": "out.glb"}).ok
        assert s.call("undo", {"steps": 1}).ok and s.call("restore", {"name": "one"}).ok
        assert s.render(size=64).ok
        w = s._w()
        assert w.check_disk() is not None and w.alive and s.restarts == 0
        s._send({"op": "fault", "kind": "abort"}, 60, "fault")  # a crash: restored from disk
        assert sorted(o["name"] for o in s.scene()["objects"]) == ["b"] and s.restarts == 1


if __name__ == "__main__":  # the attack as whoever runs it (the ordinary-user test above)
    import sys

    os.environ["MODELWRIGHT_WORKER_DISK_MB"] = str(CAP_MB)
    main_pool = WorkerPool(size=0, test_hooks=True, prewarm=False)
    try:
        print(json.dumps(attack(main_pool, sys.argv[1])))
    finally:
        main_pool.close()
