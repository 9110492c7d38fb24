"""Modelwright's tasks over OpenEnv's protocol (training/envs/openenv_server.py), driven over
real HTTP and WebSocket on loopback: the same calls give `modelwright eval`'s rewards, each
episode has a fresh worker, a forged call earns its honest twin's reward, and bad input is
one error while the server goes on serving."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner
from websockets.sync.client import connect

from tests.security.test_trust_rewards import (
    BENIGN,
    FORGE_OK,
    MISSES,
    TASK,
    _via_eval,
    hostile,
    script,
)
from tests.test_envs import CALLS, _eval_cli
from tools import ToolSession
from training.envs.core import EpisodeEnv
from training.envs.openenv_server import Background, EnvServer
from training.tasks import get_task

# openenv-core is not the product's (gradio, fastmcp); the verifiers venv has it (`make envs-venv`)
VF = Path(os.environ.get("MODELWRIGHT_VF_VENV", Path(__file__).resolve().parent.parent / ".venv-vf"))
HAS_OPENENV = any(VF.glob("lib/python3.*/site-packages/openenv/core/generic_client.py"))


@pytest.fixture(scope="module")
def server(worker_pool):
    srv = EnvServer(["requests", "scene_editing", "primitive_placement"], [1, 2], max_steps=8,
                    session_factory=lambda: ToolSession(worker_pool))  # fmt: skip
    with Background(srv) as bg:
        yield bg


class WS:
    """OpenEnv's WebSocket session protocol, by hand: {"type", "data"} both ways."""

    def __init__(self, url: str) -> None:
        self.conn = connect(url.replace("http://", "ws://") + "/ws", max_size=2**26)

    def send(self, kind: str, data=None) -> dict:
        self.conn.send(json.dumps({"type": kind, **({"data": data} if data is not None else {})}))
        return json.loads(self.conn.recv(timeout=900))

    def raw(self, text: str) -> dict:
        self.conn.send(text)
        return json.loads(self.conn.recv(timeout=900))

    def reset(self, **kw) -> dict:
        msg = self.send("reset", kw)
        assert msg["type"] == "observation", msg
        return msg["data"]

    def step(self, calls: list[dict], content: str | None = None) -> dict:
        msg = self.send("step", {"tool_calls": calls, **({"content": content} if content else {})})
        assert msg["type"] == "observation", msg
        return msg["data"]

    def close(self) -> None:
        self.conn.send(json.dumps({"type": "close"}))
        self.conn.close()


def _episode_ws(ws: WS, task_id: str, calls: list[dict]) -> dict:
    """reset, one step per call, then a step with no call: the last answer."""
    first = ws.reset(task_id=task_id)
    assert first["done"] is False and first["reward"] is None
    assert first["observation"]["task_id"] == task_id and first["observation"]["tools"]
    for call in calls:
        out = ws.step([call])
        assert out["done"] is False and out["reward"] is None and out["observation"]["text"]
    return ws.step([])


def test_the_server_scores_as_eval_does_over_websocket_and_http(server, tmp_path):
    report = _eval_cli(tmp_path, "requests,scene_editing", 2)
    by_task = {e["task"]: e for e in report["episodes"]}
    assert len(by_task) == 4
    keys = ("reward", "success", "components", "steps", "calls", "tool_errors")
    ws = WS(server.url)
    for task_id, ours in by_task.items():
        last = _episode_ws(ws, task_id, CALLS)
        assert last["done"] is True and last["reward"] == ours["reward"], task_id
        record = last["observation"]["record"]
        assert {k: record[k] for k in keys} == {k: ours[k] for k in keys}, task_id
    ws.close()
    assert len({e["reward"] for e in by_task.values()}) > 1  # not one constant compared

    # plain HTTP: reset opens a session named by its episode_id, step names it
    task_id, ours = next(iter(by_task.items()))
    with httpx.Client(base_url=server.url, timeout=900) as http:
        first = http.post("/reset", json={"task_id": task_id, "episode_id": "http-1"}).json()
        assert first["observation"]["episode_id"] == "http-1" and first["done"] is False
        for call in CALLS:
            out = http.post("/step", json={"action": {"tool_calls": [call]}, "episode_id": "http-1"})
            assert out.status_code == 200 and out.json()["reward"] is None
        state = http.get("/state", params={"episode_id": "http-1"}).json()
        assert state["step_count"] == len(CALLS) and state["task_id"] == task_id
        last = http.post("/step", json={"action": {"tool_calls": []}, "episode_id": "http-1"}).json()
        assert last["done"] is True and last["reward"] == ours["reward"]
        # the session closed with its episode
        gone = http.post("/step", json={"action": {"tool_calls": []}, "episode_id": "http-1"})
        assert gone.status_code == 404 and gone.json()["data"]["code"] == "SESSION_ERROR"


