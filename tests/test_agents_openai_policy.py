"""The `openai` policy against real OpenAI-compatible servers on loopback.

Whole episodes run against `transformers serve` serving the tiny local model, taught (in a
few seconds, see `tests/support/tiny_teach.py`) to answer certain goals with a valid call,
hallucinated and invalid calls, malformed JSON, or a call in a code fence; the episode
must feed every failure back and end within its budget. Retries, timeouts and a server
that is down are shown against plain loopback HTTP servers.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from PIL import Image
from support.tiny_teach import Lesson, teach_replies

from agents.loop.context import RECALL_SPEC, ContextConfig, observation
from agents.loop.episode_loop import DEFAULT_SYSTEM, LoopConfig, openai_tools, run_episode
from agents.policies import make_policy
from agents.policies.protocol import PolicyError

TOOLS = ("add_primitive", "get_scene")
CUBE = {"kind": "cube", "name": "A", "dimensions": [1, 1, 1]}
GOALS = {
    "valid": "Make a cube named A.",
    "hallucinated": "Add a hexagonal prism.",
    "malformed": "Model a bracket with two holes.",
    "fenced": "Show me the scene first.",
}
REPLIES = {
    "valid": '<tool_call>\n{"name": "add_primitive", "arguments": '
    + json.dumps(CUBE)
    + "}\n</tool_call>",
    "hallucinated": (
        '<tool_call>\n{"name": "make_prism", "arguments": {"sides": 6}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "prism", "name": "P", '
        '"dimensions": [1, 1, 1]}}\n</tool_call>'
    ),
    "malformed": '<tool_call>\n{"name": "add_primitive", "arguments": {"kind": "cube", "name": }\n</tool_call>',
    "fenced": 'I will look first.\n```json\n{"name": "get_scene", "arguments": {}}\n```',
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool_subset() -> list[dict]:
    from tools import catalogue

    return [c for c in catalogue() if c["name"] in TOOLS]


def first_prompt(goal: str, image: bool = False) -> list[dict]:
    """The messages the loop sends at step 0 of an episode (blind: no render, no scene)."""
    png = None
    if image:
        buf = io.BytesIO()
        Image.new("RGB", (64, 64), (128, 128, 128)).save(buf, "PNG")
        png = buf.getvalue()
    obs = observation(f"Goal: {goal}", png, None, ContextConfig(), -1)
    return [
        {"role": "system", "content": DEFAULT_SYSTEM},
        {k: v for k, v in obs.items() if not k.startswith("_")},
    ]


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the test process dies without its teardown."""
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@pytest.fixture(scope="module")
def served_model(tiny_model_dir, tmp_path_factory):
    """`transformers serve` on loopback with the tiny model taught the replies above."""
    tools = openai_tools(tool_subset()) + [RECALL_SPEC]
    lessons = [Lesson(first_prompt(GOALS[k]), tools, REPLIES[k]) for k in GOALS]
    # Teaching costs a forward and backward pass per step over a ~1k-token prompt: the
    # episodes run blind (no render) and with two tools so that it stays a few seconds.
    model = teach_replies(tiny_model_dir, tmp_path_factory.mktemp("taught"), lessons, steps=400)
    port = free_port()
    log = open(tmp_path_factory.mktemp("serve-log") / "serve.log", "w+")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "transformers"), "serve", str(model),
         "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base_url}/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError("serve did not start:\n" + log.read()[-3000:]) from None
                time.sleep(0.3)
        # The server loads the model on the first chat request; on a busy machine that first
        # request has been dropped (a connection error, not a reply). Load it here, so that the
        # tests' episodes measure replies, not the server's start.
        warm = make_policy("openai", base_url=base_url, max_tokens=1, max_retries=6, backoff_s=1.0)
        warm.act(first_prompt(GOALS["valid"]), openai_tools(tool_subset()))
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def episode(base_url: str, goal: str, session, max_steps: int = 3):
    policy = make_policy(
        "openai", base_url=base_url, temperature=0.0, max_tokens=72, max_retries=1, backoff_s=0.05
    )
    config = LoopConfig(max_steps=max_steps, stuck_after=2, observe="never")
    return run_episode(policy, session, goal, config=config, catalogue=tool_subset())


