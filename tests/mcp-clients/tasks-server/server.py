#!/usr/bin/env python3
"""A third-party MCP server that runs tools as tasks: the `io.modelcontextprotocol/tasks`
extension (SEP-2663, protocol 2026-07-28) as the published `fastmcp-tasks` package
(FastMCP's own implementation, on its Docket engine, in memory here) serves it. We did
not write the extension's server side; this file only declares three tools.

Start it (the pinned packages in requirements.txt, in their own virtualenv):

    python3 -m venv .venv/tasks-server
    .venv/tasks-server/bin/pip install -r tests/mcp-clients/tasks-server/requirements.txt
    .venv/tasks-server/bin/python tests/mcp-clients/tasks-server/server.py --port 8093 [--token SECRET]

It serves Streamable HTTP at http://127.0.0.1:<port>/mcp. Without --token it takes
any caller (configure it in maitred with `auth = { type = "none" }`); with --token only
requests carrying `Authorization: Bearer SECRET` (maitred: a static bearer; others get
401). fastmcp-tasks scopes tasks by the caller's token (client id and subject): with
--token every caller holds the same one, and without it every caller is anonymous, so
either way all callers share one scope.
It is ready when `GET /healthz` answers 200. A client that declares the tasks
extension (in its per-request `_meta` capabilities) gets a task (`resultType: "task"`)
for each of the three tools; any other client gets them as plain calls (never_ends then
never answers: do not call it without the extension).

Tools:

- `slow_count(n: int = 10)`: counts to n, one step every 0.5 s (`--step` to change),
  each step a progress report that `tasks/get` shows as the status message
  "Counted i of n"; completes with the total: structured content `{"result": n}`.
- `needs_name()`: asks for a name first: the task goes `input_required` with one input
  request, an `elicitation/create` form with a required string property `name`. Its
  key is fastmcp-tasks' own, `<taskId>:<digest>` (not `name`): answer under the key
  `tasks/get` shows, `tasks/update` `{"inputResponses": {"<that key>": {"action":
  "accept", "content": {"name": "Ada"}}}}`; it then completes with the text "Hello,
  Ada!" (no structured content). A declined or cancelled form completes with a tool
  error (`isError: true`).
- `never_ends()`: works until cancelled, a status message per 0.5 s ("Still working:
  i"). When `tasks/cancel` reaches it, it records its task id, so a test can see the
  cancel got through to the server: `GET /cancelled` answers `{"cancelled": [ids]}`,
  and the tool `cancelled_tasks()` (plain, not a task) returns the same list.

A smoke check of all of it with the official MCP Python SDK: smoke.py.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp_tasks import TasksExtension
from fastmcp_tasks.context import get_task_context
from starlette.requests import Request
from starlette.responses import JSONResponse

log = logging.getLogger("tasks-server")

STEP = 0.5
#: The task ids whose never_ends saw its cancel, oldest first.
CANCELLED: list[str] = []

mcp = FastMCP(
    "tasks-demo",
    instructions="Demo tools that run as background tasks (the MCP tasks extension): slow_count counts "
    "slowly, needs_name asks for a name, never_ends runs until cancelled.",
)
mcp.add_extension(TasksExtension(url="memory://"))


@mcp.tool(task=True)
async def slow_count(ctx: Context, n: int = 10) -> int:
    """Count from 1 to n, half a second a step (it runs in the background as a task),
    and return n, the total."""
    if not 1 <= n <= 1000:
        raise ToolError("n must be between 1 and 1000")
    for i in range(1, n + 1):
        await asyncio.sleep(STEP)
        await ctx.report_progress(i, n, f"Counted {i} of {n}")
    return n


@mcp.tool(task=True)
async def needs_name(ctx: Context):
    """Ask the person for their name (a form), then greet them."""
    answer = (ctx.input_responses or {}).get("name")
    if answer is None:
        form = mcp_types.ElicitRequestFormParams(
            message="What is your name?",
            requested_schema={
                "type": "object",
                "properties": {"name": {"type": "string", "title": "Name", "minLength": 1}},
                "required": ["name"],
            },
        )
        return mcp_types.InputRequiredResult(input_requests={"name": mcp_types.ElicitRequest(params=form)})
    action = getattr(answer, "action", None)
    content = getattr(answer, "content", None) or {}
    if action != "accept" or not str(content.get("name", "")).strip():
        raise ToolError(f"no name was given (the form was {action or 'not answered'})")
    return f"Hello, {str(content['name']).strip()}!"


@mcp.tool(task=True)
async def never_ends(ctx: Context) -> str:
    """Work until cancelled (run it as a task, and cancel it with tasks/cancel)."""
    task = get_task_context()
    task_id = task.task_id if task else "(not a task)"
    i = 0
    try:
        while True:
            await asyncio.sleep(STEP)
            i += 1
            await ctx.report_progress(i, None, f"Still working: {i}")
    except asyncio.CancelledError:
        CANCELLED.append(task_id)
        log.info("never_ends task %s was cancelled after %d steps", task_id, i)
        raise


@mcp.tool
def cancelled_tasks() -> list[str]:
    """The ids of the never_ends tasks that were cancelled, oldest first."""
    return list(CANCELLED)


@mcp.custom_route("/cancelled", methods=["GET"])
async def cancelled(_request: Request) -> JSONResponse:
    return JSONResponse({"cancelled": CANCELLED})


@mcp.custom_route("/healthz", methods=["GET"])
async def healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def main() -> None:
    global STEP
    parser = argparse.ArgumentParser(description="an MCP server whose tools run as tasks (fastmcp-tasks)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--token", help="take only requests with this bearer token")
    parser.add_argument("--step", type=float, default=STEP, help="seconds per step of slow_count and never_ends")
    args = parser.parse_args()
    STEP = args.step
    logging.basicConfig(level=logging.INFO)
    if args.token:
        from fastmcp.server.auth.providers.jwt import StaticTokenVerifier

        mcp.auth = StaticTokenVerifier(tokens={args.token: {"client_id": "maitred", "scopes": []}})
    mcp.run(transport="http", host=args.host, port=args.port, path="/mcp", show_banner=False)


if __name__ == "__main__":
    main()
