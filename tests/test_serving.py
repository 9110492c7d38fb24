"""`modelwright serve`: vLLM flags per model family, the server's lifecycle, adapter hot-loading.

vLLM cannot run on this CPU machine, so the lifecycle tests launch a stand-in server
through `--vllm-bin` (a real process in its own group, with a real /health endpoint and a
grandchild) and the adapter tests talk to a real HTTP server on loopback.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from agents.serving.adapters import AdapterLoadError, AdapterRegistry, load_adapter
from agents.serving.server import (
    INSTALL_HINT,
    RUNTIME_LORA_ENV,
    ServeConfig,
    ServerStartError,
    VllmServer,
    build_command,
)

REPO = Path(__file__).resolve().parents[1]


def _app() -> typer.Typer:
    from studio.cli import build_app

    return build_app()  # the whole app: its one error handler sets the exit codes


def _dry_run(*args: str) -> tuple[list[str], str, str]:
    """argv of the printed command (env assignments split off), the env text, stderr."""
    result = CliRunner().invoke(_app(), ["serve", *args, "--dry-run"])
    assert result.exit_code == 0, result.output
    words = shlex.split(result.stdout.strip())
    env = " ".join(w for w in words if "=" in w and w.split("=")[0].isupper())
    return [w for w in words if w not in env.split()], env, result.stderr


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.parametrize(
    ("model", "parser", "multimodal", "needs_template"),
    [
        ("Qwen/Qwen3-VL-8B-Instruct", "hermes", True, False),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "hermes", True, False),
        ("Qwen/Qwen2.5-7B-Instruct", "hermes", False, False),
        ("Qwen/Qwen3.5-27B", "qwen3_coder", True, False),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder", False, False),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json", False, True),
        ("meta-llama/Llama-3.2-11B-Vision-Instruct", "llama3_json", True, True),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4_pythonic", True, True),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral", False, False),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral", True, False),
        ("google/gemma-3-4b-it", "pythonic", True, True),
        ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes", False, False),
    ],
)
def test_dry_run_flags_per_family(model, parser, multimodal, needs_template):
    argv, env, stderr = _dry_run("--model", model)
    assert argv[:3] == ["vllm", "serve", model]
    assert "--enable-auto-tool-choice" in argv
    assert _flag(argv, "--tool-call-parser") == parser
    assert "--enable-prefix-caching" in argv
    assert "--enable-lora" in argv and _flag(argv, "--max-lora-rank") == "64"
    assert f"{RUNTIME_LORA_ENV}=True" in env
    limits = _flag(argv, "--limit-mm-per-prompt")
    if multimodal:
        assert json.loads(limits) == {"image": 8, "video": 0}
    else:
        assert limits is None
    assert ("--chat-template" in stderr) == needs_template
    # the full profile neither speculates nor quantises the cache
    assert "--speculative-config" not in argv and "--kv-cache-dtype" not in argv
    assert _flag(argv, "--max-model-len") == "32768"


def test_fast_profile_adds_speculation_fp8_cache_short_context():
    argv, _, stderr = _dry_run("--model", "Qwen/Qwen3-VL-8B-Instruct", "--profile", "fast")
    spec = json.loads(_flag(argv, "--speculative-config"))
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] >= 1
    assert spec["prompt_lookup_min"] <= spec["prompt_lookup_max"]
    assert _flag(argv, "--kv-cache-dtype") == "fp8"
    assert _flag(argv, "--max-model-len") == "8192"
    assert "20284" in stderr  # the known LoRA + n-gram crash is pointed out
    argv, env, stderr = _dry_run(
        "--model", "Qwen/Qwen3-VL-8B-Instruct", "--profile", "fast", "--no-lora"
    )
    assert "--enable-lora" not in argv and env == "" and "20284" not in stderr


def test_unknown_family_needs_a_parser_and_bad_profile_is_refused():
    result = CliRunner().invoke(_app(), ["serve", "--model", "acme/widget-7b", "--dry-run"])
    assert result.exit_code == 2 and "--tool-parser" in result.stderr
    argv, _, _ = _dry_run("--model", "acme/widget-7b", "--tool-parser", "pythonic")
    assert _flag(argv, "--tool-call-parser") == "pythonic"
    argv, _, _ = _dry_run("--model", "acme/widget-7b", "--family", "llama3")
    assert _flag(argv, "--tool-call-parser") == "llama3_json"
    result = CliRunner().invoke(_app(), ["serve", "--model", "Qwen/Qwen3-8B", "--profile", "turbo"])
    assert result.exit_code == 2 and "full or fast" in result.stderr


def _local_model(root: Path, model_type: str, template: str, vision: bool, positions: int) -> Path:
    root.mkdir(parents=True)
    config = {"model_type": model_type, "text_config": {"max_position_embeddings": positions}}
    if vision:
        config["vision_config"] = {"depth": 2}
    (root / "config.json").write_text(json.dumps(config))
    (root / "chat_template.jinja").write_text(template)
    return root


def test_local_folder_is_read_from_its_config(tmp_path):
    # a folder name that says nothing: config.json decides family, vision and context
    folder = _local_model(
        tmp_path / "ckpt-0042", "qwen3_vl", "{% if tools %}x{% endif %}", True, 4096
    )
    argv, _, stderr = _dry_run("--model", str(folder))
    assert _flag(argv, "--tool-call-parser") == "hermes"
    assert json.loads(_flag(argv, "--limit-mm-per-prompt"))["image"] == 8
    assert _flag(argv, "--max-model-len") == "4096"  # capped at the model's positions
    assert "warning" not in stderr
    text_only = _local_model(tmp_path / "plain", "llama", "{{ messages }}", False, 131072)
    argv, _, stderr = _dry_run("--model", str(text_only), "--images", "2")
    assert _flag(argv, "--tool-call-parser") == "llama3_json"
    assert "--limit-mm-per-prompt" not in argv
    assert "does not render tools" in stderr
    argv, _, _ = _dry_run("--model", str(text_only), "--chat-template", "/t/tool.jinja")
    assert _flag(argv, "--chat-template") == "/t/tool.jinja"


def test_tiny_model_from_dev_command_serves_as_qwen3_vl(tiny_model_dir):
    argv, _, stderr = _dry_run("--model", str(tiny_model_dir), "--port", "8123")
    assert _flag(argv, "--tool-call-parser") == "hermes"
    assert _flag(argv, "--port") == "8123"
    assert "--limit-mm-per-prompt" in argv and "warning" not in stderr


def _adapter(path: Path, rank: int) -> Path:
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    return path


def test_startup_adapters_set_lora_modules_and_rank_slot(tmp_path):
    small, big = _adapter(tmp_path / "a", 16), _adapter(tmp_path / "b", 96)
    argv, _, _ = _dry_run(
        "--model",
        "Qwen/Qwen3-VL-8B-Instruct",
        "--adapter",
        f"sft={small}",
        "--adapter",
        f"grpo={big}",
    )
    start = argv.index("--lora-modules")
    assert argv[start + 1 : start + 3] == [f"sft={small}", f"grpo={big}"]
    assert _flag(argv, "--max-lora-rank") == "128"  # 96 rounded up to a rank vLLM accepts
    result = CliRunner().invoke(
        _app(), ["serve", "--model", "Qwen/Qwen3-8B", "--adapter", "nopath"]
    )
    assert result.exit_code == 2 and "NAME=PATH" in result.output
    result = CliRunner().invoke(
        _app(), ["serve", "--model", "Qwen/Qwen3-8B", "--adapter", f"x={tmp_path}", "--dry-run"]
    )
    assert result.exit_code == 2 and "adapter_config.json" in result.stderr


def test_without_vllm_serve_says_how_to_install_in_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "studio.cli", "serve", "--model", "Qwen/Qwen3-VL-8B-Instruct"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if importlib.util.find_spec("vllm") is None:
        assert proc.returncode == 3  # unavailable (tools/cli/exits.py)
        assert proc.stderr.strip().splitlines() == [f"error: {INSTALL_HINT}"]
        assert "pip install -e '.[gpu]'" in proc.stderr and proc.stdout == ""
    else:  # on a machine with the gpu extra the same command gets as far as starting vLLM
        assert INSTALL_HINT not in proc.stderr


# --- lifecycle, against a stand-in for `vllm serve` -------------------------------------------

STANDIN = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    report = os.environ["STANDIN_REPORT"]
    if os.environ.get("STANDIN_EXIT"):
        sys.exit(int(os.environ["STANDIN_EXIT"]))
    if os.environ.get("STANDIN_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(report, "w") as f:
        json.dump({"argv": args, "pid": os.getpid(), "grandchild": grandchild.pid,
                   "lora_env": os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING")}, f)
    time.sleep(float(os.environ.get("STANDIN_DELAY", "0")))
    class Health(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_gone(pid: int, timeout_s: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def standin(tmp_path):
    script = tmp_path / "standin_vllm.py"
    script.write_text(STANDIN)
    report = tmp_path / "report.json"
    return {"launcher": [sys.executable, str(script)], "report": report}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# "ignored": started as a script's background job is (the shell ignores SIGINT there, and
# Python keeps an inherited SIG_IGN); `kill -INT` must still stop the server and its group.
@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_serve_waits_for_health_prints_endpoint_and_ctrl_c_stops_the_group(standin, tmp_path,
                                                                           inherited):  # fmt: skip
    port = _free_port()
    env = {**os.environ, "STANDIN_REPORT": str(standin["report"]), "STANDIN_DELAY": "1.5"}
    cmd = [sys.executable, "-m", "studio.cli", "serve", "--model", "Qwen/Qwen3-VL-8B-Instruct"]
    cmd += ["--port", str(port), "--vllm-bin", " ".join(standin["launcher"])]
    cmd += ["--health-timeout", "60"]  # a stand-in that never gets healthy fails, not hangs
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ignore_sigint if inherited == "ignored" else None,
    )
    try:
        line = proc.stdout.readline()  # blocks until the CLI saw /health answer
        assert f"http://127.0.0.1:{port}/v1" in line and "hermes" in line, line
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        report = json.loads(standin["report"].read_text())
        assert report["lora_env"] == "True"
        assert report["argv"][:2] == ["serve", "Qwen/Qwen3-VL-8B-Instruct"]
        assert _alive(report["pid"]) and _alive(report["grandchild"])
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert _wait_gone(report["pid"]) and _wait_gone(report["grandchild"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_kills_a_server_that_ignores_sigterm(standin, monkeypatch):
    monkeypatch.setenv("STANDIN_REPORT", str(standin["report"]))
    monkeypatch.setenv("STANDIN_IGNORE_TERM", "1")
    command = build_command(ServeConfig("Qwen/Qwen3-8B", port=_free_port()), standin["launcher"])
    server = VllmServer(command)
    server.start()
    try:
        server.wait_healthy(timeout_s=120, poll_s=0.1)
        report = json.loads(standin["report"].read_text())
        assert server.stop(grace_s=1.0) == -signal.SIGKILL  # escalated: TERM is ignored
        assert _wait_gone(report["grandchild"])
    finally:
        server.stop(grace_s=0)


def test_wait_healthy_reports_a_server_that_died(standin, monkeypatch):
    monkeypatch.setenv("STANDIN_REPORT", str(standin["report"]))
    monkeypatch.setenv("STANDIN_EXIT", "3")
    command = build_command(ServeConfig("Qwen/Qwen3-8B", port=_free_port()), standin["launcher"])
    server = VllmServer(command)
    server.start()
    with pytest.raises(ServerStartError, match="code 3"):
        server.wait_healthy(timeout_s=120, poll_s=0.1)
    assert server.stop() == 3


# --- adapter hot-loading, against a loopback HTTP server --------------------------------------


class AdapterServer:
    """A loopback HTTP server with vLLM's adapter endpoints and an adapter table."""

    def __init__(self, status: int = 200, listed: tuple[str, ...] = ()):
        self.requests: list[dict] = []
        self.loaded: list[str] = list(listed)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, code: int, body: str, ctype: str = "text/plain") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                models = [{"id": "base-model"}] + [{"id": n} for n in outer.loaded]
                self._reply(200, json.dumps({"object": "list", "data": models}), "application/json")

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(
                    {
                        "path": self.path,
                        "ctype": self.headers["Content-Type"],
                        "body": json.loads(raw),
                    }
                )
                name = outer.requests[-1]["body"]["lora_name"]
                if status != 200:
                    return self._reply(status, f"cannot load {name}: bad rank")
                if self.path == "/v1/load_lora_adapter":
                    outer.loaded.append(name)
                    return self._reply(200, f"Success: LoRA adapter '{name}' added successfully.")
                if self.path == "/v1/unload_lora_adapter" and name in outer.loaded:
                    outer.loaded.remove(name)
                    return self._reply(200, f"Success: LoRA adapter '{name}' removed successfully.")
                self._reply(404, "not found")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> AdapterServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_load_adapter_request_shape_and_fresh_versions(tmp_path):
    adapter = _adapter(tmp_path / "run1" / "final", 16)
    registry = AdapterRegistry(tmp_path / "registry.json")
    with AdapterServer() as server:
        first = load_adapter(server.url + "/v1/", "scene", adapter, registry=registry)
        second = load_adapter(server.url, "scene", adapter, registry=registry)
    assert (first.served_name, second.served_name) == ("scene-v1", "scene-v2")
    assert server.requests == [
        {
            "path": "/v1/load_lora_adapter",
            "ctype": "application/json",
            "body": {"lora_name": f"scene-v{i}", "lora_path": str(adapter.resolve())},
        }
        for i in (1, 2)
    ]
    recorded = json.loads((tmp_path / "registry.json").read_text())[server.url]["scene"]
    assert [e["served_name"] for e in recorded] == ["scene-v1", "scene-v2"]


