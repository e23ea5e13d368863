#!/usr/bin/env python3
"""Drives maitred's long tool, getMonthReport, through the tasks extension
(`io.modelcontextprotocol/tasks`, SEP-2663, 2026-07-28) with the official MCP Python
SDK (mcp 2.3.0), a client we did not write:

- call → the server answers with a task (CreateTaskResult) → tasks/get until it is
  completed, the report's numbers agreeing with getBookings for the same month;
- a second report cancelled with tasks/cancel ends `cancelled` before its last day;
- a report without a month is `input_required` with a form for the month, answered
  with tasks/update, and then completes for that month;
- a 2025-11-25 client gets the same report in the call, with a progress
  notification per day.

    check_sdk_tasks.py --url http://127.0.0.1:8082/mcp --token "$TOKEN"

mcp 2.3.0 has no tasks client of its own, but it has what one is built from (SEP-2133
extensions): a `ClientExtension` advertises the extension in the client's
capabilities, its `ResultClaim` for `resultType: "task"` parses the task the server
answers `tools/call` with (and, through `Client.call_tool`, resolves it), and
`ClientSession.send_request` sends `tasks/get`, `tasks/update` and `tasks/cancel`.
The few models below are the extension's wire shapes. Exits 0 when every check
passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import calendar
import sys
from collections.abc import Sequence
from datetime import date
from typing import Any, ClassVar, Literal

import anyio
import mcp_types
from mcp import Client, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"
TOOL = "getMonthReport"
TERMINAL = {"completed", "failed", "cancelled"}

failures: list[str] = []


def check(what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


# The extension's wire shapes (SEP-2663): flat task fields, camelCase on the wire.
class TaskFields(mcp_types.Result):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(alias="taskId")
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(default=None, alias="ttlMs")
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class CreatedTask(TaskFields):
    """What `tools/call` answers when the server runs the call as a task."""

    result_type: Literal["task"] = Field(alias="resultType")


class TaskState(TaskFields):
    """What `tasks/get` answers: the task, and its result, error or input requests."""

    result_type: Literal["complete"] = Field(default="complete", alias="resultType")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")


class TaskId(mcp_types.RequestParams):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")


class TaskAnswers(mcp_types.RequestParams):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class GetTask(mcp_types.Request[TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    # The task id is the request's Mcp-Name header on 2026-07-28 (rmcp's server requires it).
    name_param: ClassVar[str | None] = "taskId"
    params: TaskId


class UpdateTask(mcp_types.Request[TaskAnswers, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    # The task id is the request's Mcp-Name header on 2026-07-28 (rmcp's server requires it).
    name_param: ClassVar[str | None] = "taskId"
    params: TaskAnswers


class CancelTask(mcp_types.Request[TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    # The task id is the request's Mcp-Name header on 2026-07-28 (rmcp's server requires it).
    name_param: ClassVar[str | None] = "taskId"
    params: TaskId


async def get(session: ClientSession, task_id: str) -> TaskState:
    return await session.send_request(GetTask(params=TaskId(task_id=task_id)), TaskState)


async def poll(session: ClientSession, task_id: str, until, seen: list[str] | None = None,
               limit: float = 120.0) -> TaskState:
    """tasks/get at the server's poll interval until `until(state)` holds."""
    with anyio.fail_after(limit):
        while True:
            state = await get(session, task_id)
            if seen is not None and state.status_message and (not seen or seen[-1] != state.status_message):
                seen.append(state.status_message)
            if until(state):
                return state
            # Honour the server's interval, but look a little more often to catch each step.
            await anyio.sleep(min((state.poll_interval_ms or 500) / 1000, 0.25))


class Tasks(ClientExtension):
    """The client half of the tasks extension, from the SDK's extension hooks: its
    claim finishes a task `Client.call_tool` got by polling tasks/get."""

    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve),)

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        final = await poll(ctx.session, created.task_id, lambda s: s.status in TERMINAL)
        if final.status == "completed" and final.result is not None:
            return types.CallToolResult.model_validate(final.result)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"task {final.status}: {final.error}")],
                                    is_error=True)


def month_bounds(month: str) -> tuple[str, str, int]:
    year, number = (int(p) for p in month.split("-"))
    days = calendar.monthrange(year, number)[1]
    return f"{month}-01", f"{month}-{days:02d}", days


