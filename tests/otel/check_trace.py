"""Asks the gateway one question and checks its spans, as the OTLP receiver got them.

One question is one trace: the gateway's request span is its root, the model turns
(`chat`) and tool calls (`execute_tool`) hang from it, the MCP server's span from the
gateway's MCP client span, the backend's request span from the MCP server's, and the
SQL statements from the backend's request. The attributes of the OpenTelemetry GenAI,
MCP, HTTP and database conventions are there; the question text is nowhere.

    python check_trace.py --gateway URL --token TOKEN --receiver URL [--doc FILE]
"""

import argparse
import json
import sys
import time
import urllib.request

QUESTION = "How many tables are there?"


def ask(gateway, token, question):
    """The question's SSE events, and the trace the gateway says served it."""
    request = urllib.request.Request(
        f"{gateway}/api/v1/resos/stream/chat",
        data=json.dumps({"question": question}).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Authorization": f"Bearer {token}",
        },
    )
    events = []
    with urllib.request.urlopen(request, timeout=60) as response:
        traceresponse = response.headers.get("traceresponse")
        event = None
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event:
                events.append((event, json.loads(line[5:])))
                if event == "done":
                    break
    return traceresponse, events


def spans(receiver):
    with urllib.request.urlopen(f"{receiver}/spans", timeout=10) as response:
        return json.load(response)


def shorten(text, most=72):
    return text if len(text) <= most else text[: most - 2] + '…"'


def tree_lines(trace, root, show):
    children = {}
    for span in trace:
        children.setdefault(span["parent_span_id"], []).append(span)
    for siblings in children.values():
        siblings.sort(key=lambda s: s["start"])
    lines = []

    def walk(span, depth):
        attrs = ", ".join(
            f"{k}={shorten(json.dumps(v))}" for k, v in span["attributes"].items() if k in show
        )
        ms = (span["end"] - span["start"]) / 1e6
        lines.append(
            f"{'  ' * depth}{span['name']}  [{span['service']}, {span['kind'][10:].lower()}, {ms:.1f} ms]"
            + (f"  {attrs}" if attrs else "")
        )
        for child in children.get(span["span_id"], []):
            walk(child, depth + 1)

    walk(root, 0)
    return lines


