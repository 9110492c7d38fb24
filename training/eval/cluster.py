"""The `ray` episode backend: episodes across the nodes of a Ray cluster (the `cluster` extra).

Every node runs one `EpisodeNode` actor that owns that node's jailed `WorkerPool` (its slots
and spares) and the verifier's clean workers. A request (training/eval/requests.py) is one
actor call: the node builds the task from its id and the policy from its spec (an endpoint's
client, the oracle), runs `run_request` on a fresh session and records into memory
(`agents.store.buffer`); the finished record, with its frames and token ids, comes back to
the head, whose single store writer commits it idempotently by the episode id it fixed. A
node that dies fails its calls: the head sends those requests again, from their start state
(they are data), to a live node, and their records say `retried`.

Placement is declared: a node offers a custom `tools` resource equal to its worker slots,
and its actor takes them, pinned to the node. The head keeps at most `slots` calls in flight
per node, so the queue stays on the head (`status()` shows it) and a dead node holds none.

All traffic stays on 127.0.0.1 for a cluster on one machine (`loopback()`): Ray otherwise
resolves "127.0.0.1" in a bootstrap address to the machine's outward address and dials it.
Loopback is no boundary between the users of one machine, so a cluster `cluster up` starts
requires Ray's token authentication (`new_token`, `use_token`): its GCS, raylets and agents
refuse any request without the token, which lives in a 0600 file of the owner's beside the
state file (docs/SECURITY.md, "A cluster only its owner can reach").
Ray is imported only by this module, only when the backend is chosen.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from training.eval.requests import (
    BackendStatus,
    ClusterUnavailable,
    EpisodeOutcome,
    EpisodeRequest,
    run_request,
)

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
# Ray's switch for "a cluster on this machine only": when it is off, every place that asks
# for "this node's address" answers the loopback address (ray._private.services).
CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
NAMESPACE = "modelwright"
TOOLS = "tools"  # the custom resource: tool-worker slots of a node
# Ray's token authentication (ray._private.authentication): with RAY_AUTH_MODE=token every
# Ray process (GCS, raylet, agents, workers, drivers) sends and demands the token its C++
# loader finds first in RAY_AUTH_TOKEN, then in the file RAY_AUTH_TOKEN_PATH, then in
# ~/.ray/auth_token. We use the file: an environment variable is inherited by every child.
AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"


def loopback() -> Any:
    """Import Ray with every component on 127.0.0.1 (this process and the ones it starts)."""
    os.environ[CLUSTER_SWITCH] = "0"
    import ray
    import ray._private.ray_constants as constants

    constants.ENABLE_RAY_CLUSTER = False  # read at call time by services.get_node_ip_address
    return ray


def node_args(slots: int, *, num_cpus: int = 1) -> dict:
    """`ray.cluster_utils.Cluster.add_node` / RayParams for a node on this machine: loopback
    address, no dashboard, `slots` tool-worker slots."""
    return {
        "node_ip_address": LOOPBACK,
        "include_dashboard": False,
        "dashboard_host": LOOPBACK,
        "num_cpus": num_cpus,
        "resources": {TOOLS: slots},
    }


def new_token(path: Path) -> Path:
    """A fresh random token in `path`, a file created 0600 (O_EXCL, no symlink followed)
    before a byte goes in, in a parent directory created 0700; a stale one is replaced. An
    attacker's file in its place makes this fail rather than be used."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)  # fmt: skip
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, secrets.token_hex(32).encode())
    finally:
        os.close(fd)
    return path


