"""A recording proxy between maitred and the model server: every request passes through
unchanged and streams back as it comes, and each exchange is written to a JSON-lines
transcript (the request body, the status, the response as received), so that a failed
answer can be read afterwards: an HTTP 500, a tool call written as text, a prompt too big.

usage: proxy.py LISTEN_PORT UPSTREAM_PORT TRANSCRIPT
"""

import http.client
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

upstream_port = 0
transcript = None
lock = threading.Lock()


def record(entry: dict) -> None:
    with lock:
        transcript.write(json.dumps(entry) + "\n")
        transcript.flush()


def assembled(raw: str) -> dict:
    """What a streamed chat completion said, put together from its chunks."""
    text, calls, finish = "", {}, None
    for line in raw.splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except ValueError:
            continue
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call.get("index", 0), {"name": "", "arguments": ""})
                function = call.get("function") or {}
                # llama-cpp-python repeats the name in every delta: keep it once
                if function.get("name") and function["name"] != slot["name"]:
                    slot["name"] += function["name"]
                slot["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {"content": text, "tool_calls": list(calls.values()), "finish_reason": finish}


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the response ends when the connection closes

    def log_message(self, *args):
        pass

    def forward(self, method: str) -> None:
        started = time.time()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
        upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=900)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        received = b""
        status = None
        try:
            upstream.request(method, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            status = response.status
            self.send_response(response.status)
            for k, v in response.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            while True:
                piece = response.read1(65536)
                if not piece:
                    break
                received += piece
                self.wfile.write(piece)
                self.wfile.flush()
        except (OSError, http.client.HTTPException) as e:
            received += f"\n[proxy: {e!r}]".encode()
        finally:
            upstream.close()
        if method == "POST":
            request = json.loads(body or b"{}")
            text = received.decode(errors="replace")
            entry = {
                "at": started, "seconds": round(time.time() - started, 2), "path": self.path,
                "status": status, "request": request,
                "response": assembled(text) if request.get("stream") and status == 200 else text[:4000],
            }
            record(entry)

    def do_GET(self):
        self.forward("GET")

    def do_POST(self):
        self.forward("POST")


def main() -> int:
    global upstream_port, transcript
    listen, upstream_port, transcript = int(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3], "a")
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", listen), Proxy).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