def test_valid_call_from_the_served_model_runs(served_model, session) -> None:
    result = episode(served_model, GOALS["valid"], session)
    first = result.steps[0]
    assert [(c.call.name, c.call.arguments, c.ok) for c in first.calls] == [
        ("add_primitive", CUBE, True)
    ]
    assert first.tokens_in > 100 and first.tokens_out > 0 and first.latency_ms > 0
    assert [o["name"] for o in session.scene()["objects"]] == ["A"]
    assert result.status in ("done", "budget", "stuck"), result.error
    assert len(result.steps) <= 3


def test_hallucinated_and_invalid_calls_are_fed_back(served_model, session) -> None:
    result = episode(served_model, GOALS["hallucinated"], session)
    first = result.steps[0]
    assert [c.call.name for c in first.calls] == ["make_prism", "add_primitive"]
    assert [c.error_kind for c in first.calls] == ["validation", "validation"]
    assert "unknown tool 'make_prism'" in first.calls[0].text
    assert "kind" in first.calls[1].text
    assert session.scene()["objects"] == []
    assert result.status in ("done", "budget", "stuck"), result.error
    assert len(result.steps) <= 3
    assert result.tool_errors >= 2


def test_malformed_json_is_fed_back_and_the_episode_ends(served_model, session) -> None:
    # transformers serve's tool parser fails (HTTP 500; 400 from 5.25) on the malformed call: the policy
    # reports it as a non-fatal error, the loop tells the model, and stops when it repeats
    result = episode(served_model, GOALS["malformed"], session)
    first = result.steps[0]
    assert first.policy_error and "not valid JSON" in first.policy_error
    assert result.status in ("stuck", "budget", "done") and len(result.steps) <= 3
    assert result.status != "fatal"


def test_the_served_model_reads_images(served_model) -> None:
    policy = make_policy("openai", base_url=served_model, temperature=0.0, max_tokens=8)
    with_image = policy.act(first_prompt(GOALS["valid"], image=True), openai_tools(tool_subset()))
    without = policy.act(first_prompt(GOALS["valid"]), openai_tools(tool_subset()))
    # the image's tokens reached the model's prompt
    assert with_image.tokens_in > without.tokens_in + 4


def test_call_written_in_a_code_fence_is_parsed(served_model, session) -> None:
    result = episode(served_model, GOALS["fenced"], session)
    first = result.steps[0]
    assert first.text == "I will look first."
    assert [(c.call.name, c.call.arguments, c.ok) for c in first.calls] == [("get_scene", {}, True)]
    assert len(result.steps) <= 3


# -- retries, timeouts and a server that is down (plain loopback HTTP servers) -------------


