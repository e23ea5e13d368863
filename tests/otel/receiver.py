"""A tiny OTLP/HTTP trace receiver for scripts/check-traces.

It decodes what exporters POST to /v1/traces (protobuf, optionally gzip) with the
official generated classes of the `opentelemetry-proto` package, keeps every span,
and serves them as JSON at GET /spans. Only what a test needs: no auth, no JSON
encoding, nothing kept on disk.

    python receiver.py --port 4318
"""

import argparse
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

spans = []
lock = threading.Lock()


def value(any_value):
    """An AnyValue as plain JSON."""
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    if kind == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, kind)


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def decode(body):
    request = ExportTraceServiceRequest.FromString(body)
    out = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    {
                        "service": resource.get("service.name"),
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": Span.SpanKind.Name(span.kind),
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": attributes(span.attributes),
                        "events": [
                            {"name": e.name, "attributes": attributes(e.attributes)}
                            for e in span.events
                        ],
                        "status": span.status.code,
                    }
                )
    return out


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/traces":
            return self.reply(404, b"", "text/plain")
        if self.headers.get("Content-Type", "").split(";")[0] != "application/x-protobuf":
            return self.reply(415, b"protobuf only", "text/plain")
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        try:
            received = decode(body)
        except Exception as error:  # a malformed export is the exporter's bug: say so
            return self.reply(400, str(error).encode(), "text/plain")
        with lock:
            spans.extend(received)
        self.reply(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        if self.path == "/healthz":
            return self.reply(200, b"ok", "text/plain")
        if self.path == "/spans":
            with lock:
                body = json.dumps(spans).encode()
            return self.reply(200, body, "application/json")
        self.reply(404, b"", "text/plain")

    def do_DELETE(self):
        if self.path == "/spans":
            with lock:
                spans.clear()
            return self.reply(204, b"", "text/plain")
        self.reply(404, b"", "text/plain")

    def reply(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