async def agrees(client: Client, what: str, report: dict[str, Any], month: str) -> None:
    first, last, days = month_bounds(month)
    check(f"{what}: the report is for {month}", report.get("month") == month, report.get("month"))
    check(f"{what}: every day of the month is read", report.get("daysCounted") == days == len(report.get("days", [])),
          report.get("daysCounted"))
    listed = await client.call_tool("getBookings", {"fromDate": first, "toDate": last, "limit": 1})
    total = (listed.structured_content or {}).get("total")
    check(f"{what}: its bookings are getBookings' total for the month", report.get("bookings") == total,
          (report.get("bookings"), total))
    day_sum = sum(d["bookings"] for d in report.get("days", []))
    weekday_covers = sum(w["covers"] for w in report.get("perWeekday", []))
    check(f"{what}: the days and weekdays add up", day_sum == report.get("bookings")
          and weekday_covers == report.get("covers"), (day_sum, weekday_covers, report.get("covers")))
    busiest = report.get("busiestDay") or {}
    most = max((d["covers"] for d in report.get("days", [])), default=0)
    check(f"{what}: the busiest day has the most covers", busiest.get("covers", 0) == most, (busiest, most))


async def exercise(url: str, token: str, month: str) -> None:
    first, last, days = month_bounds(month)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="auto",
                            extensions=[Tasks()]) as client:
        check("2026-07-28 is negotiated", client.protocol_version == "2026-07-28", client.protocol_version)
        declared = (client.server_capabilities.extensions or {}).get(TASKS)
        check("the server declares the tasks extension", declared is not None, client.server_capabilities)
        session = client.session

        # The SDK's own path: Client.call_tool resolves the task through the claim.
        result = await client.call_tool(TOOL, {"month": month})
        check("Client.call_tool finishes the task", not result.is_error, result.content)
        await agrees(client, "through the claim", result.structured_content or {}, month)

        # Driven by hand: the task, its steps, its result.
        created = await session.call_tool(TOOL, {"month": month}, allow_claimed=True)
        check("tools/call answers with a task", isinstance(created, CreatedTask), type(created).__name__)
        if not isinstance(created, CreatedTask):
            return
        check("the task is working, with a poll interval and a TTL",
              created.status == "working" and (created.poll_interval_ms or 0) > 0 and (created.ttl_ms or 0) > 0,
              created)
        seen: list[str] = []
        final = await poll(session, created.task_id, lambda s: s.status in TERMINAL, seen)
        check("tasks/get ends completed", final.status == "completed", final)
        check("its status message names each day as it goes",
              any(m.startswith("Day ") and f" of {days} (" in m for m in seen), seen)
        report = ((final.result or {}).get("structuredContent")) or {}
        await agrees(client, "by hand", report, month)

        # A second one, cancelled.
        created = await session.call_tool(TOOL, {"month": month}, allow_claimed=True)
        seen = []
        await poll(session, created.task_id, lambda s: (s.status_message or "").startswith("Day 2 of"), seen)
        await session.send_request(CancelTask(params=TaskId(task_id=created.task_id)), mcp_types.Result)
        final = await poll(session, created.task_id, lambda s: s.status in TERMINAL, seen)
        check("tasks/cancel ends it cancelled", final.status == "cancelled", final)
        check("it stopped before its last day", not any(m.startswith(f"Day {days} of") for m in seen), seen)

        # No month: the task asks for it, and goes on with the answer.
        created = await session.call_tool(TOOL, {}, allow_claimed=True)
        asking = await poll(session, created.task_id, lambda s: s.status in TERMINAL | {"input_required"})
        request = (asking.input_requests or {}).get("month") or {}
        check("without a month the task is input_required with a form for it",
              asking.status == "input_required" and request.get("method") == "elicitation/create"
              and "month" in request.get("params", {}).get("requestedSchema", {}).get("properties", {}), asking)
        answer = {"month": {"action": "accept", "content": {"month": month}}}
        await session.send_request(UpdateTask(params=TaskAnswers(task_id=created.task_id, input_responses=answer)),
                                   mcp_types.Result)
        final = await poll(session, created.task_id, lambda s: s.status in TERMINAL)
        report = ((final.result or {}).get("structuredContent")) or {}
        check("tasks/update's month is the one reported", final.status == "completed"
              and report.get("month") == month, final)

    # A 2025-11-25 client: the report in the call, a progress notification per day.
    steps: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps.append((done, total, message))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        result = await client.call_tool(TOOL, {"month": month}, progress_callback=progress)
        check("2025-11-25: the report comes in the call", not result.is_error and result.structured_content,
              result.content)
        await agrees(client, "2025-11-25", result.structured_content or {}, month)
        await anyio.sleep(0.3)
        check("2025-11-25: a progress notification per day", len(steps) == days
              and steps[-1][0] == days and steps[-1][1] == days, steps[-3:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--month", default=date.today().strftime("%Y-%m"),
                        help="the month to report on, YYYY-MM (default: this month, which the seed books)")
    args = parser.parse_args()
    anyio.run(exercise, args.url, args.token, args.month)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
