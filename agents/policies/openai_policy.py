"""The `openai` policy: any OpenAI-compatible chat endpoint (vLLM, Ollama, LM Studio,
`transformers serve`, hosted APIs).

It sends the conversation (images already as data-URL parts) with the tool list, reads
native `tool_calls`, and falls back to parsing calls written in the content for servers
without a tool parser. Transient failures (connection refused, timeouts, 429, 5xx) are
retried with exponential backoff; when the server stays unreachable the error says where
it looked and how to start one.
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from agents.policies.hf_policy import shown_tools  # torch loads inside its functions only
from agents.policies.protocol import PolicyError, PolicyReply, ToolCall, TurnTokens
from agents.policies.toolcall_parser import parse_tool_calls

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


@dataclass
class OpenAIPolicyConfig:
    base_url: str = DEFAULT_BASE_URL
    model: str | None = None  # None: the first model the server lists
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this variable, never a flag
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 0.5
    temperature: float | None = None
    max_tokens: int | None = 512
    seed: int | None = None
    native_tools: bool = True  # send `tools=`; off for servers that reject the field
    extra_body: dict | None = None
    # RL: ask the server for the prompt and completion token ids and the sampled tokens'
    # log-probs (vLLM's `return_token_ids` + `logprobs`), kept as the reply's TurnTokens.
    token_ids: bool = False
    # Show the model only these tools (as the hf policy's `tools`): GRPO's server-mode
    # rollouts must see the subset its SFT rows and in-process rollouts were rendered with.
    tools: list[str] | None = None
    # With `token_ids` and no `vision_for`: keep the messages and tools of a turn with images
    # on its tokens (`TurnTokens.prompt`), for a trainer elsewhere to build the pixels from
    # (GRPO's rollouts on a Ray node, where the trained model's processor is not).
    keep_prompt: bool = False


class OpenAIPolicy:
    """Chat-completions client behind the Policy interface."""

    def __init__(self, config: OpenAIPolicyConfig | None = None, vision_for: Any = None) -> None:
        """`vision_for(messages, tools, prompt_ids)`, with `token_ids`: the image tensors a
        trainer's forward pass needs for the turn (the server sends ids, not pixels); GRPO's
        server mode passes one built on the trained model's processor."""
        from openai import OpenAI  # light, but keep CLI start-up lean

        self.config = config or OpenAIPolicyConfig()
        self.vision_for = vision_for
        key = os.environ.get(self.config.api_key_env) or "EMPTY"  # local servers ignore it
        self._client = OpenAI(
            base_url=self.config.base_url,
            api_key=key,
            timeout=self.config.timeout_s,
            max_retries=0,  # we retry ourselves, with backoff we can see and test
        )
        self._model = self.config.model
        self.name = f"openai:{self._model or '?'}"
        self._turn = 0

    def reset(self, task_info: dict | None = None) -> None:
        self._turn = 0

    @property
    def model(self) -> str:
        if self._model is None:
            models = self._with_retries(lambda: self._client.models.list())
            ids = [m.id for m in models.data]
            if not ids:
                raise PolicyError(f"the server at {self.config.base_url} lists no models")
            self._model = ids[0]
            self.name = f"openai:{self._model}"
        return self._model

    def act(self, messages: list[dict], tools: list[dict]) -> PolicyReply:
        tools = shown_tools(tools, self.config.tools)
        request: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools and self.config.native_tools:
            request["tools"] = tools
        for key in ("temperature", "max_tokens", "seed"):
            value = getattr(self.config, key)
            if value is not None:
                request[key] = value
        if self.config.extra_body:
            request["extra_body"] = dict(self.config.extra_body)
        if self.config.token_ids:
            request["logprobs"] = True
            request["extra_body"] = {**request.get("extra_body", {}), "return_token_ids": True}
        start = time.perf_counter()
        response = self._with_retries(lambda: self._client.chat.completions.create(**request))
        latency_ms = (time.perf_counter() - start) * 1e3
        self._turn += 1
        reply = self._reply(response, tools, latency_ms)
        if self.config.token_ids:
            reply.tokens = server_tokens(reply.raw, messages, tools, self.model)
            if self.vision_for is not None:
                reply.tokens.vision = self.vision_for(messages, tools, reply.tokens.prompt_ids)
            elif self.config.keep_prompt and _has_image(messages):
                reply.tokens.prompt = copy.deepcopy((messages, tools))
        return reply

    def _reply(self, response: Any, tools: list[dict], latency_ms: float) -> PolicyReply:
        if not getattr(response, "choices", None):
            raise PolicyError(f"the server returned no choices: {response!r}"[:500], fatal=False)
        message = response.choices[0].message
        text = message.content
        calls: list[ToolCall] = []
        for i, tc in enumerate(message.tool_calls or []):
            fn = tc.function
            calls.append(
                ToolCall(
                    id=tc.id or f"t{self._turn}_{i}",
                    name=fn.name or "",
                    arguments=_decode_arguments(fn.arguments),
                )
            )
        if not calls and text:
            names = [t["function"]["name"] for t in tools if "function" in t]
            parsed = parse_tool_calls(text, known_tools=names, id_prefix=f"t{self._turn}")
            calls, text = parsed.calls, parsed.text if parsed.calls else text
        usage = getattr(response, "usage", None)
        return PolicyReply(
            text=text,
            tool_calls=calls,
            tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_ms=latency_ms,
            raw=response.model_dump() if hasattr(response, "model_dump") else response,
        )

    def _with_retries(self, request):
        import openai

        transient = (
            openai.APIConnectionError,  # includes APITimeoutError
            openai.RateLimitError,
            openai.InternalServerError,
        )
        delay = self.config.backoff_s
        for attempt in range(self.config.max_retries + 1):
            try:
                return request()
            except transient as exc:
                if attempt == self.config.max_retries:
                    # a 5xx that outlives the retries is usually this reply's fault (e.g. the
                    # server's tool parser choked on malformed JSON): the episode goes on
                    fatal = not isinstance(exc, openai.InternalServerError)
                    raise PolicyError(self._explain(exc), fatal=fatal) from exc
                time.sleep(delay)
                delay *= 2
            except openai.APIStatusError as exc:
                detail = _detail(exc)
                if _PARSER_FAILED.search(detail):
                    # the server's tool parser could not read this reply's call (transformers
                    # serve >= 5.25 says so with a 400): the model's fault, the episode goes on
                    raise PolicyError(
                        f"the server could not read the model's tool call: it is not valid JSON "
                        f"(HTTP {exc.status_code}: {_short(detail, 200)})", fatal=False
                    ) from exc
                raise PolicyError(
                    f"the server at {self.config.base_url} refused the request "
                    f"(HTTP {exc.status_code}): {_short(detail or exc.message)}"
                ) from exc
        raise AssertionError("unreachable")

    def _explain(self, exc: Exception) -> str:
        import openai

        tries = self.config.max_retries + 1
        if isinstance(exc, openai.APITimeoutError):
            return (
                f"the server at {self.config.base_url} did not answer within "
                f"{self.config.timeout_s:g} s ({tries} tries); raise --timeout or use a smaller model"
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = _short(" ".join(str(exc.__cause__ or "").split()), 120)
            return (
                f"cannot reach an OpenAI-compatible server at {self.config.base_url} "
                f"({tries} tries{': ' + cause if cause else ''}): is it running? "
                "Start one with `modelwright serve --model M` "
                f"or `transformers serve PATH --port N`, then pass --base-url http://HOST:N/v1"
            )
        if isinstance(exc, openai.InternalServerError):
            return (
                f"the server at {self.config.base_url} failed to answer ({tries} tries, "
                f"{_short(str(exc))}); servers fail like this when the model's tool call is not "
                "valid JSON and their tool parser cannot read it"
            )
        return (
            f"the server at {self.config.base_url} kept failing ({tries} tries): {_short(str(exc))}"
        )


def server_tokens(raw: dict, messages: list[dict], tools: list[dict], version: str) -> TurnTokens:
    """The turn's TurnTokens from a vLLM-style response (`prompt_token_ids` on the response,
    `token_ids` and `logprobs.content[*].logprob` on the choice); a server that did not send
    the ids is an error, not a silent fallback to re-tokenised text."""
    from agents.policies.hf_policy import seen_digest

    choice = (raw.get("choices") or [{}])[0]
    prompt_ids, completion_ids = raw.get("prompt_token_ids"), choice.get("token_ids")
    if not prompt_ids or completion_ids is None:
        raise PolicyError("the server sent no token ids (RL needs vLLM's return_token_ids)")
    content = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(c["logprob"]) for c in content] if content else None
    if logprobs is not None and len(logprobs) != len(completion_ids):
        raise PolicyError(f"{len(logprobs)} log-probs for {len(completion_ids)} tokens", fatal=False)
    return TurnTokens(list(prompt_ids), list(completion_ids), logprobs,
                      seen=seen_digest(messages, tools), model_version=version)  # fmt: skip


