#!/usr/bin/env python3
"""Nothing runs twice: the official MCP Python SDK calls createBooking twice with the
same idempotency key in the call's `_meta` (`io.maitred/idempotencyKey`, the key the
gateway sends with each call of a write tool). maitred's MCP server passes it to the
backend as `Idempotency-Key`: the second call answers with the first booking, and
one booking is made. The same key with another booking is refused.

    check_sdk_idempotency.py --url http://127.0.0.1:8082/mcp --token "$TOKEN"

Exits 0 when every check passes, 1 otherwise; prints one line per check.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

IDEMPOTENCY_KEY_META = "io.maitred/idempotencyKey"

failures: list[str] = []


def check(what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


async def exercise(url: str, token: str) -> None:
    run = uuid.uuid4().hex[:12]
    guest = f"Idempotent Ida {run}"
    meta = {IDEMPOTENCY_KEY_META: f"sdk-check-{run}"}
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
            dates = await client.call_tool("getAvailableDates", {"people": 2})
            day = ((dates.structured_content or {}).get("dates") or [None])[-1]
            check("getAvailableDates names a date", bool(day), dates.structured_content)
            times = await client.call_tool("getAvailableTimes", {"date": day, "people": 2})
            free = (times.structured_content or {}).get("times", [])
            check("getAvailableTimes lists two free times", len(free) >= 2, times.structured_content)

            booking = {"date": day, "time": free[0], "people": 2, "guestName": guest, "guestEmail": "ida@example.org"}
            first = await client.call_tool("createBooking", booking, meta=meta)
            again = await client.call_tool("createBooking", booking, meta=meta)
            first_id = (first.structured_content or {}).get("_id")
            check("the first createBooking books a table", not first.is_error and bool(first_id), first.content)
            check("the same call again answers with the same booking",
                  not again.is_error and (again.structured_content or {}).get("_id") == first_id,
                  (again.structured_content, again.content))

            found = await client.call_tool(
                "getBookings", {"fromDate": day, "toDate": day, "customQuery": f"guest.name = '{guest}'"})
            check("one booking was made", (found.structured_content or {}).get("total") == 1, found.structured_content)

            other = dict(booking, time=free[1])
            refused = await client.call_tool("createBooking", other, meta=meta)
            check("the same key with another booking is refused", bool(refused.is_error), refused.content)
            found = await client.call_tool(
                "getBookings", {"fromDate": day, "toDate": day, "customQuery": f"guest.name = '{guest}'"})
            check("still one booking", (found.structured_content or {}).get("total") == 1, found.structured_content)


async def main(url: str, token: str) -> int:
    try:
        await exercise(url, token)
    except Exception as error:  # noqa: BLE001 - any failure is a failed check
        check("the session ran to the end", False, repr(error))
    print(f"\n{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    sys.exit(anyio.run(main, args.url, args.token))
