"""Fallback parser for tool calls that a model wrote into its message text.

Servers without a tool parser (or models that ignore it) return calls inside `content`.
Seen in the wild and handled here:

- Hermes/Qwen tags: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (closing
  tag sometimes missing at the end of a truncated reply);
- Llama-style `<function=NAME>{...}</function>` and `<|python_tag|>{...}`;
- Mistral-style `[TOOL_CALLS] [{...}, ...]`;
- fenced ```json blocks and bare JSON objects or arrays anywhere in the text, with keys
  `name`/`tool`/`function` and `arguments`/`args`/`parameters`/`input`, or the OpenAI
  shape `{"type": "function", "function": {"name": ..., "arguments": "<json string>"}}`;
- Python-call style `add_primitive(kind="cube", size=2)` (only for known tool names, so
  that prose such as "print(x)" is not taken for a call).

JSON that almost parses (trailing commas, single quotes, Python literals) is repaired.
A call whose arguments cannot be repaired is still returned, with the raw text as its
`arguments`, so the loop can tell the model exactly what was wrong.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from agents.policies.protocol import ToolCall

NAME_KEYS = ("name", "tool", "tool_name", "function_name", "function")
ARGS_KEYS = ("arguments", "args", "parameters", "input", "params", "kwargs")

_TAG_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|(?=<tool_call>)|\Z)", re.S)
_FENCE_OPEN_RE = re.compile(r"```(?:json|tool_call|tool_code|javascript|js|python)?\s*\n?")
_FENCE_CLOSE_RE = re.compile(r"\s*```")
_CLOSE_RE = re.compile(r"\s*</tool_call>")
_DECODER = json.JSONDecoder()
_FUNCTION_TAG_RE = re.compile(r"<function=([\w.\-]+)>\s*(.*?)\s*(?:</function>|\Z)", re.S)
_FENCE_RE = re.compile(r"```(?:json|tool_call|tool_code|javascript|js|python)?\s*\n?(.*?)```", re.S)
_NAME_GUESS_RE = re.compile(r"[\"']?(?:name|tool|function)[\"']?\s*[:=]\s*[\"']([\w.\-]+)[\"']")
_PYCALL_RE = re.compile(r"\b([A-Za-z_][\w]*)\s*\(")
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")
_RESPONSE_RE = re.compile(r"<tool_response>.*?(?:</tool_response>|\Z)", re.S)


@dataclass
class ParseResult:
    """Calls found in a text, and the text with those calls cut out (None if empty)."""

    calls: list[ToolCall]
    text: str | None

    @property
    def no_call(self) -> str | None:
        """Why there is no call: "empty" (nothing written), "prose" (text without a call),
        or "broken" (a `<tool_call>` opened but nothing in it reads as one); None when
        there are calls."""
        if self.calls:
            return None
        if not self.text:
            return "empty"
        return "broken" if "<tool_call>" in self.text else "prose"


def parse_tool_calls(
    text: str | None, known_tools: Iterable[str] | None = None, id_prefix: str = "call"
) -> ParseResult:
    """Find the tool calls written in `text`. Never raises."""
    if not text:
        return ParseResult([], None)
    known = set(known_tools) if known_tools is not None else None
    found: list[tuple[str, dict | str]] = []
    # A small model sometimes writes the environment's part too: what it puts in a
    # `<tool_response>` is never a call of its own.
    rest = text
    if "<tool_response>" in text:
        protected = _call_spans(text)
        rest = _cut(
            text,
            [m.span() for m in _RESPONSE_RE.finditer(text) if not _inside(m.start(), protected)],
        )
    for extractor in (_from_tags, _from_function_tags, _from_fences, _from_bare_json):
        calls, rest = extractor(rest)
        found.extend(calls)
        if found:
            break
    if not found and known:
        calls, rest = _from_python_calls(rest, known)
        found.extend(calls)
    tool_calls = [
        ToolCall(id=f"{id_prefix}_{i}", name=_clean_name(name), arguments=args)
        for i, (name, args) in enumerate(found)
    ]
    remaining = (rest if tool_calls else text).strip() or None
    return ParseResult(tool_calls, remaining)


def _clean_name(name: str) -> str:
    """A name as meant: small models quote it twice (`"'set_material'"`) or pad it."""
    return name.strip().strip("'\"`").strip()


# -- extractors: each returns (calls, text with the consumed spans removed) ---------------


def _from_tags(text: str) -> tuple[list[tuple[str, dict | str]], str]:
    if "<tool_call>" not in text:
        return [], text
    calls: list[tuple[str, dict | str]] = []
    spans = []
    protected = _call_spans(text)
    pos = text.find("<tool_call>")
    while pos >= 0:
        if _inside(pos, protected):
            pos = text.find("<tool_call>", pos + 1)
            continue
        start = pos + len("<tool_call>")
        body = start + len(text[start:]) - len(text[start:].lstrip())
        end = None
        try:  # a whole JSON object first: its strings may hold "<tool_call>" themselves
            value, stop = _DECODER.raw_decode(text, body)
        except ValueError:
            value = None
        got = _calls_from_value(value) if value is not None else []
        if got:
            calls.extend(got)
            close = _CLOSE_RE.match(text, stop)
            end = close.end() if close else stop
        else:
            m = _TAG_RE.match(text, pos)
            calls.extend(_calls_from_payload(m.group(1), strict=False))
            end = m.end()
        spans.append((pos, end))
        pos = text.find("<tool_call>", end)
    if not spans:
        return calls, text
    rest = _cut(text, spans)
    protected = _call_spans(rest)  # a stray closing tag goes; one inside a JSON string stays
    stray = [(m.start(), m.end()) for m in re.finditer("</tool_call>", rest)]
    return calls, _cut(rest, [span for span in stray if not _inside(span[0], protected)])


def _from_function_tags(text: str) -> tuple[list[tuple[str, dict | str]], str]:
    calls: list[tuple[str, dict | str]] = []
    if "<function=" not in text and "<|python_tag|>" not in text and "[TOOL_CALLS]" not in text:
        return calls, text
    protected = _call_spans(text)
    spans = []
    for m in _FUNCTION_TAG_RE.finditer(text):
        if _inside(m.start(), protected):
            continue
        calls.append((m.group(1), _arguments(m.group(2).strip() or "{}")))
        spans.append(m.span())
    rest = _cut(text, spans)
    protected = _call_spans(rest)
    for marker in ("<|python_tag|>", "[TOOL_CALLS]"):
        at = rest.find(marker)
        while at >= 0 and _inside(at, protected):
            at = rest.find(marker, at + 1)
        if at >= 0:
            head, tail = rest[:at], rest[at + len(marker) :]
            tail_calls = _calls_from_payload(tail, strict=False)
            if tail_calls:
                calls.extend(tail_calls)
                rest = head
    return calls, rest


def _from_fences(text: str) -> tuple[list[tuple[str, dict | str]], str]:
    calls: list[tuple[str, dict | str]] = []
    if "```" not in text:
        return calls, text
    spans = []
    protected = _call_spans(text)
    pos = text.find("```")
    while pos >= 0:
        if _inside(pos, protected):
            pos = text.find("```", pos + 1)
            continue
        end = None
        opening = _FENCE_OPEN_RE.match(text, pos)
        try:  # a whole JSON value first: its strings may hold "```" themselves
            value, stop = _DECODER.raw_decode(text, opening.end())
        except ValueError:
            value = None
        got = _calls_from_value(value) if value is not None else []
        close = _FENCE_CLOSE_RE.match(text, stop) if got else None
        if close:
            end = close.end()
        else:
            m = _FENCE_RE.match(text, pos)
            got = _calls_from_payload(m.group(1), strict=True) if m else []
            end = m.end() if m else None
        if got and end is not None:
            calls.extend(got)
            spans.append((pos, end))
            pos = text.find("```", end)
        else:
            pos = text.find("```", pos + 3)
    return calls, _cut(text, spans)


def _call_spans(text: str) -> list[tuple[int, int]]:
    """Where whole JSON objects and arrays stand in `text`: a marker inside one (an argument
    that is the text "<tool_call>" or "[TOOL_CALLS]") is data, not a marker."""
    return _scan_json(text)[2]


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < pos < end for start, end in spans)


def _from_bare_json(text: str) -> tuple[list[tuple[str, dict | str]], str]:
    calls, spans, _ = _scan_json(text)
    return calls, _cut(text, spans)


def _scan_json(
    text: str,
) -> tuple[list[tuple[str, dict | str]], list[tuple[int, int]], list[tuple[int, int]]]:
    """The calls among the JSON values in `text`, their spans, and every value's span."""
    calls: list[tuple[str, dict | str]] = []
    spans: list[tuple[int, int]] = []
    values: list[tuple[int, int]] = []
    decoder = _DECODER
    i = 0
    while i < len(text):
        if text[i] not in "{[":
            i += 1
            continue
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        values.append((i, end))
        got = _calls_from_value(value)
        if got:
            calls.extend(got)
            spans.append((i, end))
        # skip the whole value either way: objects nested in data are data too
        i = end
    return calls, spans, values