def test_versions_continue_past_what_the_server_lists_and_old_ones_unload(tmp_path):
    adapter = _adapter(tmp_path / "ad", 8)
    registry = AdapterRegistry(tmp_path / "registry.json")  # empty: a new machine
    with AdapterServer(listed=("scene-v7", "other-v9")) as server:
        loaded = load_adapter(server.url, "scene", adapter, registry=registry, unload_previous=True)
        assert loaded.served_name == "scene-v8" and loaded.unloaded == ("scene-v7",)
        assert server.loaded == ["other-v9", "scene-v8"]
    assert [r["path"] for r in server.requests] == [
        "/v1/load_lora_adapter",
        "/v1/unload_lora_adapter",
    ]


def test_load_adapter_cli(tmp_path, monkeypatch):
    adapter = _adapter(tmp_path / "ad", 8)
    monkeypatch.setenv("MODELWRIGHT_ADAPTER_REGISTRY", str(tmp_path / "reg.json"))
    with AdapterServer() as server:
        args = ["serve", "load-adapter", "policy", str(adapter), "--base-url", server.url]
        result = CliRunner().invoke(_app(), args)
        assert result.exit_code == 0, result.output
        assert "as policy-v1" in result.stdout
        result = CliRunner().invoke(_app(), args)
        assert "as policy-v2" in result.stdout
    assert [r["body"]["lora_name"] for r in server.requests] == ["policy-v1", "policy-v2"]


def test_load_adapter_errors_are_actionable_and_not_recorded(tmp_path):
    adapter = _adapter(tmp_path / "ad", 8)
    registry = AdapterRegistry(tmp_path / "registry.json")
    with AdapterServer(status=400) as server:
        with pytest.raises(AdapterLoadError, match="HTTP 400.*bad rank"):
            load_adapter(server.url, "scene", adapter, registry=registry)
    with AdapterServer(status=404) as server:
        with pytest.raises(AdapterLoadError, match=RUNTIME_LORA_ENV):
            load_adapter(server.url, "scene", adapter, registry=registry)
    with pytest.raises(AdapterLoadError, match="no vLLM server answers"):
        load_adapter(f"http://127.0.0.1:{_free_port()}", "scene", adapter, registry=registry)
    with pytest.raises(AdapterLoadError, match="adapter name"):
        load_adapter("http://127.0.0.1:1", "bad name", adapter, registry=registry)
    assert not registry.path.exists()