def completion(content: str) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers POSTs from a list of (status, body or delay) entries."""

    plan: list = []
    seen: list = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        status, payload = type(self).plan.pop(0) if type(self).plan else (200, completion("done"))
        if status == "sleep":
            time.sleep(payload)
            status, payload = 200, completion("late")
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def scripted_server():
    Scripted.plan, Scripted.seen = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_transient_errors_are_retried_with_backoff(scripted_server) -> None:
    Scripted.plan = [
        (503, {"error": {"message": "busy"}}),
        (429, {"error": {"message": "slow down"}}),
        (200, completion('<tool_call>{"name": "get_scene", "arguments": {}}</tool_call>')),
    ]
    os.environ["MW_TEST_KEY"] = "sk-test"
    policy = make_policy(
        "openai", base_url=scripted_server, model="m", api_key_env="MW_TEST_KEY", backoff_s=0.05
    )
    tools = openai_tools(tool_subset())
    start = time.monotonic()
    reply = policy.act(first_prompt("x", image=True), tools)
    assert time.monotonic() - start >= 0.05 + 0.1  # backed off twice, doubling
    assert len(Scripted.seen) == 3
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("get_scene", {})]
    assert reply.tokens_in == 11 and reply.tokens_out == 3
    sent = Scripted.seen[-1]
    assert sent["tools"][0]["function"]["name"] in TOOLS
    url = sent["messages"][1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")


def test_a_client_error_is_not_retried(scripted_server) -> None:
    Scripted.plan = [(400, {"error": {"message": "context length exceeded"}})]
    policy = make_policy("openai", base_url=scripted_server, model="m", backoff_s=0.01)
    with pytest.raises(PolicyError, match="HTTP 400") as err:
        policy.act(first_prompt("x"), [])
    assert err.value.fatal and len(Scripted.seen) == 1
    assert "context length exceeded" in str(err.value)  # the server's own words


def test_a_call_the_servers_parser_cannot_read_is_the_replys_fault(scripted_server) -> None:
    """transformers serve 5.25 answers a generated call its tool parser cannot read with a 400
    (5.24: a 500): the reply's fault, not the request's, so the episode goes on."""
    detail = ("json parser could not parse region as JSON.\nContent: '{\"name\": \"make_prism\", "
              "\"P\"}'\nError: Expecting ':' delimiter: line 2 column 27 (char 27)")
    Scripted.plan = [(400, {"detail": detail})]
    policy = make_policy("openai", base_url=scripted_server, model="m", backoff_s=0.01)
    with pytest.raises(PolicyError, match="not valid JSON") as err:
        policy.act(first_prompt("x"), [])
    assert not err.value.fatal and len(Scripted.seen) == 1
    assert "Expecting ':' delimiter" in str(err.value)


def test_timeouts_say_so(scripted_server) -> None:
    Scripted.plan = [("sleep", 1.0), ("sleep", 1.0)]
    policy = make_policy(
        "openai", base_url=scripted_server, model="m", timeout_s=0.3, max_retries=1, backoff_s=0.01
    )
    with pytest.raises(PolicyError, match="did not answer within 0.3 s"):
        policy.act(first_prompt("x"), [])


def test_server_down_is_a_clear_fatal_error(session) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    policy = make_policy("openai", base_url=url, model="m", max_retries=2, backoff_s=0.01)
    result = run_episode(
        policy, session, "a cube", config=LoopConfig(observe="never"), catalogue=tool_subset()
    )
    assert result.status == "fatal"
    assert f"cannot reach an OpenAI-compatible server at {url}" in result.error
    assert "3 tries" in result.error and "--base-url" in result.error


def test_token_ids_mode_asks_for_and_keeps_the_servers_ids_and_logprobs(scripted_server) -> None:
    """RL against a vLLM server: the reply's TurnTokens are the ids the server generated (its
    `return_token_ids` answer), never the text re-tokenised here; missing ids are an error."""
    body = completion('<tool_call>{"name": "get_scene", "arguments": {}}</tool_call>')
    body["prompt_token_ids"] = [5, 6, 7]
    body["choices"][0]["token_ids"] = [11, 12, 2]
    body["choices"][0]["logprobs"] = {"content": [
        {"token": "a", "logprob": -0.5, "bytes": None, "top_logprobs": []},
        {"token": "b", "logprob": -0.25, "bytes": None, "top_logprobs": []},
        {"token": "c", "logprob": -0.125, "bytes": None, "top_logprobs": []},
    ]}  # fmt: skip
    Scripted.plan = [(200, body), (200, completion("no ids"))]
    policy = make_policy("openai", base_url=scripted_server, model="rl-v3", token_ids=True)
    reply = policy.act(first_prompt("x"), [])
    assert Scripted.seen[0]["return_token_ids"] is True and Scripted.seen[0]["logprobs"] is True
    tok = reply.tokens
    assert (tok.prompt_ids, tok.completion_ids, tok.logprobs) == ([5, 6, 7], [11, 12, 2],
                                                                  [-0.5, -0.25, -0.125])
    assert tok.model_version == "rl-v3" and len(tok.seen) == 64
    assert [c.name for c in reply.tool_calls] == ["get_scene"]
    with pytest.raises(PolicyError, match="no token ids"):
        policy.act(first_prompt("x"), [])