def _from_python_calls(text: str, known: set[str]) -> tuple[list[tuple[str, dict | str]], str]:
    calls: list[tuple[str, dict | str]] = []
    spans = []
    for m in _PYCALL_RE.finditer(text):
        if m.group(1) not in known:
            continue
        end = _matching_paren(text, m.end() - 1)
        if end is None:
            continue
        source = text[m.start() : end + 1]
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError:
            calls.append((m.group(1), source))
            spans.append((m.start(), end + 1))
            continue
        if not isinstance(node, ast.Call):
            continue
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except (ValueError, SyntaxError, TypeError):
            calls.append((m.group(1), source))
        else:
            if node.args:  # positional arguments have no names to bind to: report as raw
                calls.append((m.group(1), source))
            else:
                calls.append((m.group(1), args))
        spans.append((m.start(), end + 1))
    return calls, _cut(text, spans)


# -- payload interpretation ---------------------------------------------------------------


def _calls_from_payload(payload: str, *, strict: bool) -> list[tuple[str, dict | str]]:
    """Calls in a tag/fence payload. Non-strict: a broken payload is still one call."""
    payload = payload.strip()
    value = _load_lenient(payload)
    if value is not None:
        got = _calls_from_value(value)
        if got or strict:
            return got
    if strict:
        # a fence may hold prose plus JSON: fall back to scanning it
        return _from_bare_json(payload)[0]
    if not payload:
        return []
    got = _from_bare_json(payload)[0]
    if got:
        return got
    guess = _NAME_GUESS_RE.search(payload)
    return [(guess.group(1) if guess else "", payload)]