def use_token(path: Path) -> None:
    """Turn on Ray's token authentication with the token in `path`, for this process and the
    Ray processes it starts; a token file this user cannot read is one line, not Ray's abort."""
    try:
        with open(path, "rb") as f:
            token = f.read().strip()
    except OSError as exc:
        raise ClusterUnavailable(
            f"cannot read the Ray cluster's token {path} ({exc.strerror or exc}); only the user "
            "who ran `modelwright cluster up` can use its cluster"
        ) from None
    if not token:
        raise ClusterUnavailable(f"the Ray cluster's token file {path} is empty; `modelwright "
                                 "cluster down` and `up` make a new one")  # fmt: skip
    os.environ[AUTH_MODE] = "token"
    os.environ[AUTH_TOKEN_PATH] = str(path)
    os.environ.pop(AUTH_TOKEN, None)  # it would take precedence over the file
    import sys

    if "ray._raylet" in sys.modules:  # Ray caches the mode and the token once read
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def local_cluster(nodes: int = 2, slots: int = 1, *, head_slots: int | None = None,
                  attempts: int = 5, token: Path | None = None,
                  temp_dir: Path | None = None) -> Any:  # fmt: skip
    """A cluster of `nodes` nodes on this machine, all on 127.0.0.1: the head (with
    `head_slots`, default `slots`) and `nodes - 1` more (`ray.cluster_utils.Cluster`; its
    `remove_node` kills one, as a machine dying would). Ray gives a starting node 30 s to
    register, which a loaded machine can miss: a node that did not come up is stopped and
    started again, up to `attempts` times. With `token` (a file, `new_token`) every node
    demands it (`use_token`); this process then holds it too. `temp_dir` (a private
    directory's child) replaces /tmp/ray for the session: its logs, sockets and runtime
    resources, which Ray makes world-writable (0777, `temp_dir` itself too)."""
    if token is not None:
        use_token(token)
    loopback()
    from ray.cluster_utils import Cluster

    cluster = Cluster()
    extra = {"temp_dir": str(temp_dir)} if temp_dir is not None else {}
    for i in range(nodes):
        start_node(cluster, {**node_args(slots if i or head_slots is None else head_slots),
                             **extra}, attempts)  # fmt: skip
    cluster.wait_for_nodes()
    return cluster


def start_node(cluster: Any, args: dict, attempts: int = 3) -> Any:
    """Add a node with `args` to `cluster`, started again if it did not come up in time."""
    import psutil

    for attempt in range(1, attempts + 1):
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        head_before = cluster.head_node
        try:
            return cluster.add_node(**args)
        except Exception as exc:  # "The current node timed out during startup"
            if attempt == attempts:
                raise
            log.warning("a Ray node did not start (%s); starting it again", exc)
            if head_before is None:  # a head that started and then failed (Ray's address
                # file in /tmp/ray, every cluster's, removed under it by another cluster's
                # shutdown): the next try starts a head, not a node of this dead one
                cluster.head_node = None
            for proc in psutil.Process().children(recursive=True):  # what this try started
                if proc.pid not in before:
                    try:
                        proc.kill()
                    except psutil.NoSuchProcess:
                        pass
    return None


def connect(address: str = "auto") -> Any:
    """Connect this process (the head's driver) to the cluster at `address` (`auto`: the one
    `modelwright cluster up` or `ray start` left on this machine). The cluster `cluster up`
    started is reached with its token (`owner_token`); another keeps Ray's own settings
    (RAY_AUTH_MODE, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)."""
    ray = loopback()
    if not ray.is_initialized():
        _probe(address)
        owned = owner_token(address)
        if owned is not None:
            token, address = owned  # `auto`: Ray would look in /tmp/ray; ours is not there
            use_token(token)
        _check_token(ray, address)
        try:
            ray.init(address=address, namespace=NAMESPACE, _node_ip_address=LOOPBACK,
                     log_to_driver=False, logging_level=logging.WARNING)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ClusterUnavailable(
                f"no Ray cluster at {address} ({first}); start one with `modelwright cluster "
                "up`, or pass the address a running head printed"
            ) from None
    return ray


def owner_token(address: str) -> tuple[Path, str] | None:
    """(token file, address) of the cluster `cluster up` started, when `address` is that
    cluster's (or `auto` and one is up); None for any other cluster."""
    state = read_state()
    if state is None or not state.get("token"):
        return None
    if address != "auto" and address != state.get("address"):
        return None
    return Path(state["token"]), str(state["address"])


