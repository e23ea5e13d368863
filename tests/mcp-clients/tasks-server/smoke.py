#!/usr/bin/env python3
"""Smoke check of server.py with the official MCP Python SDK: that it speaks the tasks
extension (SEP-2663) on 2026-07-28 as the gateway will expect.

    smoke.py --url http://127.0.0.1:8093/mcp [--token SECRET]

slow_count completes with its total, after status messages per step; needs_name is
input_required until tasks/update gives it a name; never_ends is cancelled by
tasks/cancel, and the server lists its id at GET /cancelled. The client side is the
one check_sdk_tasks.py builds from the SDK's extension hooks. Exits 0 when every
check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

import anyio
import mcp_types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from check_sdk_tasks import (  # noqa: E402
    TASKS,
    TERMINAL,
    CancelTask,
    CreatedTask,
    TaskAnswers,
    TaskId,
    Tasks,
    UpdateTask,
    check,
    failures,
    poll,
)


async def smoke(url: str, token: str | None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http), mode="auto",
                            extensions=[Tasks()]) as client:
        check("2026-07-28 is negotiated", client.protocol_version == "2026-07-28", client.protocol_version)
        check("the server declares the tasks extension",
              TASKS in (client.server_capabilities.extensions or {}), client.server_capabilities)
        session = client.session

        created = await session.call_tool("slow_count", {"n": 3}, allow_claimed=True)
        check("slow_count answers with a task", isinstance(created, CreatedTask), created)
        seen: list[str] = []
        final = await poll(session, created.task_id, lambda s: s.status in TERMINAL, seen, limit=30)
        check("slow_count completes with its total", final.status == "completed"
              and (final.result or {}).get("structuredContent") == {"result": 3}, final)
        check("slow_count's status message counts", any(m.startswith("Counted ") for m in seen), seen)
        through_claim = await client.call_tool("slow_count", {"n": 2})
        check("Client.call_tool resolves a task", through_claim.structured_content == {"result": 2},
              through_claim)

        created = await session.call_tool("needs_name", {}, allow_claimed=True)
        asking = await poll(session, created.task_id, lambda s: s.status in TERMINAL | {"input_required"}, limit=30)
        # The key is the server's own (fastmcp-tasks surfaces `<taskId>:<digest>`): answer under it.
        [(key, request)] = (asking.input_requests or {"": {}}).items()
        check("needs_name is input_required with a form for the name",
              asking.status == "input_required" and request.get("method") == "elicitation/create"
              and "name" in request.get("params", {}).get("requestedSchema", {}).get("properties", {}), asking)
        answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
        await session.send_request(UpdateTask(params=TaskAnswers(task_id=created.task_id, input_responses=answer)),
                                   mcp_types.Result)
        final = await poll(session, created.task_id, lambda s: s.status in TERMINAL, limit=30)
        check("needs_name greets the name tasks/update gave", final.status == "completed"
              and "Hello, Ada!" in json.dumps((final.result or {}).get("content")), final)

        created = await session.call_tool("never_ends", {}, allow_claimed=True)
        await poll(session, created.task_id, lambda s: (s.status_message or "").startswith("Still working"), limit=30)
        await session.send_request(CancelTask(params=TaskId(task_id=created.task_id)), mcp_types.Result)
        final = await poll(session, created.task_id, lambda s: s.status in TERMINAL, limit=30)
        check("never_ends is cancelled by tasks/cancel", final.status == "cancelled", final)
        base = url.rsplit("/mcp", 1)[0]
        listed: list[str] = []
        for _ in range(50):
            req = urllib.request.Request(f"{base}/cancelled", headers=headers)
            listed = json.load(urllib.request.urlopen(req))["cancelled"]
            if created.task_id in listed:
                break
            await anyio.sleep(0.1)
        check("the server saw the cancel (GET /cancelled)", created.task_id in listed, listed)
        tool = await client.call_tool("cancelled_tasks", {})
        check("cancelled_tasks lists it too", created.task_id in json.dumps(tool.structured_content), tool)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token")
    args = parser.parse_args()
    anyio.run(smoke, args.url, args.token)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