def _calls_from_value(value: object) -> list[tuple[str, dict | str]]:
    if isinstance(value, list):
        out: list[tuple[str, dict | str]] = []
        for item in value:
            one = _call_from_object(item)
            if one is None:
                return []  # a list that is not all calls is data, not calls
            out.append(one)
        return out
    one = _call_from_object(value)
    return [one] if one is not None else []


def _call_from_object(obj: object) -> tuple[str, dict | str] | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # OpenAI shape
        inner = obj["function"]
        name = inner.get("name")
        if isinstance(name, str) and name:
            return name, _arguments(inner.get("arguments", inner.get("parameters", {})))
        return None
    name = next((obj[k] for k in NAME_KEYS if isinstance(obj.get(k), str) and obj[k]), None)
    if name is None:
        return None
    args_key = next((k for k in ARGS_KEYS if k in obj), None)
    if args_key is None:
        # {"name": "x"} alone is a call without arguments only if nothing else is there
        extra = set(obj) - set(NAME_KEYS) - {"id", "type"}
        return (name, {}) if not extra else None
    return name, _arguments(obj[args_key])


def _arguments(raw: object) -> dict | str:
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    if isinstance(raw, str):
        value = _load_lenient(raw)
        if isinstance(value, dict):
            return value
        return raw
    return json.dumps(raw)


def _load_lenient(text: str) -> object | None:
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    repaired = _TRAILING_COMMA_RE.sub(r"\1", text)
    try:
        return json.loads(repaired)
    except ValueError:
        pass
    try:  # single quotes, True/False/None
        value = ast.literal_eval(repaired)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict | list):
        return None
    try:  # Python literals JSON has no form for (a set, bytes, a tuple key): not a call
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return None
    return value


def _matching_paren(text: str, start: int) -> int | None:
    depth = 0
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text
