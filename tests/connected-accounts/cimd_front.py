#!/usr/bin/env python3
"""An https front for a client ID metadata document served over plain http.

    cimd_front.py --port 9443 --upstream http://127.0.0.1:8081 --cert C --key K --log fetches.jsonl

nanoidp only treats an `https://` client_id as a client ID metadata document, and
only fetches it over TLS; the gateway serves its document over http on loopback in
tests. This forwards each GET to the same path on --upstream, unchanged, and appends
one JSON line per fetch to --log, so a test can count how often nanoidp fetched.
`/_lab/healthz` answers here, for readiness.
"""

from __future__ import annotations

import argparse
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Headers of the upstream answer that say what the document is and how long to keep it.
PASSED_HEADERS = ("Content-Type", "Cache-Control")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    upstream = args.upstream.rstrip("/")
    lock = threading.Lock()

    class Front(BaseHTTPRequestHandler):
        # HTTP/1.1 and no `Connection: close` in the answer: nanoidp 3.4.0's fetcher
        # closes its socket before reading the body when the answer says the
        # connection will close (HTTP/1.0 or `Connection: close`), and then refuses
        # the document as unreadable.
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path == "/_lab/healthz":
                return self.answer(200, {"Content-Type": "text/plain"}, b"ok")
            try:
                with urllib.request.urlopen(upstream + self.path, timeout=4) as response:
                    status, headers, body = response.status, response.headers, response.read()
            except urllib.error.HTTPError as error:
                status, headers, body = error.code, error.headers, error.read()
            except OSError as error:
                status, headers, body = 502, {"Content-Type": "text/plain"}, f"upstream: {error}".encode()
            with lock, open(args.log, "a") as out:
                out.write(json.dumps({"time": time.time(), "path": self.path, "status": status,
                                      "user_agent": self.headers.get("User-Agent")}) + "\n")
            self.answer(status, {k: headers[k] for k in PASSED_HEADERS if headers.get(k)}, body)

        def answer(self, status: int, headers: dict, body: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Front)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