def _check_token(ray: Any, address: str) -> None:
    """One line when the GCS at `address` refuses this process's token (none, or another):
    `ray.init` would retry for seconds, print Ray's C++ warnings and then blame the address.
    The one GCS call that tells is made with stderr (fd 2) sent to /dev/null."""
    from ray._private.services import canonicalize_bootstrap_address
    from ray._raylet import GcsClient

    try:
        gcs = canonicalize_bootstrap_address(address)
    except Exception:  # no cluster for `auto`, a malformed address: ray.init says it
        return
    if gcs is None:
        return
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        try:
            GcsClient(address=gcs)
        finally:
            os.dup2(saved, 2)
    except ray.exceptions.AuthenticationError:
        mine = (f"with the token in {os.environ[AUTH_TOKEN_PATH]}" if AUTH_TOKEN_PATH in os.environ
                else "with the token in RAY_AUTH_TOKEN" if AUTH_TOKEN in os.environ
                else "without a token")  # fmt: skip
        raise ClusterUnavailable(
            f"the Ray cluster at {address} refused this process {mine} (Ray's token "
            "authentication); only the user who started it, holding its token, can use it"
        ) from None
    except Exception:  # anything else: ray.init tells it as before
        return
    finally:
        os.close(saved)
        os.close(null)


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens at a HOST:PORT address (Ray itself retries
    for a minute before it says so); `auto` is Ray's to resolve."""
    import socket

    host, sep, port = address.rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]") or LOOPBACK, int(port)), timeout_s).close()
    except OSError as exc:
        raise ClusterUnavailable(
            f"no Ray cluster at {address} (nothing answers there: {exc.strerror or exc}); start "
            "one with `modelwright cluster up`, or pass the address a running head printed"
        ) from None


def tool_nodes(ray: Any) -> list[dict]:
    """The live nodes that offer tool slots: {"node", "address", "slots"}."""
    return [{"node": n["NodeID"], "address": n["NodeManagerAddress"],
             "slots": int(n["Resources"].get(TOOLS, 0))}
            for n in ray.nodes() if n["Alive"] and n["Resources"].get(TOOLS, 0) >= 1]  # fmt: skip


class EpisodeNode:
    """The actor on one node: its worker pool, and one request per call (threaded: `slots`
    calls at once, each on its own fresh session, as `agents.Scheduler` runs them)."""

    def __init__(self, slots: int, spares: int = 1, max_retries: int = 2) -> None:
        from tools import WorkerPool
        from training.tasks.verifier import default_verifier

        self.slots, self.max_retries = slots, max_retries
        self.pool = WorkerPool(size=slots + spares)
        default_verifier().reserve(slots)
        self.node_id = _node_id()

    def ready(self) -> str:
        return self.node_id

    def run(self, request: EpisodeRequest) -> dict:
        """Run `request`; the record (without `_result`), the EpisodeResult, the buffered
        episode for the head's store, or the error. An infrastructure failure (the worker
        died while building the start state, no session) is retried here on a fresh worker."""
        from agents.loop.episode_loop import InfrastructureError
        from agents.store.buffer import BufferSink
        from tools import ToolSession

        error = "no attempt"
        for attempt in range(1, self.max_retries + 2):
            start = time.perf_counter()
            try:
                session = ToolSession(self.pool)
            except Exception as exc:  # the pool failed: try again
                error = f"no tool session: {exc}"
                continue
            sink = BufferSink()
            try:
                record = run_request(request, session, store=sink)
            except InfrastructureError as exc:
                error = str(exc)
                continue
            finally:
                _close(session)
            result = record.pop("_result", None)
            return {"record": record, "result": result, "attempts": attempt,
                    "buffered": sink.episodes[0] if sink.episodes else None,
                    "node": self.node_id, "wall_ms": (time.perf_counter() - start) * 1e3}  # fmt: skip
        return {"error": f"infrastructure: {error}", "infrastructure": True,
                "attempts": self.max_retries + 1, "node": self.node_id}  # fmt: skip

    def close(self) -> None:
        self.pool.close()


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _close(session: Any) -> None:
    try:
        session.close()
    except Exception:  # a dead worker may not close cleanly; the pool reaps it
        log.debug("closing a session failed", exc_info=True)