SHOWN = {
    "http.request.method", "http.route", "http.response.status_code",
    "gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model",
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons", "gen_ai.tool.name", "gen_ai.tool.call.id",
    "mcp.method.name", "mcp.session.id", "mcp.protocol.version", "jsonrpc.request.id",
    "db.system.name", "db.operation.name", "db.query.text",
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--receiver", required=True)
    parser.add_argument("--doc", help="write the tree into this file, between the markers")
    args = parser.parse_args()

    traceresponse, events = ask(args.gateway, args.token, QUESTION)
    kinds = [e for e, _ in events]
    assert kinds[-1] == "done", kinds
    assert "tool_call" in kinds, f"the offline model called no tool: {kinds}"
    assert traceresponse, "the gateway named no span (traceresponse)"
    trace_id = traceresponse.split("-")[1]

    problems = []
    # The batch exporters send every 200 ms (OTEL_BSP_SCHEDULE_DELAY); wait for the
    # three services' spans, and a moment more for stragglers.
    deadline = time.time() + 20
    while True:
        trace = [s for s in spans(args.receiver) if s["trace_id"] == trace_id]
        services = {s["service"] for s in trace}
        if {"maitred-gateway", "maitred-mcp", "maitred-backend"} <= services and any(
            s["kind"] == "SPAN_KIND_SERVER" and s["service"] == "maitred-gateway" for s in trace
        ):
            time.sleep(1.5)
            break
        if time.time() > deadline:
            problems.append(f"spans from {sorted(services)} only, after 20 s")
            break
    everything = spans(args.receiver)
    trace = [s for s in everything if s["trace_id"] == trace_id]

    by_id = {s["span_id"]: s for s in trace}
    roots = [s for s in trace if s["parent_span_id"] not in by_id]
    if len(roots) != 1:
        problems.append(f"{len(roots)} roots: {[r['name'] for r in roots]}")
    root = roots[0] if roots else trace[0]
    if root["service"] != "maitred-gateway" or root["kind"] != "SPAN_KIND_SERVER" or root["parent_span_id"]:
        problems.append(f"the root is not the gateway's request: {root['name']} ({root['service']})")

    def first(pred):
        return next((s for s in trace if pred(s)), None)

    def ancestors(span):
        chain = []
        while span and span["parent_span_id"] in by_id:
            span = by_id[span["parent_span_id"]]
            chain.append(span)
        return chain

    chat = first(lambda s: s["attributes"].get("gen_ai.operation.name") == "chat")
    execute = first(lambda s: s["name"].startswith("execute_tool "))
    client = first(lambda s: s["service"] == "maitred-gateway" and s["kind"] == "SPAN_KIND_CLIENT" and s["attributes"].get("mcp.method.name") == "tools/call")
    server = first(lambda s: s["service"] == "maitred-mcp" and s["kind"] == "SPAN_KIND_SERVER" and s["attributes"].get("mcp.method.name") == "tools/call")
    backend = first(lambda s: s["service"] == "maitred-backend" and s["kind"] == "SPAN_KIND_SERVER" and server is not None and server in ancestors(s))
    sql = first(lambda s: "db.system.name" in s["attributes"] and backend is not None and backend in ancestors(s))
    expected = [("chat", chat), ("execute_tool", execute), ("MCP client tools/call", client),
                ("MCP server tools/call", server), ("backend request", backend), ("SQL statement", sql)]
    for what, span in expected:
        if span is None:
            problems.append(f"no {what} span in the trace")
    if all(span for _, span in expected):
        if root not in ancestors(chat) or root not in ancestors(execute):
            problems.append("chat/execute_tool are not under the gateway's request")
        if execute not in ancestors(client):
            problems.append("the MCP client span is not under execute_tool")
        if client not in ancestors(server):
            problems.append("the MCP server span is not under the gateway's MCP client span")

    required = {
        "chat": (chat, ["gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model",
                        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                        "gen_ai.response.finish_reasons"]),
        "execute_tool": (execute, ["gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id"]),
        "MCP client": (client, ["mcp.method.name", "gen_ai.tool.name", "mcp.protocol.version"]),
        "MCP server": (server, ["mcp.method.name", "jsonrpc.request.id",
                                "mcp.protocol.version", "gen_ai.tool.name"]),
        "backend": (backend, ["http.request.method", "http.route", "http.response.status_code"]),
        "SQL": (sql, ["db.system.name", "db.operation.name", "db.query.text"]),
    }
    for what, (span, keys) in required.items():
        if span is None:
            continue
        missing = [k for k in keys if k not in span["attributes"]]
        if missing:
            problems.append(f"the {what} span lacks {missing}")
    # A session id only where the protocol revision has sessions (2026-07-28 has none).
    if server is not None and server["attributes"].get("mcp.protocol.version", "") < "2026-07-28":
        if "mcp.session.id" not in server["attributes"]:
            problems.append("the MCP server span lacks mcp.session.id")
    if sql is not None and "?" not in sql["attributes"]["db.query.text"] and "$" not in sql["attributes"]["db.query.text"]:
        print(f"note: the SQL span's statement has no placeholder: {sql['attributes']['db.query.text']}")

    # The tool spans of the MCP server and the backend's API requests made while the
    # question ran all belong to its trace: no hop started a trace of its own.
    start, end = root["start"], max(s["end"] for s in trace)
    for span in everything:
        if not (start <= span["start"] <= end) or span["trace_id"] == trace_id:
            continue
        if span["attributes"].get("mcp.method.name") == "tools/call" or str(
            span["attributes"].get("http.route", "")).startswith("/api/v1/resos/tables"):
            problems.append(f"{span['name']} ({span['service']}) is in another trace")

    text = json.dumps(everything)
    if QUESTION in text or QUESTION.lower().rstrip("?") in text.lower():
        problems.append("the question text is in a span")

    lines = tree_lines(trace, root, SHOWN)
    print(f"trace {trace_id}: {len(trace)} spans from {sorted({s['service'] for s in trace})}")
    print("\n".join(lines))
    if args.doc and not problems:
        with open(args.doc) as f:
            doc = f.read()
        begin, finish = "<!-- tree -->\n", "<!-- /tree -->"
        head, _, rest = doc.partition(begin)
        _, _, tail = rest.partition(finish)
        with open(args.doc, "w") as f:
            f.write(head + begin + "```text\n" + "\n".join(lines) + "\n```\n" + finish + tail)
        print(f"updated {args.doc}")
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print("one question, one trace: ok")


if __name__ == "__main__":
    main()
