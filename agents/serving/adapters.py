"""Hot-load LoRA adapters into a running vLLM server under fresh, versioned names.

vLLM keys its prefix cache and its adapter table by the adapter's name: loading new
weights under a name it has seen can serve stale cached blocks computed with the old
weights. So every load gets a new name, `NAME-vN`, with N one past the highest version
this machine has loaded into that server (a small JSON registry) or that the server
already lists in `/v1/models` (so a lost registry or a second machine cannot reuse a name).
The server must run with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (`modelwright serve` sets it).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agents.serving.server import RUNTIME_LORA_ENV, ServingError, adapter_rank

REGISTRY_ENV = "MODELWRIGHT_ADAPTER_REGISTRY"


class AdapterLoadError(ServingError):
    """The server refused or could not be asked to load an adapter."""


def server_root(base_url: str) -> str:
    """`http://host:port` from a base URL given with or without `/v1` and trailing slashes."""
    return base_url.rstrip("/").removesuffix("/v1").rstrip("/")


def default_registry_path() -> Path:
    env = os.environ.get(REGISTRY_ENV)
    if env:
        return Path(env)
    from platformdirs import user_state_dir

    return Path(user_state_dir("modelwright")) / "served_adapters.json"


@dataclass
class AdapterRegistry:
    """Which adapter versions this machine loaded into which server, persisted as JSON."""

    path: Path = field(default_factory=default_registry_path)

    def _read(self) -> dict[str, dict[str, list[dict]]]:
        if not self.path.is_file():
            return {}
        return json.loads(self.path.read_text())

    def versions(self, base_url: str, name: str) -> list[dict]:
        return self._read().get(server_root(base_url), {}).get(name, [])

    def record(self, base_url: str, name: str, version: int, lora_path: str) -> None:
        data = self._read()
        entries = data.setdefault(server_root(base_url), {}).setdefault(name, [])
        entries.append(
            {
                "version": version,
                "served_name": versioned_name(name, version),
                "path": lora_path,
                "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Atomic replace: a crash mid-write must not leave a registry that reuses names.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".adapters-", suffix=".json")
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)


def versioned_name(name: str, version: int) -> str:
    return f"{name}-v{version}"


@dataclass(frozen=True)
class LoadedAdapter:
    name: str
    served_name: str  # pass this as `model` in chat requests
    version: int
    path: str
    unloaded: tuple[str, ...] = ()


def _served_versions(client: httpx.Client, root: str, name: str) -> list[int]:
    """Versions of `name` the server lists; empty when it cannot be asked."""
    try:
        response = client.get(f"{root}/v1/models")
        ids = [m.get("id", "") for m in response.json().get("data", [])]
    except (httpx.HTTPError, ValueError, AttributeError):
        return []
    pattern = re.compile(rf"^{re.escape(name)}-v(\d+)$")
    return [int(m.group(1)) for i in ids if (m := pattern.match(i))]


def load_adapter(
    base_url: str,
    name: str,
    path: str | Path,
    registry: AdapterRegistry | None = None,
    api_key: str | None = None,
    unload_previous: bool = False,
    check_path: bool = True,
    timeout_s: float = 300.0,
) -> LoadedAdapter:
    """POST /v1/load_lora_adapter with a fresh `NAME-vN`; records it on success.

    `check_path=False` skips the local adapter_config.json check, for a server on another
    machine whose paths do not exist here. `unload_previous` frees the older versions of
    `name` this registry loaded (a request still naming one of them will then fail).
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise AdapterLoadError(f"adapter name {name!r}: use letters, digits, '_', '.', '-'")
    lora_path = str(Path(path).expanduser().resolve()) if check_path else str(path)
    if check_path:
        adapter_rank(lora_path)  # raises when the folder is not an adapter
    registry = registry or AdapterRegistry()
    root = server_root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=timeout_s, headers=headers) as client:
        known = [e["version"] for e in registry.versions(root, name)]
        listed = _served_versions(client, root, name)
        version = max([0, *known, *listed]) + 1
        served = versioned_name(name, version)
        _post(client, root, "load_lora_adapter", {"lora_name": served, "lora_path": lora_path})
        registry.record(root, name, version, lora_path)
        unloaded: list[str] = []
        if unload_previous:
            # What the server lists is loaded now; the registry is the fallback when the
            # server cannot be asked.
            for old in sorted(set(listed or known)):
                old_name = versioned_name(name, old)
                try:
                    _post(client, root, "unload_lora_adapter", {"lora_name": old_name})
                    unloaded.append(old_name)
                except AdapterLoadError:
                    pass  # already gone (server restarted): nothing to free
    return LoadedAdapter(name, served, version, lora_path, tuple(unloaded))


def _post(client: httpx.Client, root: str, endpoint: str, body: dict) -> None:
    url = f"{root}/v1/{endpoint}"
    try:
        response = client.post(url, json=body)
    except httpx.TransportError as exc:
        raise AdapterLoadError(
            f"no vLLM server answers at {root} ({exc.__class__.__name__}); "
            "start one with `modelwright serve --model ...`"
        ) from exc
    if response.status_code in (404, 405):
        raise AdapterLoadError(
            f"{url} does not exist: the server does not allow runtime LoRA loading; restart it "
            f"with {RUNTIME_LORA_ENV}=True and --enable-lora (`modelwright serve` does both)"
        )
    if response.status_code >= 400:
        detail = response.text.strip()[:500]
        raise AdapterLoadError(f"{endpoint} failed with HTTP {response.status_code}: {detail}")
