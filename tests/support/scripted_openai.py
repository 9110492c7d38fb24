"""A scripted policy behind an OpenAI-compatible chat endpoint (streamed or not): its k-th
reply calls the k-th tool call of its script, and once the script is spent it answers
without a call. The k-th reply is the one that follows k tool results in the request, so it
is stateless and serves any number of rollouts at once. For driving tools that only talk
to a model server (verifiers' harnesses) with the same calls as `--policy script:FILE`."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def reply_for(messages: list[dict], calls: list[dict]) -> dict:
    """The assistant message that follows `messages` in the script."""
    k = sum(1 for m in messages if m.get("role") == "tool")
    if k < len(calls):
        c = calls[k]
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{k}", "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}]}
    return {"role": "assistant", "content": "done"}


class ScriptedOpenAI:
    """`ScriptedOpenAI(calls).url` is a `/v1` base URL on loopback until `stop()`."""

    def __init__(self, calls: list[dict], port: int = 0) -> None:
        self.calls = calls
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._json({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                outer.requests.append(body)
                msg = reply_for(body.get("messages", []), outer.calls)
                finish = "tool_calls" if msg.get("tool_calls") else "stop"
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                base = {"id": "chatcmpl-scripted", "created": 0, "model": body.get("model", "scripted")}
                if not body.get("stream"):
                    self._json({**base, "object": "chat.completion", "usage": usage,
                                "choices": [{"index": 0, "message": msg, "finish_reason": finish}]})
                    return
                delta = dict(msg)
                if delta.get("tool_calls"):
                    delta["tool_calls"] = [{"index": 0, **tc} for tc in delta["tool_calls"]]
                chunks = [
                    {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                    {"choices": [], "usage": usage},
                ]
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for c in chunks:
                    data = json.dumps({**base, "object": "chat.completion.chunk", **c})
                    self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

            def _json(self, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
