"""Serve a tool-using vision-language model with vLLM: build the command, run it, stop it.

`build_command` turns a `ServeConfig` into the `vllm serve` argv (tool-call parser for the
model family, image limits, LoRA slots for hot-loaded adapters, prefix caching, the
profile's speed/accuracy trade-offs) without needing vLLM installed, so `--dry-run` works
everywhere. `VllmServer` starts that command in its own process group, waits for
`GET /health`, and stops the whole group: SIGTERM first so vLLM frees the GPU cleanly,
SIGKILL after a grace period for what does not listen. Hot-loading adapters into a
running server lives in `agents.serving.adapters`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agents.serving.profiles import (
    PROFILES,
    ModelFamily,
    ProfileName,
    UnknownModelFamily,
    detect_family,
    family_by_name,
    lora_rank_slot,
    read_model_info,
)

INSTALL_HINT = "vLLM is not installed; install the GPU extra: pip install -e '.[gpu]'"
RUNTIME_LORA_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
# vLLM issue #20284: n-gram speculative decoding together with LoRA crashed on concurrent
# requests (open when this was written).
SPEC_LORA_WARNING = (
    "the fast profile's n-gram speculative decoding with LoRA enabled has crashed vLLM on "
    "concurrent requests (vllm-project/vllm#20284); pass --no-lora if you serve no adapter"
)


class ServingError(RuntimeError):
    """Serving failed in a way the user can act on; the message says how."""


class VllmNotInstalled(ServingError):
    def __init__(self) -> None:
        super().__init__(INSTALL_HINT)


class ServerStartError(ServingError):
    """The server process died or never became healthy."""


@dataclass
class ServeConfig:
    """What to serve and how. Defaults suit one agent on one GPU."""

    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    adapters: dict[str, str] = field(default_factory=dict)  # name -> LoRA folder at startup
    profile: ProfileName = "full"
    family: str | None = None  # override detection (see serving_profiles.FAMILY_NAMES)
    tool_parser: str | None = None  # override the family's parser
    chat_template: str | None = None
    max_model_len: int | None = None  # default: the profile's, capped by the model's
    lora: bool = True
    max_lora_rank: int = 64  # room for adapters hot-loaded later, not only the startup ones
    max_loras: int = 2  # adapters active in one batch (the new and the previous version)
    images_per_prompt: int = 8  # the loop keeps the last K renders in context
    served_model_name: str | None = None
    extra_args: tuple[str, ...] = ()


@dataclass
class ServeCommand:
    """A ready-to-run `vllm serve` invocation and what was decided on the way."""

    argv: list[str]
    env: dict[str, str]  # added to the caller's environment
    family: ModelFamily
    tool_parser: str
    base_url: str  # the OpenAI-compatible root, ending in /v1
    warnings: list[str] = field(default_factory=list)

    def shell(self) -> str:
        """The command as one line a person can paste into a shell."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return f"{env} {shlex.join(self.argv)}".strip()


def adapter_rank(path: str | Path) -> int:
    """The LoRA rank `r` recorded in a PEFT adapter folder's adapter_config.json."""
    config_path = Path(path).expanduser() / "adapter_config.json"
    if not config_path.is_file():
        raise ServingError(
            f"{path} is not a LoRA adapter folder (no adapter_config.json); "
            "point at the folder a PEFT/TRL run saved"
        )
    return int(json.loads(config_path.read_text()).get("r", 0))


def build_command(config: ServeConfig, launcher: list[str] | None = None) -> ServeCommand:
    """The `vllm serve` command for `config`; `launcher` replaces the leading `vllm`."""
    info = read_model_info(config.model)
    if config.family:
        family = family_by_name(config.family)
    else:
        try:
            family = detect_family(config.model, info)
        except UnknownModelFamily:
            if not config.tool_parser:
                raise
            family = ModelFamily("custom", config.tool_parser)
    parser = config.tool_parser or family.tool_parser
    profile = PROFILES[config.profile]
    warnings: list[str] = []

    argv = [*(launcher or ["vllm"]), "serve", config.model]
    argv += ["--host", config.host, "--port", str(config.port)]
    if config.served_model_name:
        argv += ["--served-model-name", config.served_model_name]
    argv += ["--enable-auto-tool-choice", "--tool-call-parser", parser]
    template_note = _chat_template_note(config, family)
    if config.chat_template:
        argv += ["--chat-template", config.chat_template]
    elif template_note:
        warnings.append(template_note)

    if _is_multimodal(config.model, family, info.has_vision, info.model_type):
        # Renders are the only media; no video keeps vLLM from reserving memory for it.
        limits = {"image": config.images_per_prompt, "video": 0}
        argv += ["--limit-mm-per-prompt", json.dumps(limits, separators=(",", ":"))]

    env: dict[str, str] = {}
    if config.lora:
        ranks = [adapter_rank(p) for p in config.adapters.values()]
        rank = lora_rank_slot(max([config.max_lora_rank, *ranks]))
        argv += ["--enable-lora", "--max-lora-rank", str(rank)]
        argv += ["--max-loras", str(max(config.max_loras, len(config.adapters), 1))]
        if config.adapters:
            argv += ["--lora-modules"]
            argv += [f"{name}={_abs(path)}" for name, path in config.adapters.items()]
        env[RUNTIME_LORA_ENV] = "True"  # lets `serve load-adapter` hot-load new versions
    elif config.adapters:
        raise ServingError("--adapter needs LoRA; drop --no-lora")

    argv += ["--enable-prefix-caching"]
    max_len = config.max_model_len or profile.max_model_len
    if info.max_positions and max_len > info.max_positions:
        if config.max_model_len:
            warnings.append(
                f"--max-model-len {max_len} exceeds the model's {info.max_positions} positions"
            )
        else:
            max_len = info.max_positions
    argv += ["--max-model-len", str(max_len)]
    if profile.kv_cache_dtype:
        argv += ["--kv-cache-dtype", profile.kv_cache_dtype]
    if profile.speculative_config:
        argv += ["--speculative-config", json.dumps(profile.speculative_config)]
        if config.lora:
            warnings.append(SPEC_LORA_WARNING)
    argv += [*profile.extra_args, *config.extra_args]

    host = "127.0.0.1" if config.host in ("0.0.0.0", "::") else config.host
    base_url = f"http://{host}:{config.port}/v1"
    return ServeCommand(argv, env, family, parser, base_url, warnings)


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def _is_multimodal(
    model: str, family: ModelFamily, has_vision: bool, model_type: str | None
) -> bool:
    if model_type is not None:  # a local folder: its config knows
        return has_vision
    # Hub ids: the family, or the name (Qwen2.5-VL, Llama-3.2-Vision, Mistral Small 3.1+).
    named = re.search(r"(^|[-_/])(vl|vision)|pixtral|mistral-small-3\.[1-9]", model, re.IGNORECASE)
    return family.multimodal or bool(named)