class RayBackend:
    """Runs requests on the cluster at `address`; commits records into `store` (the head's).

    `on_result(outcome)` is called on the head after each record is committed (the
    progress line; tests use it to stop a node at a known point)."""

    name = "ray"

    def __init__(self, address: str = "auto", *, store: Any = None, spares: int = 1,
                 max_retries: int = 2, policy_for: Any = None,
                 ready_timeout_s: float = 600.0) -> None:  # fmt: skip
        if policy_for is not None:
            raise ValueError("the ray backend builds policies on its nodes from a spec; an "
                             "in-process model runs on the local backend (the trainer's node)")
        self.ray = connect(address)
        self.store = store
        self.spares, self.max_retries = spares, max_retries
        self.ready_timeout_s = ready_timeout_s
        self._lock = threading.Lock()
        self._actors: dict[str, dict] = {}  # node id -> {"actor", "slots", "alive", ...}
        self._queued = self._done = self._retried = 0
        self.inflight: dict[Any, tuple[int, EpisodeRequest, str]] = {}  # ref -> (i, req, node)
        self.dead_nodes: list[str] = []
        self._add_actors()

    # -- nodes -----------------------------------------------------------------------------

    def _add_actors(self) -> None:
        """One actor on each live node with tool slots that has none yet; waits until ready."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = self.ray.remote(EpisodeNode)
        new = {}
        for node in tool_nodes(self.ray):
            if node["node"] in self._actors or node["node"] in self.dead_nodes:
                continue
            actor = remote.options(
                num_cpus=0, resources={TOOLS: node["slots"]}, max_concurrency=node["slots"],
                max_restarts=0, max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["node"], soft=False),
            ).remote(node["slots"], self.spares, self.max_retries)  # fmt: skip
            new[node["node"]] = {"actor": actor, "slots": node["slots"], "alive": True,
                                 "address": node["address"], "running": 0, "done": 0}  # fmt: skip
        if new:
            refs = {entry["actor"].ready.remote(): nid for nid, entry in new.items()}
            ready, _ = self.ray.wait(list(refs), num_returns=len(refs),
                                     timeout=self.ready_timeout_s)  # fmt: skip
            for ref in ready:
                try:
                    self.ray.get(ref)
                except Exception as exc:  # the node went away while its actor started
                    log.warning("node %s: actor did not start (%s)", refs[ref], exc)
                    new.pop(refs[ref], None)
            for ref, nid in refs.items():
                if ref not in ready:
                    new.pop(nid, None)
            self._actors.update(new)
        if not any(e["alive"] for e in self._actors.values()):
            raise ClusterUnavailable(
                "no live node with tool slots in the Ray cluster (a node offers them with the "
                f"`{TOOLS}` resource: `modelwright cluster up`)"
            )

    def _mark_dead(self, node: str) -> None:
        entry = self._actors.get(node)
        if entry is not None and entry["alive"]:
            entry["alive"] = False
            self.dead_nodes.append(node)
            log.warning("node %s died; its episodes are sent again to live nodes", node[:12])

    def _free_node(self) -> str | None:
        free = [(e["running"] - e["slots"], nid) for nid, e in self._actors.items()
                if e["alive"] and e["running"] < e["slots"]]  # fmt: skip
        return min(free)[1] if free else None

    # -- the interface ---------------------------------------------------------------------

    def submit(self, requests: list[EpisodeRequest],
               progress: Callable[[EpisodeOutcome, int, int], None] | None = None
               ) -> Iterator[EpisodeOutcome]:  # fmt: skip
        from ray.exceptions import RayTaskError

        ray = self.ray
        queue = collections.deque((i, r, 1) for i, r in enumerate(requests))
        retried: set[int] = set()
        outcomes: dict[int, EpisodeOutcome] = {}
        self._queued += len(requests)
        while queue or self.inflight:
            while queue:
                node = self._free_node()
                if node is None:
                    break
                index, request, _ = queue.popleft()
                entry = self._actors[node]
                ref = entry["actor"].run.remote(request)
                entry["running"] += 1
                self._queued -= 1
                self.inflight[ref] = (index, request, node)
            if not self.inflight:  # work left and no live node: look for new ones
                self._add_actors()
                continue
            ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=5.0)
            for ref in ready:
                index, request, node = self.inflight.pop(ref)
                entry = self._actors[node]
                entry["running"] -= 1
                try:
                    reply = ray.get(ref)
                except RayTaskError as exc:  # the episode raised on the node: not retried
                    reply = {"error": f"{type(exc.cause).__name__}: {exc.cause}",
                             "node": node, "attempts": 1}  # fmt: skip
                except Exception as exc:  # the node (or its actor) died: send it again
                    log.warning("episode %s on node %s lost (%s)", request.key, node[:12],
                                type(exc).__name__)  # fmt: skip
                    self._mark_dead(node)
                    retried.add(index)
                    self._retried += 1
                    self._queued += 1
                    queue.appendleft((index, request, 0))
                    continue
                entry["done"] += 1
                outcome = self._outcome(request, reply, index in retried)
                outcomes[index] = outcome
                self._done += 1
                if progress is not None:
                    progress(outcome, len(outcomes), len(requests))
        return iter([outcomes[i] for i in range(len(requests))])

    def _outcome(self, request: EpisodeRequest, reply: dict, retried: bool) -> EpisodeOutcome:
        buffered = reply.get("buffered")
        if buffered is not None and self.store is not None:  # the one writer: the head
            from agents.store.buffer import commit

            commit(self.store, buffered, tags=("retried",) if retried else ())
        return EpisodeOutcome(
            request, reply.get("record"), reply.get("result"), reply.get("error"),
            bool(reply.get("infrastructure")), int(reply.get("attempts", 1)) + int(retried),
            retried, reply.get("node", ""),
            float(reply.get("wall_ms", 0.0)),
        )  # fmt: skip

    def status(self) -> BackendStatus:
        nodes = [{"node": nid, "address": e["address"], "slots": e["slots"], "alive": e["alive"],
                  "running": e["running"], "done": e["done"]}
                 for nid, e in self._actors.items()]  # fmt: skip
        return BackendStatus("ray", nodes, sum(n["slots"] for n in nodes if n["alive"]),
                             self._queued, len(self.inflight), self._done, self._retried)  # fmt: skip

    def close(self) -> None:
        for entry in self._actors.values():
            if entry["alive"]:
                try:
                    self.ray.kill(entry["actor"])
                except Exception:  # already gone with its node
                    log.debug("killing an actor failed", exc_info=True)
        self._actors.clear()

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cluster_status(address: str = "auto") -> dict:
    """Nodes, worker slots and what runs, for `modelwright cluster status`."""
    ray = connect(address)
    nodes = [{"node": n["NodeID"], "address": n["NodeManagerAddress"], "alive": n["Alive"],
              "slots": int(n["Resources"].get(TOOLS, 0))} for n in ray.nodes()]  # fmt: skip
    total = ray.cluster_resources().get(TOOLS, 0)
    free = ray.available_resources().get(TOOLS, 0)
    return {"address": ray.get_runtime_context().gcs_address, "nodes": nodes,
            "slots": int(total), "slots_taken": int(total - free)}  # fmt: skip


# -- a cluster on this machine that outlives the command (`modelwright cluster up|down`) --


def state_file() -> Path:
    """Where `cluster up` notes the cluster it started (address, pid of its keeper)."""
    override = os.environ.get("MODELWRIGHT_CLUSTER_STATE")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("modelwright")) / "cluster.json"


def token_file() -> Path:
    """The token of the cluster `cluster up` started: a 0600 file beside the state file."""
    state = state_file()
    return state.with_name(state.stem + ".token")


def read_state() -> dict | None:
    try:
        state = json.loads(state_file().read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(int(state["pid"]), 0)
    except (OSError, KeyError, ValueError):
        return None  # its keeper is gone: so is the cluster
    return state


def keep(nodes: int, slots: int, join: str | None = None,
         start_within: float | None = None) -> None:  # fmt: skip
    """Start the nodes (a head and `nodes - 1` more, or `nodes` joining `join`), note them in
    the state file and hold them until SIGTERM/SIGINT (`cluster down`). A start that takes
    over `start_within` seconds ends this process (status 3) after writing where it waited
    and a last line saying so to stderr (`cluster up` keeps it in a log)."""
    started_ok = threading.Event()
    if start_within is not None:
        threading.Thread(target=_watch_start, args=(started_ok, start_within),
                         daemon=True).start()  # fmt: skip
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    started: list[Any] = []
    token = private = None
    if join is None:
        token = new_token(token_file())  # before any Ray process starts
        # Ray makes its temp dir 0777: it goes inside a fresh one only this user can enter
        # (short: a Unix socket's path inside it has at most 107 bytes)
        private = Path(tempfile.mkdtemp(prefix="modelwright-ray-"))
        cluster = local_cluster(nodes=nodes, slots=slots, token=token,
                                temp_dir=private / "r")  # fmt: skip
        address = cluster.address
    else:
        cluster = None
        address = join
        local = join.split(":")[0] in (LOOPBACK, "localhost")
        if local:
            loopback()
        from ray._private.node import Node
        from ray._private.parameter import RayParams

        for _ in range(nodes):
            args = node_args(slots) if local else {"num_cpus": 1, "resources": {TOOLS: slots}}
            params = RayParams(gcs_address=join, **args)
            started.append(Node(params, head=False, shutdown_at_exit=True, spawn_reaper=True))
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"address": address, "pid": os.getpid(), "nodes": nodes,
                               "slots": slots, "joined": join is not None,
                               "token": str(token) if token else None,
                               "sessions": str(private) if private else None}))  # fmt: skip
    tmp.replace(path)
    started_ok.set()
    try:
        while not stop.wait(0.5):  # timed: a SIGTERM landing on another thread runs its handler
            pass
    finally:
        path.unlink(missing_ok=True)
        for node in started:
            node.kill_all_processes(check_alive=False, allow_graceful=True)
        if cluster is not None:
            cluster.shutdown()
        if token is not None:
            token.unlink(missing_ok=True)


START_HUNG = 3  # the keeper's exit status when its start did not finish in time


def _watch_start(started: threading.Event, within: float) -> None:
    if started.wait(within):
        return
    print(f"where the start waited after {within:g} s:", file=sys.stderr, flush=True)
    print(waiting_stacks(sys._current_frames(), threading.get_ident()), file=sys.stderr,
          flush=True)  # fmt: skip
    print(f"a Ray node did not start within {within:g} s", file=sys.stderr, flush=True)
    os._exit(START_HUNG)  # Ray's reaper stops what this process started


def waiting_stacks(frames: dict, own: int, head: int = 12, tail: int = 30) -> str:
    """Every thread's stack but `own`'s (`frames`: thread id -> its current frame), outermost
    call first. A deep one keeps its outer `head` frames, which say where in the keeper the
    start waited, and its inner `tail`, and says how many it left out between: a start caught
    inside an import of an import is 100 frames of importlib deep (faulthandler, which keeps
    only the innermost 100, lost the keeper's own frames)."""
    import traceback

    parts = []
    for ident, frame in frames.items():
        if ident == own:
            continue
        stack = traceback.extract_stack(frame)
        lines = traceback.format_list(stack[:head] if len(stack) > head + tail else stack)
        if len(stack) > head + tail:
            lines.append(f"  ... {len(stack) - head - tail} frames left out ...\n")
            lines += traceback.format_list(stack[-tail:])
        parts.append(f"Thread {ident:#x} (outermost call first):\n" + "".join(lines))
    return "".join(parts).rstrip("\n")


if __name__ == "__main__":  # `modelwright cluster up` starts this, detached
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--join", default=None)
    parser.add_argument("--start-within", type=float, default=None)
    a = parser.parse_args()
    keep(a.nodes, a.slots, a.join, a.start_within)
