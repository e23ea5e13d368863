"""A recording proxy between maitred and the model server: every byte passes through
unchanged, each client connection on a connection of its own to the server, closed when
the server closes it, so that maitred sees the server's connections as they are (kept
alive, or closed after an error). Each exchange is written to a JSON-lines transcript
(the request body, the status, the response as received), so that a failed answer can
be read afterwards: an HTTP 500, a request the server closed the connection on, a tool
call written as text, a prompt too big.

usage: proxy.py LISTEN_PORT UPSTREAM_PORT TRANSCRIPT
"""

import json
import socket
import sys
import threading
import time

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


def message(buffer: bytes, response: bool, closed: bool):
    """The first whole HTTP/1.1 message in buffer, as (start line, headers, body, bytes
    it took), or None while it is incomplete. A response without a length runs to the
    connection's close."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buffer[:end].decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    at = end + 4
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = b""
        while True:
            size_end = buffer.find(b"\r\n", at)
            if size_end < 0:
                return None
            size = int(buffer[at:size_end].split(b";")[0] or b"0", 16)
            if size == 0:  # the last chunk, then (no) trailers and a blank line
                last = buffer.find(b"\r\n\r\n", size_end)
                return None if last < 0 else (lines[0], headers, body, last + 4)
            if len(buffer) < size_end + 2 + size + 2:
                return None
            body += buffer[size_end + 2 : size_end + 2 + size]
            at = size_end + 2 + size + 2
    if "content-length" in headers:
        length = int(headers["content-length"])
        if len(buffer) < at + length:
            return None
        return lines[0], headers, buffer[at : at + length], at + length
    if response and not closed:
        return None
    return lines[0], headers, buffer[at:], len(buffer)


class Exchange:
    """One client connection's requests and responses, read as they pass."""

    def __init__(self):
        self.sent, self.received = b"", b""
        self.requests = []  # (arrived at, method, path, body), answer pending
        self.guard = threading.Lock()

    def client_bytes(self, data: bytes) -> None:
        with self.guard:
            self.sent += data
            while (parsed := message(self.sent, False, False)) is not None:
                start, _, body, took = parsed
                self.sent = self.sent[took:]
                method, path = (start.split(" ") + ["", ""])[:2]
                self.requests.append((time.time(), method, path, body))

    def server_bytes(self, data: bytes, closed: bool = False) -> None:
        with self.guard:
            self.received += data
            while self.requests and (parsed := message(self.received, True, closed)) is not None:
                start, headers, body, took = parsed
                self.received = self.received[took:]
                status = int(start.split(" ")[1])
                self.write(self.requests.pop(0), status, body)
            if closed:
                for pending in self.requests:
                    self.write(pending, None, b"[proxy: the connection closed before an answer]")
                self.requests = []

    @staticmethod
    def write(request, status, body: bytes) -> None:
        started, method, path, sent = request
        if method != "POST":
            return
        try:
            asked = json.loads(sent or b"{}")
        except ValueError:
            asked = {"unreadable": sent.decode(errors="replace")}
        text = body.decode(errors="replace")
        record({
            "at": started, "seconds": round(time.time() - started, 2), "path": path,
            "status": status, "request": asked,
            "response": assembled(text) if asked.get("stream") and status == 200 else text[:4000],
        })


def pump(source: socket.socket, sink: socket.socket, seen, done: threading.Event) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            seen(data)
            sink.sendall(data)
    except OSError:
        pass
    finally:
        done.set()


def serve(client: socket.socket) -> None:
    try:
        server = socket.create_connection(("127.0.0.1", upstream_port))
    except OSError:
        client.close()
        return
    for side in (client, server):
        side.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    exchange = Exchange()
    done = threading.Event()
    threading.Thread(target=pump, args=(client, server, exchange.client_bytes, done), daemon=True).start()
    threading.Thread(target=pump, args=(server, client, exchange.server_bytes, done), daemon=True).start()
    # Either side closing ends both: the client sees the server's close as it came.
    done.wait()
    for side in (server, client):
        try:
            side.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        side.close()
    exchange.server_bytes(b"", closed=True)


def main() -> int:
    global upstream_port, transcript
    listen, upstream_port, transcript = int(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3], "a")
    listener = socket.create_server(("127.0.0.1", listen))
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