def _decode_arguments(raw: Any) -> dict | str:
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return str(raw)
    return value if isinstance(value, dict) else str(raw)


def _has_image(messages: list[dict]) -> bool:
    return any(isinstance(m.get("content"), list)
               and any(p.get("type") == "image_url" for p in m["content"] if isinstance(p, dict))
               for m in messages)  # fmt: skip


# What servers say when their tool parser cannot read a generated call (transformers serve:
# "json parser could not parse region as JSON"; vLLM's parsers log and fall back to content).
_PARSER_FAILED = re.compile(r"could not parse .*as JSON|tool[ _]call.*(?:pars|decod)", re.I | re.S)


def _detail(exc: Any) -> str:
    """The server's own words for an error status: the body's `detail`, `error.message` or
    `message`, else the response text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        for key in ("detail", "message"):
            if isinstance(inner.get(key), str):
                return " ".join(inner[key].split())
    if isinstance(body, str):
        return " ".join(body.split())
    return ""


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def make_openai(arg: str | None = None, **options: Any) -> OpenAIPolicy:
    """`--policy openai` or `openai:MODEL`; options are OpenAIPolicyConfig fields."""
    fields = set(OpenAIPolicyConfig.__dataclass_fields__)
    config = OpenAIPolicyConfig(**{k: v for k, v in options.items() if k in fields})
    if arg:
        config.model = arg
    return OpenAIPolicy(config)
