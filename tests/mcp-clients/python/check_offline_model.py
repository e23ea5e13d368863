#!/usr/bin/env python3
"""Asks maitred's gateway (running the built-in offline model) the questions of a
table, over the chat API (SSE), and checks each answer: the `tool_call` events name
the expected tools of the table's MCP server with the expected arguments, and the
answer shows the expected facts and no raw JSON.

    check_offline_model.py --gateway http://localhost:8081 --token "$CHAT_TOKEN" \\
        --table crates/offline-model/testdata/inventory/questions.json \\
        --mcp-url http://127.0.0.1:8090/mcp \\
        --tools-fixture crates/offline-model/testdata/inventory/tools.json

With --mcp-url and --tools-fixture it first checks that the server still lists exactly
the tools in the fixture the Rust tests read. With --record RESULTS it also calls each
tool the model called, directly on the MCP server, and writes what came back to
RESULTS (and rewrites the tools fixture): the recorded results the Rust tests answer
from, so they run offline. Write tools are never approved in the chat; with --record
they are called directly, so record against a throwaway database.

Exits 0 when every check passes, 1 otherwise; prints one line per check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from datetime import date
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

failures: list[str] = []


def check(what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def post(url: str, token: str, body: dict[str, Any]) -> urllib.request.addinfourl:
    """POSTs JSON; waits out a 429 (the per-person question limit) as Retry-After says."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                 "Accept": "text/event-stream"},
        method="POST",
    )
    for _ in range(5):
        try:
            return urllib.request.urlopen(request, timeout=60)
        except urllib.error.HTTPError as error:
            if error.code != 429:
                raise
            time.sleep(float(error.headers.get("Retry-After", "5")))
    return urllib.request.urlopen(request, timeout=60)


def events(response: urllib.request.addinfourl):
    """The stream's events as (name, data) pairs, until `done`."""
    name, data = "message", []
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            yield name, json.loads("\n".join(data))
            if name == "done":
                return
            name, data = "message", []


def ask(gateway: str, token: str, question: str) -> tuple[list[dict[str, Any]], str, str, bool]:
    """The calls the model made, the answer, how it finished, and whether a call waited
    for an approval (which is denied: the table checks what the model asks for)."""
    calls: dict[str, dict[str, Any]] = {}
    answer, finish, denied = [], "", False
    with post(f"{gateway}/api/v1/resos/stream/chat", token, {"question": question}) as response:
        for name, data in events(response):
            if name in ("tool_call", "approval_required"):
                calls.setdefault(data["id"], data)
            if name == "approval_required":
                denied = True
                post(f"{gateway}/api/v1/resos/chat/approvals/{data['id']}", token, {"approve": False}).close()
            elif name == "token":
                answer.append(data["text"])
            elif name == "done":
                finish = data.get("finish_reason", "")
    return list(calls.values()), "".join(answer), finish, denied


def matches(expected: dict[str, Any], call: dict[str, Any], server: str, absent: list[str]) -> bool:
    arguments = call.get("arguments") or {}
    return (
        call.get("server") == server
        and call.get("tool") == expected["tool"]
        and all(arguments.get(k) == v for k, v in expected.get("arguments", {}).items())
        and not any(k in arguments for k in absent)
    )


async def mcp_client(url: str, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return create_mcp_http_client(headers=headers)


async def list_tools(url: str, token: str | None) -> list[dict[str, Any]]:
    async with await mcp_client(url, token) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = (await client.list_tools()).tools
            return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


async def call_tools(url: str, token: str | None, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call made again on the server, with what came back."""
    recorded = []
    async with await mcp_client(url, token) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            for call in calls:
                result = await client.call_tool(call["tool"], call.get("arguments") or {})
                entry: dict[str, Any] = {"tool": call["tool"], "arguments": call.get("arguments") or {}}
                if result.is_error:
                    entry["error"] = "\n".join(getattr(c, "text", "") for c in result.content)
                elif result.structured_content is not None:
                    entry["result"] = result.structured_content
                else:
                    entry["text"] = "\n".join(getattr(c, "text", "") for c in result.content)
                recorded.append(entry)
    return recorded


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--token", required=True, help="a chat token (maitred token --client maitred-cli)")
    parser.add_argument("--table", required=True, type=Path)
    parser.add_argument("--mcp-url", help="the table's MCP server, for the fixture and --record")
    parser.add_argument("--mcp-token", help="a bearer token for that server, if it needs one")
    parser.add_argument("--tools-fixture", type=Path, help="the server's tools/list as the Rust tests read it")
    parser.add_argument("--record", type=Path, help="write the tools' results here for the Rust tests")
    args = parser.parse_args()

    table = json.loads(args.table.read_text())
    server = table["server"]

    if args.tools_fixture and args.mcp_url:
        listed = anyio.run(list_tools, args.mcp_url, args.mcp_token)
        if args.record:
            write_json(args.tools_fixture, listed)
        fixture = json.loads(args.tools_fixture.read_text())
        check(f"{server}'s tools/list equals {args.tools_fixture.name}", listed == fixture,
              "the server changed: run with --record and review the diff")

    recorded = []
    for question in table["questions"]:
        ask_text = question["ask"]
        calls, answer, finish, denied = ask(args.gateway, args.token, ask_text)
        expected = question["calls"]
        made = [f"{c.get('server')}__{c.get('tool')} {json.dumps(c.get('arguments'))}" for c in calls]
        check(f"{ask_text!r} calls {[c['tool'] for c in expected]}",
              len(calls) == len(expected)
              and all(matches(e, c, server, question.get("absent_arguments", [])) for e, c in zip(expected, calls)),
              made)
        missing = [fact for fact in question.get("facts", []) if fact not in answer]
        if denied:
            # The facts are those of the change made; the Rust table checks them on
            # the recorded result.
            print(f"skip {ask_text!r}: its change was not approved here")
        else:
            check(f"{ask_text!r} answers with {question.get('facts', [])}", not missing,
                  f"missing {missing} in:\n{answer}")
        present = [text for text in question.get("absent", []) if text in answer]
        check(f"{ask_text!r} leaves out {question.get('absent', [])}", not present, f"{present} in:\n{answer}")
        check(f"{ask_text!r} shows no raw JSON", '{"' not in answer and '":' not in answer, answer)
        check(f"{ask_text!r} ends", finish == "stop", finish)
        if args.record and args.mcp_url:
            ours = [c for c in calls if c.get("server") == server]
            recorded.append({"ask": ask_text, "calls": anyio.run(call_tools, args.mcp_url, args.mcp_token, ours)})

    if args.record:
        write_json(args.record, {"recorded_on": date.today().isoformat(), "answers": recorded})
        print(f"wrote {args.record}")
    print(f"{len(failures)} of the checks failed" if failures else "every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
