"""A loopback relay in front of an OpenAI-compatible server that ends each event stream with
OpenAI's `data: [DONE]` sentinel when the server leaves it out (`transformers serve` 5.x does;
verifiers' interception waits for it as the end of a streamed turn). Used by
scripts/envs_eval.sh:

    python scripts/sse_done_proxy.py --port 8001 --upstream http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    args = ap.parse_args()
    client = httpx.Client(base_url=args.upstream, timeout=httpx.Timeout(1800.0, connect=30.0))

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a) -> None:
            pass

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            with client.stream(self.command, self.path, content=body, headers=headers) as r:
                stream = r.headers.get("content-type", "").startswith("text/event-stream")
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in HOP:
                        self.send_header(k, v)
                if not stream:
                    data = r.read()
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                tail = b""
                for chunk in r.iter_raw():
                    tail = (tail + chunk)[-64:]
                    self._chunk(chunk)
                if b"[DONE]" not in tail:
                    self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        do_GET = do_POST = _relay

    ThreadingHTTPServer(("127.0.0.1", args.port), Relay).serve_forever()


if __name__ == "__main__":
    main()
