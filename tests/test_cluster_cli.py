"""`modelwright cluster up|status|down` and `eval --cluster` as a user types them: real
processes, a real Ray cluster of 2 nodes on 127.0.0.1 that outlives the command that started
it, and one line (exit 3) for a run pointed at an address where no cluster answers."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import ray  # noqa: F401  (make test installs the cluster extra: a missing Ray fails here)

UNAVAILABLE = 3


def mw(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studio.cli", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)  # fmt: skip


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The command's error: exactly one line on stderr, no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def env(tmp_path) -> dict:
    return {**os.environ, "MODELWRIGHT_CLUSTER_STATE": str(tmp_path / "cluster.json"),
            "MODELWRIGHT_DATA_DIR": str(tmp_path / "data")}  # fmt: skip


def test_up_status_eval_down_then_the_dead_address_is_one_line(env, tmp_path) -> None:
    up = mw("cluster", "up", "--nodes", "2", "--slots", "1", env=env)
    try:
        assert up.returncode == 0, up.stderr
        address = re.search(r"cluster up at (127\.0\.0\.1:\d+)", up.stdout).group(1)
        status = mw("cluster", "status", env=env)
        assert status.returncode == 0, status.stderr
        nodes = re.findall(r"node \w+\s+(\S+)\s+(alive|dead)\s+(\d+) slots", status.stdout)
        assert nodes == [("127.0.0.1", "alive", "1")] * 2, status.stdout
        assert f"cluster {address}: 2 worker slots" in status.stdout

        again = mw("cluster", "up", env=env)
        assert again.returncode != 0 and "already up" in one_line_error(again)

        report = tmp_path / "report.json"
        ev = mw("eval", "--policy", "oracle", "--families", "primitive_placement",
                "--per-family", "2", "--cluster", address, "--json", str(report), env=env)  # fmt: skip
        assert ev.returncode == 0, ev.stderr
        overall = json.loads(report.read_text())["overall"]
        assert overall["episodes"] == 2 and overall["success_rate"] == 1.0, overall
    finally:
        down = mw("cluster", "down", env=env)
    assert down.returncode == 0 and "stopped" in down.stdout, down.stderr
    assert not Path(env["MODELWRIGHT_CLUSTER_STATE"]).exists()
    assert "no cluster is up" in mw("cluster", "down", env=env).stdout

    gone = mw("eval", "--policy", "oracle", "--families", "primitive_placement",
              "--per-family", "1", "--cluster", address, env=env)  # fmt: skip
    assert gone.returncode == UNAVAILABLE
    assert one_line_error(gone).startswith(f"error: no Ray cluster at {address}")


def test_grpo_on_an_address_where_no_cluster_answers_is_one_line(env, tmp_path, tiny_model_dir) -> None:
    address = f"127.0.0.1:{closed_port()}"
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"kind: grpo\nmodel: {{path: {tiny_model_dir}}}\ntools: [add_primitive]\n"
        "run: {seed: 0, report_to: []}\n"
        "grpo: {tasks: {families: [primitive_placement], levels: [1]}, max_steps: 1,"
        " per_device_train_batch_size: 2, num_generations: 2, max_turns: 1,"
        f" generation: server, rollouts: {{backend: ray, cluster: '{address}'}}}}\n"
    )
    proc = mw("train", "grpo", "--config", str(cfg), "--out", str(tmp_path / "run"), env=env)
    assert proc.returncode == UNAVAILABLE, proc.stderr
    line = one_line_error(proc)
    assert line.startswith(f"error: no Ray cluster at {address} (nothing answers there")
    assert "modelwright cluster up" in line
    status = mw("cluster", "status", "--address", address, env=env)
    assert status.returncode == UNAVAILABLE
    assert one_line_error(status).startswith(f"error: no Ray cluster at {address}")


def test_a_start_that_hangs_is_stopped_tried_again_and_one_line(env, tmp_path) -> None:
    """A keeper still starting after its share of `--timeout` writes where it waited to its log
    and stops; `up` tries once more, then says so in one line naming the log, and leaves no
    keeper running and no cluster noted. (0.2 s is shorter than any Ray start.)"""
    import psutil

    up = mw("cluster", "up", "--nodes", "1", "--timeout", "0.2", env=env)
    assert up.returncode == 2
    log = tmp_path / "cluster.log"
    assert one_line_error(up) == ("error: the cluster did not start: a Ray node did not start "
                                  f"within 0.1 s (its log: {log})")  # fmt: skip
    text = log.read_text()
    assert text.count("where the start waited after 0.1 s:") == 2  # both tries
    assert "keep" in text  # the stack of the waiting start: the keeper's own frames
    assert not (tmp_path / "cluster.json").exists()
    mine = [p for p in psutil.process_iter(["cmdline"])
            if "training.eval.cluster" in (p.info["cmdline"] or [])
            and "0.1" in (p.info["cmdline"] or [])]  # fmt: skip
    assert mine == []
    assert "no cluster is up" in mw("cluster", "down", env=env).stdout


def test_a_deep_waiting_stack_keeps_its_outer_frames_where_the_start_waited() -> None:
    """The hung keeper's dump: a thread caught deep (here 300 calls, as inside nested imports)
    still shows its outermost frames, then how many were left out, then the innermost ones."""
    import sys
    import threading

    from training.eval.cluster import waiting_stacks

    inside, release = threading.Event(), threading.Event()

    def deep(n: int) -> None:
        if n:
            return deep(n - 1)
        inside.set()
        release.wait()

    def the_keepers_start() -> None:
        deep(300)

    thread = threading.Thread(target=the_keepers_start)
    thread.start()
    try:
        assert inside.wait(30)
        text = waiting_stacks(sys._current_frames(), threading.get_ident(), head=12, tail=30)
    finally:
        release.set()
        thread.join()
    mine = text[text.index(f"Thread {thread.ident:#x}"):]
    assert "in the_keepers_start" in mine  # an outer frame, which faulthandler would have cut
    assert "frames left out" in mine and "release.wait()" in mine  # and the innermost ones
    assert f"Thread {threading.get_ident():#x}" not in text  # not the thread that asked
