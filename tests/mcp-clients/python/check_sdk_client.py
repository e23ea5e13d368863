#!/usr/bin/env python3
"""Drives maitred's MCP server with the official MCP Python SDK (a client we did not
write), once per protocol revision: list the tools, call getCustomers,
getAvailableTimes and createBooking, and check what comes back.

    check_sdk_client.py --url http://127.0.0.1:8082/mcp --token "$TOKEN"

Exits 0 when every check passes, 1 otherwise; prints one line per check.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

EXPECTED_TOOLS = [
    "getCustomers", "getCustomerById", "getFeedback", "getFeedbackById", "getOpeningHours",
    "getOpeningHoursById", "getTables", "getBookings", "getBookingById", "getAvailableDates",
    "getAvailableTimes", "findAvailability", "getMonthReport", "createBooking", "updateBooking", "addBookingNote",
]

# Client mode per revision: "legacy" is the initialize handshake with a session;
# "2026-07-28" adopts the stateless revision directly.
REVISIONS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}

failures: list[str] = []


def check(revision: str, what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} [{revision}] {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(f"[{revision}] {what}")


async def exercise(url: str, token: str, revision: str, guest: str) -> None:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=REVISIONS[revision]) as client:
            check(revision, "negotiated the revision", str(client.protocol_version) == revision, client.protocol_version)

            tools = (await client.list_tools()).tools
            names = [t.name for t in tools]
            check(revision, "lists the 15 tools in their fixed order", names == EXPECTED_TOOLS, names)
            check(revision, "every tool has an output schema", all(t.output_schema for t in tools))

            # The SDK validates structuredContent against each tool's output schema.
            customers = await client.call_tool("getCustomers", {"limit": 5, "sort": "name:asc"})
            data = customers.structured_content or {}
            check(revision, "getCustomers returns customers", not customers.is_error and data.get("returned") == 5, data)
            check(revision, "getCustomers reports the total", data.get("total", 0) >= 50, data.get("total"))

            dates = await client.call_tool("getAvailableDates", {"people": 2})
            # The last date offered: today's may have only its last slot left in the
            # evening, and the taken-table check needs other free times that day.
            day = ((dates.structured_content or {}).get("dates") or [None])[-1]
            check(revision, "getAvailableDates names a date", bool(day), dates.structured_content)

            times = await client.call_tool("getAvailableTimes", {"date": day, "people": 2})
            free = (times.structured_content or {}).get("times", [])
            check(revision, "getAvailableTimes lists free times", not times.is_error and len(free) > 0, times.structured_content)

            booking = await client.call_tool(
                "createBooking",
                {"date": day, "time": free[-1], "people": 2, "guestName": guest, "guestEmail": "sdk@example.org"},
            )
            created = booking.structured_content or {}
            check(revision, "createBooking books a table", not booking.is_error and bool(created.get("_id")), booking.content)
            check(revision, "the booking has a table", len(created.get("tables", [])) == 1, created.get("tables"))

            found = await client.call_tool("getBookings", {"fromDate": day, "toDate": day, "customQuery": f"guest.name = '{guest}'"})
            check(revision, "the new booking is listed", (found.structured_content or {}).get("total") == 1, found.structured_content)

            taken = await client.call_tool(
                "createBooking",
                {"date": day, "time": free[-1], "people": 2, "guestName": "Second Guest",
                 "tableIds": [created.get("tables", [{}])[0].get("_id", "")]},
            )
            text = " ".join(c.text for c in taken.content if getattr(c, "type", "") == "text")
            check(revision, "a taken table is an error naming free times", bool(taken.is_error) and "nearest free times" in text, text)


async def main(url: str, token: str, guest: str) -> int:
    for revision in REVISIONS:
        try:
            await exercise(url, token, revision, f"{guest} {revision}")
        except Exception as error:  # noqa: BLE001 - any failure is a failed check
            check(revision, "the session ran to the end", False, repr(error))
    print(f"\n{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--guest", default="SDK Guest", help="the name the bookings are made for")
    args = parser.parse_args()
    sys.exit(anyio.run(main, args.url, args.token, args.guest))