def _chat_template_note(config: ServeConfig, family: ModelFamily) -> str | None:
    """Why `--chat-template` may be needed, or None when the model's own template will do."""
    folder = Path(config.model).expanduser()
    if folder.is_dir():
        template = _local_chat_template(folder)
        if template is None or "tools" in template:
            return None
        hint = f" (vLLM ships {family.chat_template_hint})" if family.chat_template_hint else ""
        return f"{folder}'s chat template does not render tools; pass --chat-template{hint}"
    if family.chat_template_hint:
        return (
            f"{family.name} models usually need --chat-template with vLLM's "
            f"examples/{family.chat_template_hint} to render tool turns"
        )
    return None


def _local_chat_template(folder: Path) -> str | None:
    for name in ("chat_template.jinja", "chat_template.json"):
        if (folder / name).is_file():
            return (folder / name).read_text()
    tokenizer_config = folder / "tokenizer_config.json"
    if tokenizer_config.is_file():
        template = json.loads(tokenizer_config.read_text()).get("chat_template")
        return json.dumps(template) if template is not None else None
    return None


def vllm_launcher() -> list[str]:
    """How to run vLLM's CLI in this environment; raises VllmNotInstalled without it."""
    if importlib.util.find_spec("vllm") is None:
        raise VllmNotInstalled()
    beside = Path(sys.executable).with_name("vllm")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("vllm")
    return [found] if found else [sys.executable, "-m", "vllm.entrypoints.cli.main"]


class VllmServer:
    """A `vllm serve` child process in its own process group (Ctrl-C is ours to forward)."""

    def __init__(self, command: ServeCommand):
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, **self.command.env}
        self.process = subprocess.Popen(self.command.argv, env=env, start_new_session=True)

    @property
    def health_url(self) -> str:
        return self.command.base_url.removesuffix("/v1") + "/health"

    def wait_healthy(
        self, timeout_s: float = 1800.0, poll_s: float = 1.0, cancel: threading.Event | None = None
    ) -> float:
        """Block until `/health` answers 200; returns the seconds it took.

        Loading a large model and compiling CUDA graphs takes minutes, hence the long default.
        """
        assert self.process is not None, "start() first"
        started = time.monotonic()
        with httpx.Client(timeout=5.0) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise ServerStartError(
                        f"vLLM exited with code {code} before it was healthy; its log is above"
                    )
                try:
                    if client.get(self.health_url).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass  # not listening yet
                if time.monotonic() - started > timeout_s:
                    raise ServerStartError(f"vLLM was not healthy after {timeout_s:.0f} s")
                if cancel is not None and cancel.wait(poll_s):
                    raise ServerStartError("cancelled while waiting for vLLM to start")
                if cancel is None:
                    time.sleep(poll_s)

    def wait(self) -> int:
        assert self.process is not None, "start() first"
        return self.process.wait()

    def stop(self, grace_s: float = 20.0) -> int | None:
        """Terminate the process group, kill it after `grace_s`; returns the exit code."""
        if self.process is None:
            return None
        pid = self.process.pid
        if self.process.returncode is None:
            _signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while not _exited_unreaped(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            # The leader may be gone while engine workers it spawned linger: sweep the
            # group while the unreaped leader still holds its id, so it cannot be reused.
            _signal_group(pid, signal.SIGKILL)
        return self.process.wait()


def _exited_unreaped(pid: int) -> bool:
    """Whether `pid` has exited, leaving it a zombie (so its pid and group id stay reserved)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None
    except ChildProcessError:
        return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