def test_each_episode_has_a_fresh_worker(server):
    ws = WS(server.url)
    opened = ws.reset(task_id=TASK)["observation"]
    first = opened["text"]
    assert "Box" not in first
    made = ws.step([CALLS[0]])["observation"]["text"]
    assert "Box" in made
    assert ws.step([])["done"] is True
    reopened = ws.reset(task_id=TASK)["observation"]
    again = reopened["text"]
    assert again == first and "Box" not in again
    assert reopened["episode_id"] != opened["episode_id"]  # an episode, not the connection
    ws.close()
    # a second connection is a second session, its own episode
    other = WS(server.url)
    assert other.reset(task_id=TASK)["observation"]["text"] == first
    other.close()


def test_a_forged_call_earns_its_honest_twins_reward_through_the_server(server, worker_pool):
    oracle = [dict(c) for c in get_task(TASK).oracle]
    ws = WS(server.url)
    rewards = {}
    for tag, code in (("forged", hostile(FORGE_OK)), ("honest", BENIGN)):
        plan = [script(code), *MISSES, *oracle]
        last = _episode_ws(ws, TASK, [{"name": c["tool"], "arguments": c["args"]} for c in plan])
        rec = last["observation"]["record"]
        rewards[tag] = (last["reward"], rec["success"], rec["components"])
    ws.close()
    assert rewards["forged"] == rewards["honest"]
    honest_eval, _ = _via_eval([script(BENIGN), *MISSES, *oracle], worker_pool)
    assert rewards["honest"][0] == honest_eval[0]
    assert rewards["honest"][2]["validity"] < 1.0


def test_bad_input_is_one_error_and_the_server_goes_on(server):
    ws = WS(server.url)
    errors = [
        ws.raw("{not json"),
        ws.send("launch"),
        ws.send("step", {"tool_calls": [CALLS[0]]}),  # before reset
        ws.send("reset", {"task_id": "nosuch:1:0"}),
        ws.send("reset", {"family": "nosuch"}),
        ws.send("reset", {"task_id": TASK, "colour": "red"}),
    ]
    codes = [e["data"]["code"] for e in errors]
    assert all(e["type"] == "error" and e["data"]["message"] and "\n" not in e["data"]["message"]
               for e in errors), errors  # fmt: skip
    assert codes == ["INVALID_JSON", "UNKNOWN_TYPE", "SESSION_ERROR", "VALIDATION_ERROR",
                     "VALIDATION_ERROR", "VALIDATION_ERROR"]  # fmt: skip
    assert "nosuch" in errors[3]["data"]["message"]
    # the same session still works: a drawn task (seeded: the same seed, the same task)
    drawn = ws.reset(family="requests", level=1, seed=3)["observation"]["task_id"]
    assert drawn.startswith("requests:1:") and ws.reset(family="requests", level=1, seed=3)[
        "observation"]["task_id"] == drawn  # fmt: skip
    bad = ws.send("step", {"tool_calls": [{"arguments": {}}]})
    assert bad["type"] == "error" and "name" in bad["data"]["message"]
    # a malformed call is the model's mistake: the tool's error, as in eval, and the episode goes on
    out = ws.step([{"name": "add_primitive", "arguments": {"kind": "cube"}}])
    assert out["done"] is False and "name" in out["observation"]["text"].lower()
    assert ws.step([])["done"] is True
    assert ws.send("step", {"tool_calls": []})["data"]["code"] == "SESSION_ERROR"  # after the end
    assert ws.send("state")["data"]["done"] is True
    ws.close()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.get("/health").json() == {"status": "healthy"}
        r = http.post("/step", json={"action": {"tool_calls": []}})
        assert r.status_code == 409 and r.json()["data"]["code"] == "SESSION_ERROR"
        r = http.post("/reset", content=b"[1, 2")
        assert r.status_code == 422 and r.json()["type"] == "error"
        r = http.post("/step", json={"action": {"tool_calls": "delete everything"}, "episode_id": "x"})
        assert r.status_code in (400, 404) and r.json()["type"] == "error"
        schema = http.get("/schema").json()
        assert set(schema) == {"action", "observation", "state"}
        assert "tool_calls" in schema["action"]["properties"]
        assert {"done", "reward", "metadata"} <= set(schema["observation"]["properties"])
        assert http.get("/metadata").json()["name"] == "modelwright"


def test_serve_refuses_bad_options_in_one_line():
    from studio.cli import build_app

    for args, word in ((["--families", "nosuch"], "nosuch"), (["--levels", "9"], "--levels"),
                       (["--split", "sometimes"], "sometimes")):  # fmt: skip
        res = CliRunner().invoke(build_app(), ["envs", "serve", *args])
        assert res.exit_code == 2, res.output
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0], res.output


