"""Modelwright's tasks as an OpenEnv environment server: `modelwright envs serve`.

OpenEnv (meta-pytorch/OpenEnv, openenv-core 0.3.0) is a protocol: an environment is an HTTP
server with `POST /reset`, `POST /step`, `GET /state`, `/schema`, `/health`, `/metadata`, and a
WebSocket `/ws` on which each connection is one session with its own environment. This module
serves that protocol over `EpisodeEnv` (training/envs/core.py), so OpenEnv's own clients
(`GenericEnvClient`), TRL's OpenEnv integration and verifiers' `openenv` taskset can drive
Modelwright's episodes; it does not import openenv-core (which pulls in gradio and fastmcp).

The wire shapes are OpenEnv's:

    reset   {"task_id": "requests:1:110000"}               one task
            {"family": "requests", "level": 1, "split": "train", "seed": 7}   a drawn one
    step    {"action": {"tool_calls": [{"name": "delete", "arguments": {"name": "Drum"}}]}}
            {"action": {"tool_calls": [], "content": "done"}}    no call: the episode ends
    answer  {"observation": {"text", "task_id", "episode_id", "tools", "step", "record"},
             "reward": null | float, "done": bool}

The reward is the trusted verifier's, given once, on the step that ends the episode (a step
with no call, or the step that spends the budget); before that it is null. Each session holds
one `EpisodeEnv`, so each episode has a fresh jailed worker, as `modelwright eval`.

Sessions: a WebSocket connection is one (as in OpenEnv). Over plain HTTP, where OpenEnv's own
server keeps no state, `/reset` opens a session named by its `episode_id` (given, or made and
returned in the observation) and `/step` names it (`"episode_id"` beside `"action"`; it may be
left out while only one HTTP session is open); a session closes when its episode ends.
Bad input is one error, `{"type": "error", "data": {"message", "code"}}` (over HTTP with a 4xx
status), and the server goes on serving.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import Body, FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents import DEFAULT_SYSTEM
from training.envs.core import EnvError, EpisodeEnv

NAME = "modelwright"
DEFAULT_MAX_SESSIONS = 4


class EnvRequestError(ValueError):
    """Input the server refuses (one line), with the OpenEnv error code it answers with."""

    def __init__(self, message: str, code: str = "VALIDATION_ERROR", status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


# -- the protocol's models (OpenEnv's Action / Observation / State, with our fields) -----------


class ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The tool's name (one of the observation's `tools`).")
    arguments: dict[str, Any] | str = Field(default_factory=dict,
                                            description="Its arguments (an object, or its JSON text).")  # fmt: skip
    id: str | None = None


class ModelwrightAction(BaseModel):
    """One model turn: its tool calls (run in order in the episode's worker); a turn with no
    call ends the episode and is scored."""

    model_config = ConfigDict(extra="forbid")
    tool_calls: list[ToolCallIn] = Field(default_factory=list,
                                         description="The turn's calls; none ends the episode.")  # fmt: skip
    content: str | None = Field(default=None, description="The turn's text (kept in the record).")
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModelwrightObservation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    text: str = Field(default="", description="The new messages as text: goal and scene on "
                                              "reset, then the tool results and the scene.")  # fmt: skip
    task_id: str | None = None
    episode_id: str | None = None
    tools: list[dict] = Field(default_factory=list,
                              description="The task's tools as OpenAI function schemas.")  # fmt: skip
    step: int = 0
    record: dict[str, Any] | None = Field(default=None, description="Once done: the eval record "
                                          "(reward, success, components, steps, calls).")  # fmt: skip


class ModelwrightState(BaseModel):
    model_config = ConfigDict(extra="allow")
    episode_id: str | None = None
    step_count: int = 0
    task_id: str | None = None
    done: bool = False
    reward: float | None = None


class ResetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: str | None = None
    family: str | None = None
    level: int | None = None
    split: str | None = None
    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)


def serialize(obs: ModelwrightObservation) -> dict:
    """OpenEnv's wire form: {"observation": fields but done/reward/metadata, "reward", "done"}."""
    return {"observation": obs.model_dump(exclude={"done", "reward", "metadata"}),
            "reward": obs.reward, "done": obs.done}  # fmt: skip


def error_body(message: str, code: str) -> dict:
    return {"type": "error", "data": {"message": message, "code": code}}


def _validation_line(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors()[:3]:
        where = ".".join(str(p) for p in e.get("loc", ())) or "body"
        parts.append(f"{where}: {e.get('msg', 'invalid')}")
    return "; ".join(parts)


# -- one session: one EpisodeEnv -----------------------------------------------------------------


class Session:
    """One client's environment: an `EpisodeEnv` reused across its episodes (each one a fresh
    worker), and the task choice the server was started with."""

    def __init__(self, server: EnvServer, episode_id: str | None = None) -> None:
        self.server = server
        self.env = EpisodeEnv(max_steps=server.max_steps, name=server.policy_name,
                              session_factory=server.session_factory, store=server.store)  # fmt: skip
        self.episode_id = episode_id
        self.steps = 0
        self.done = False
        self.reward: float | None = None
        self.lock = threading.Lock()
        self.draws = 0
        self.last = time.monotonic()  # the last request's time (idle HTTP sessions are reaped)

    def pick_task(self, req: ResetIn) -> str:
        if req.task_id:
            return self.server.check_task(req.task_id)
        return self.server.draw_task(req, self.draws)

    def reset(self, data: dict) -> dict:
        self.last = time.monotonic()
        try:
            req = ResetIn.model_validate(data or {})
        except ValidationError as exc:
            raise EnvRequestError(f"reset: {_validation_line(exc)}") from None
        task_id = self.pick_task(req)
        self.draws += 1
        with self.lock:
            try:
                obs = self.env.reset(task_id)
            except EnvError as exc:
                raise EnvRequestError(str(exc), "EXECUTION_ERROR", 500) from None
            self.episode_id = req.episode_id or uuid.uuid4().hex[:12]
            self.steps, self.done, self.reward = 0, False, None
            return serialize(ModelwrightObservation(
                text=obs.text, task_id=task_id, episode_id=self.episode_id,
                tools=self.env.tools, step=0))  # fmt: skip

    def step(self, data: Any) -> dict:
        self.last = time.monotonic()
        if not isinstance(data, dict):
            raise EnvRequestError("step: the action is an object with `tool_calls` (and `content`)")
        try:
            action = ModelwrightAction.model_validate(data)
        except ValidationError as exc:
            raise EnvRequestError(f"step: {_validation_line(exc)}") from None
        with self.lock:
            if self.env.task_id is None:
                raise EnvRequestError("step before reset: reset with a task_id (or a family) first",
                                      "SESSION_ERROR", 409)  # fmt: skip
            if self.done:
                raise EnvRequestError("step after the episode ended: reset to start another",
                                      "SESSION_ERROR", 409)  # fmt: skip
            calls = []
            for c in action.tool_calls:
                args = c.arguments
                if isinstance(args, str):  # a model's JSON text; malformed text is the tool's error
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError:
                        pass
                calls.append({"name": c.name, "arguments": args, **({"id": c.id} if c.id else {})})
            try:
                if calls:
                    obs = self.env.step(calls)
                    self.steps += 1
                    record, text = obs.record, obs.text
                else:
                    record, text = self.env.finish(action.content or "done"), ""
            except EnvError as exc:
                raise EnvRequestError(str(exc), "EXECUTION_ERROR", 500) from None
            out = ModelwrightObservation(text=text, task_id=self.env.task_id,
                                         episode_id=self.episode_id, tools=[], step=self.steps)  # fmt: skip
            if record is not None:
                self.done, self.reward = True, float(record["reward"])
                out.done, out.reward, out.record = True, self.reward, _public_record(record)
                if not text:
                    out.text = (f"The episode has ended: reward {self.reward:.3f}"
                                f"{' (success)' if record.get('success') else ''}.")  # fmt: skip
            return serialize(out)

    def state(self) -> dict:
        return ModelwrightState(episode_id=self.episode_id, step_count=self.steps,
                                task_id=self.env.task_id, done=self.done,
                                reward=self.reward).model_dump()  # fmt: skip

    def close(self) -> None:
        self.env.close()


def _public_record(record: dict) -> dict:
    """The record's JSON-able summary (what eval's report shows per episode)."""
    keys = ("task", "reward", "success", "components", "steps", "calls", "tool_errors", "status")
    return json.loads(json.dumps({k: record[k] for k in keys if k in record}, default=str))


# -- the server ------------------------------------------------------------------------------------


class EnvServer:
    """The sessions and the task choice; `app()` is the FastAPI application."""

    def __init__(self, families: list[str] | None = None, levels: list[int] | None = None,
                 split: str = "train", *, max_steps: int = 8, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 session_factory: Callable[[], Any] | None = None, store: Any = None,
                 policy_name: str = "openenv", idle_s: float = 900.0) -> None:  # fmt: skip
        from training.tasks import FAMILIES
        from training.tasks.sampling import TaskSampler

        self.families = list(families or [])
        self.levels = list(levels or [1, 2, 3, 4, 5])
        self.split = split
        self.max_steps = max_steps
        self.max_sessions = max_sessions
        self.session_factory = session_factory
        self.store = store
        self.policy_name = policy_name
        self.idle_s = idle_s
        self.known = FAMILIES
        self.sampler = TaskSampler(self.families, self.levels, split, {}, {},
                                   families_field="--families", levels_field="--levels",
                                   weights_field="envs serve")  # fmt: skip
        self.http: dict[str, Session] = {}
        self.open = 0
        self.guard = threading.Lock()

    # tasks

    def check_task(self, task_id: str) -> str:
        from training.tasks import TaskError, get_task

        try:
            get_task(task_id)
        except TaskError as exc:
            raise EnvRequestError(f"reset: {exc}") from None
        return task_id

    def draw_task(self, req: ResetIn, draws: int) -> str:
        """A task of the request's family/level/split, else of the server's, drawn with the
        request's seed (the same seed, the same task) or the session's count of draws."""
        from training.tasks import TaskError
        from training.tasks.sampling import TaskSampler

        if req.family or req.level is not None or req.split:
            try:
                sampler = TaskSampler([req.family] if req.family else self.families,
                                      [req.level] if req.level is not None else self.levels,
                                      req.split or self.split, {}, {},
                                      families_field="family", levels_field="level",
                                      weights_field="reset")  # fmt: skip
            except TaskError as exc:
                raise EnvRequestError(f"reset: {exc}") from None
        else:
            sampler = self.sampler
        rng = random.Random(req.seed if req.seed is not None else draws)
        return f"{rng.choice(sampler.buckets)}:{rng.choice(sampler.seeds)}"

    # sessions

    def new_session(self, episode_id: str | None = None) -> Session:
        if self.open >= self.max_sessions:
            self.reap_idle()
        with self.guard:
            if self.open >= self.max_sessions:
                raise EnvRequestError(f"the server holds its {self.max_sessions} sessions (each an "
                                      "episode's worker); close one, or start it with more "
                                      "--max-sessions", "CAPACITY_REACHED", 503)  # fmt: skip
            self.open += 1
        return Session(self, episode_id)

    def reap_idle(self) -> None:
        """Close the HTTP sessions no request has touched for `idle_s` (a client that went
        away mid-episode: over HTTP nothing else says so; a WebSocket's close does)."""
        now = time.monotonic()
        for key, session in list(self.http.items()):
            if now - session.last > self.idle_s and not session.lock.locked():
                if self.http.pop(key, None) is session:
                    self.drop_session(session)

    def drop_session(self, session: Session) -> None:
        session.close()
        with self.guard:
            self.open -= 1

    def http_session(self, episode_id: str | None) -> Session:
        if episode_id is None:
            if not self.http:
                raise EnvRequestError("step before reset: POST /reset starts an episode",
                                      "SESSION_ERROR", 409)  # fmt: skip
            if len(self.http) == 1:
                return next(iter(self.http.values()))
            raise EnvRequestError("step: name the episode (`episode_id` beside `action`): "
                                  f"{len(self.http)} HTTP episodes are open", "SESSION_ERROR", 409)  # fmt: skip
        try:
            return self.http[episode_id]
        except KeyError:
            raise EnvRequestError(f"no open episode {episode_id!r}: reset starts one",
                                  "SESSION_ERROR", 404) from None  # fmt: skip

    # the application

    def app(self) -> Any:
        app = FastAPI(title="Modelwright OpenEnv server",
                      description="Modelwright's task families as an OpenEnv environment "
                                  "(docs/ENVIRONMENTS.md).")  # fmt: skip

        @app.exception_handler(EnvRequestError)
        async def _refused(request: Request, exc: EnvRequestError) -> JSONResponse:
            return JSONResponse(error_body(str(exc), exc.code), status_code=exc.status)

        @app.exception_handler(RequestValidationError)
        async def _malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
            parts = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()[:3]]
            return JSONResponse(error_body("; ".join(parts) or "malformed request", "VALIDATION_ERROR"),
                                status_code=422)  # fmt: skip

        @app.get("/health")
        async def health() -> dict:
            return {"status": "healthy"}

        @app.get("/metadata")
        async def metadata() -> dict:
            return {"name": NAME, "description": "Modelwright's 3D/CAD task families: Blender and "
                    "CadQuery tools in jailed workers, rewards from a trusted verifier.",
                    "version": _version(), "families": self.sampler.families,
                    "levels": self.levels, "split": self.split, "max_steps": self.max_steps,
                    "system_prompt": DEFAULT_SYSTEM,  # the product's own (its prompts' first turn)
                    "documentation_url": "docs/ENVIRONMENTS.md"}  # fmt: skip

        @app.get("/schema")
        async def schema() -> dict:
            return {"action": ModelwrightAction.model_json_schema(),
                    "observation": ModelwrightObservation.model_json_schema(),
                    "state": ModelwrightState.model_json_schema()}  # fmt: skip

        @app.post("/reset")
        async def reset(body: dict = Body(default_factory=dict)) -> dict:
            episode_id = body.get("episode_id") if isinstance(body, dict) else None
            session = self.http.get(episode_id) if isinstance(episode_id, str) else None
            fresh = session is None
            if fresh:
                session = await run_in_threadpool(self.new_session, episode_id)
            try:
                out = await run_in_threadpool(session.reset, body)
            except BaseException:
                if fresh:
                    self.drop_session(session)
                raise
            self.http[session.episode_id] = session
            return out

        @app.post("/step")
        async def step(body: dict = Body(...)) -> dict:
            if "action" not in body:
                raise EnvRequestError("step: the body is {\"action\": {...}} (and `episode_id`)")
            session = self.http_session(body.get("episode_id"))
            out = await run_in_threadpool(session.step, body["action"])
            if out["done"]:
                self.http.pop(session.episode_id, None)
                self.drop_session(session)
            return out

        @app.get("/state")
        async def state(episode_id: str | None = None) -> dict:
            if episode_id is None and not self.http:
                return ModelwrightState().model_dump()
            return self.http_session(episode_id).state()

        @app.websocket("/ws")
        async def ws(socket: WebSocket) -> None:
            await socket.accept()
            try:
                session = await run_in_threadpool(self.new_session)
            except EnvRequestError as exc:
                await socket.send_text(json.dumps(error_body(str(exc), exc.code)))
                await socket.close()
                return
            try:
                while True:
                    raw = await socket.receive_text()
                    reply = await self._ws_message(session, raw, run_in_threadpool)
                    if reply is None:
                        break
                    await socket.send_text(json.dumps(reply))
            except WebSocketDisconnect:
                pass
            finally:
                await asyncio.get_running_loop().run_in_executor(None, self.drop_session, session)
                try:
                    await socket.close()
                except RuntimeError:
                    pass

        return app

    async def _ws_message(self, session: Session, raw: str, run: Any) -> dict | None:
        """One WebSocket message's answer (None: the client closed the session)."""
        try:
            message = json.loads(raw)
        except json.JSONDecodeError as exc:
            return error_body(f"invalid JSON: {exc}", "INVALID_JSON")
        if not isinstance(message, dict):
            return error_body("a message is an object with a `type`", "INVALID_JSON")
        kind = message.get("type")
        try:
            if kind == "reset":
                return {"type": "observation", "data": await run(session.reset, message.get("data") or {})}
            if kind == "step":
                return {"type": "observation", "data": await run(session.step, message.get("data"))}
            if kind == "state":
                return {"type": "state", "data": session.state()}
            if kind == "close":
                return None
            return error_body(f"unknown message type {kind!r} (reset, step, state, close)", "UNKNOWN_TYPE")
        except EnvRequestError as exc:
            return error_body(str(exc), exc.code)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("modelwright")
    except PackageNotFoundError:
        return "0"


def _bind(host: str, port: int) -> Any:
    import socket

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def _uvicorn(server: EnvServer) -> Any:
    import uvicorn

    config = uvicorn.Config(server.app(), log_level="warning", ws="websockets-sansio",
                            ws_max_size=64 * 1024 * 1024)  # fmt: skip
    return uvicorn.Server(config)


def serve(server: EnvServer, host: str = "127.0.0.1", port: int = 8000,
          ready: Callable[[str], None] | None = None) -> None:  # fmt: skip
    """Serve until interrupted. The socket is bound here first, so a taken port is one
    `OSError` for the caller, not uvicorn's log; `ready(url)` is called once it listens."""
    sock = _bind(host, port)
    uv = _uvicorn(server)
    if ready is not None:
        original = uv.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets=sockets)
            ready(f"http://{host}:{sock.getsockname()[1]}")

        uv.startup = startup
    bound = sock.getsockname()[1]
    uv.run(sockets=[sock])
    # uvicorn stops on the signal it captured and mostly raises it again once shut down, which
    # ends here as KeyboardInterrupt (the CLI's exit 130). When it only returns, a server that
    # had started was told to stop all the same: say so the one way, never exit 0 after Ctrl-C.
    if uv.started:
        raise KeyboardInterrupt
    raise OSError(f"the server on {host}:{bound} did not start")


class Background:
    """The server on a thread of this process, on a free loopback port: `url`, `stop()`."""

    def __init__(self, server: EnvServer, host: str = "127.0.0.1", port: int = 0,
                 timeout: float = 60.0) -> None:  # fmt: skip
        import time

        self.server = server
        sock = _bind(host, port)
        self.url = f"http://{host}:{sock.getsockname()[1]}"
        self._uv = _uvicorn(server)
        self._thread = threading.Thread(target=self._uv.run, kwargs={"sockets": [sock]},
                                        name="openenv-server", daemon=True)  # fmt: skip
        self._thread.start()
        end = time.monotonic() + timeout
        while not self._uv.started:
            if not self._thread.is_alive() or time.monotonic() > end:
                raise RuntimeError(f"the OpenEnv server at {self.url} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self._uv.should_exit = True
        self._thread.join(timeout=30)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