def test_sessions_are_bounded_idle_http_ones_make_room_and_budgets_end_episodes(worker_pool):
    """Each session may hold a worker: past --max-sessions a new one is refused, until an HTTP
    session nobody touched for the idle time is closed to make room. A spent budget ends an
    episode with its reward."""
    srv = EnvServer(["primitive_placement"], [1], max_sessions=1, idle_s=3600, max_steps=1,
                    session_factory=lambda: ToolSession(worker_pool))  # fmt: skip
    with Background(srv) as bg, httpx.Client(base_url=bg.url, timeout=900) as http:
        assert http.post("/reset", json={"task_id": TASK, "episode_id": "a"}).status_code == 200
        full = http.post("/reset", json={"task_id": TASK, "episode_id": "b"})
        assert full.status_code == 503 and full.json()["data"]["code"] == "CAPACITY_REACHED"
        refused = json.loads(WS(bg.url).conn.recv(timeout=60))  # then the socket closes
        assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED"
        srv.idle_s = 0.0  # from now on, "a" counts as abandoned
        assert http.post("/reset", json={"task_id": TASK, "episode_id": "b"}).status_code == 200
        gone = http.post("/step", json={"action": {"tool_calls": []}, "episode_id": "a"})
        assert gone.status_code == 404
        last = http.post("/step", json={"action": {"tool_calls": []}, "episode_id": "b"}).json()
        assert last["done"] is True and last["reward"] is not None
        # a budget of one step: the step that spends it ends the episode and carries the reward
        http.post("/reset", json={"task_id": TASK, "episode_id": "c"})
        spent = http.post("/step", json={"action": {"tool_calls": [CALLS[0]]}, "episode_id": "c"}).json()
        assert spent["done"] is True and spent["observation"]["record"]["steps"] == 1
        assert spent["reward"] == spent["observation"]["record"]["reward"]


OPENENV_CLIENT = """
import json, sys
from openenv import GenericEnvClient
url, task, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
seen = []
with GenericEnvClient(base_url=url).sync() as env:
    r = env.reset(task_id=task)
    seen.append([r.done, r.reward, r.observation["task_id"], len(r.observation["tools"])])
    for call in calls:
        r = env.step({"tool_calls": [call]})
        seen.append([r.done, r.reward])
    state = env.state()
    r = env.step({"tool_calls": []})
    seen.append([r.done, r.reward])
print(json.dumps({"seen": seen, "state": state, "record": r.observation["record"]}))
"""


@pytest.mark.skipif(not HAS_OPENENV, reason=f"openenv-core is not in {VF}: `make envs-venv` installs it "
                    "(docs/ENVIRONMENTS.md)")  # fmt: skip
def test_openenvs_own_client_drives_the_server(server, worker_pool):
    """openenv-core 0.3.0's GenericEnvClient (its WebSocket session) gets the same reward and
    record as EpisodeEnv for the same calls."""
    res = subprocess.run([str(VF / "bin" / "python"), "-c", OPENENV_CLIENT, server.url, TASK,
                          json.dumps(CALLS)], capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    env = EpisodeEnv(max_steps=8, session_factory=lambda: ToolSession(worker_pool))
    env.reset(TASK)
    for call in CALLS:
        env.step(call)
    record = env.finish()
    assert got["seen"][0][:3] == [False, None, TASK] and got["seen"][0][3] == len(env.tools)
    assert got["seen"][1:-1] == [[False, None]] * len(CALLS)
    assert got["seen"][-1] == [True, record["reward"]]
    assert got["state"]["step_count"] == len(CALLS) and got["state"]["done"] is False
    keys = ("reward", "success", "components", "steps", "calls", "tool_errors")
    assert {k: got["record"][k] for k in keys} == {k: record[k] for k in keys}


def test_envs_serve_listens_says_where_and_stops_on_ctrl_c(tmp_path):
    """The command as a user runs it: the URL on stdout once it listens, a taken port is one
    line (exit 3), Ctrl-C stops it (exit 130, no traceback). It starts no worker until a reset asks for one."""
    import signal
    import socket
    import sys

    exe = [sys.executable, "-m", "studio.cli", "envs", "serve", "--families", "requests", "--levels", "1"]
    proc = subprocess.Popen([*exe, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
        assert httpx.get(f"{url}/health", timeout=60).json() == {"status": "healthy"}
        meta = httpx.get(f"{url}/metadata", timeout=60).json()
        assert meta["families"] == ["requests"] and meta["levels"] == [1] and meta["system_prompt"]
        port = int(url.rsplit(":", 1)[1])
        taken = subprocess.run([*exe, "--port", str(port)], capture_output=True, text=True, timeout=600)
        assert taken.returncode == 3
        lines = taken.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: cannot listen on") and str(port) in lines[0]
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    err = proc.stderr.read()
    assert code == 130 and "Traceback" not in err, err  # tools/cli/exits.py: 130 is Ctrl-C
    with socket.socket() as s:  # the port is free again
        s.bind(("127.0.0.1", port))
