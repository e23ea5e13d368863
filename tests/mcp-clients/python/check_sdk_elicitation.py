#!/usr/bin/env python3
"""Drives maitred's MCP tools that talk back with the official MCP Python SDK (a client
we did not write), once per protocol revision: createBooking without the guest's
details asks for them with a form (answered through the SDK's elicitation_callback),
a declined form books nothing, and findAvailability's per-day progress reaches the
SDK's progress_callback.

    check_sdk_elicitation.py --url http://127.0.0.1:8082/mcp --token "$TOKEN"

On 2025-11-25 the form arrives as an elicitation/create request in the middle of the
call; on 2026-07-28 as an InputRequiredResult that the SDK's Client.call_tool answers
and retries by itself (SEP-2322). Exits 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date, timedelta
from typing import Any

import anyio
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# "legacy" is the initialize handshake; a version string adopts that revision directly.
REVISIONS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}

failures: list[str] = []


def check(revision: str, what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} [{revision}] {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(f"[{revision}] {what}")


def text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")


class Person:
    """Answers each form with `action` (and `content` on accept), keeping what it was shown."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = content
        self.forms: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.forms.append(params)
        if self.action == "accept":
            return types.ElicitResult(action="accept", content=self.content)
        return types.ElicitResult(action=self.action)


async def session(url: str, token: str, revision: str, person: Person):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    client = Client(streamable_http_client(url, http_client=http), mode=REVISIONS[revision],
                    elicitation_callback=person)
    return http, client


async def free_time(client: Client) -> tuple[str, str]:
    """The last date still offered and a free time on it."""
    dates = await client.call_tool("getAvailableDates", {"people": 2})
    day = ((dates.structured_content or {}).get("dates") or [""])[-1]
    times = await client.call_tool("getAvailableTimes", {"date": day, "people": 2})
    free = (times.structured_content or {}).get("times") or [""]
    return day, free[0]


async def bookings_for(client: Client, day: str, guest: str) -> int:
    found = await client.call_tool("getBookings", {"fromDate": day, "toDate": day, "customQuery": f"guest.name = '{guest}'"})
    return (found.structured_content or {}).get("total", -1)


async def exercise(url: str, token: str, revision: str) -> None:
    guest = f"Form Guest {revision}"
    person = Person("accept", {"guestName": guest, "guestEmail": "form.guest@example.org"})
    http, client = await session(url, token, revision, person)
    async with http, client:
        check(revision, "negotiated the revision", str(client.protocol_version) == revision, client.protocol_version)
        day, time = await free_time(client)
        booked = await client.call_tool("createBooking", {"date": day, "time": time, "people": 2})
        check(revision, "one form was shown", len(person.forms) == 1, person.forms)
        if person.forms:
            form = person.forms[0]
            schema = form.requested_schema if hasattr(form, "requested_schema") else {}
            check(revision, "the form asks who the booking is for", form.message.startswith("Who is the booking for?"), form.message)
            check(revision, "the form's schema is the guest's name, email and phone",
                  sorted((schema or {}).get("properties", {})) == ["guestEmail", "guestName", "guestPhone"]
                  and (schema or {}).get("required") == ["guestName"], schema)
        created = booked.structured_content or {}
        check(revision, "accepting the form books the table", not booked.is_error and bool(created.get("_id")), text(booked))
        check(revision, "the booking carries the form's details",
              (created.get("guest") or {}).get("email") == "form.guest@example.org", created.get("guest"))
        check(revision, "the booking is listed once", await bookings_for(client, day, guest) == 1)

        steps: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            steps.append((done, total, message))

        first = date.today() + timedelta(days=1)
        last = first + timedelta(days=2)
        found = await client.call_tool(
            "findAvailability", {"from": first.isoformat(), "to": last.isoformat(), "people": 2},
            progress_callback=progress,
        )
        days = (found.structured_content or {}).get("days", [])
        check(revision, "findAvailability returns the three days", not found.is_error and len(days) == 3, text(found))
        await anyio.sleep(0.2)  # a notification handled just after the result
        expected = [float(n) for n in (1, 2, 3)]
        check(revision, "a progress notification per day, in order, out of 3",
              [s[0] for s in steps] == expected and all(s[1] == 3 for s in steps), steps)
        counts = [len(d.get("times", [])) for d in days]
        wanted = [f"Checked {(first + timedelta(days=i)).strftime('%a %-d %b')}: " for i in range(3)]
        check(revision, "each progress message names the day and its free times",
              len(steps) == 3 and all((s[2] or "").startswith(w) for s, w in zip(steps, wanted))
              and all(str(c) in (s[2] or "") or (c == 0 and "no free times" in (s[2] or ""))
                      for s, c in zip(steps, counts)), steps)

    declining = Person("decline")
    http, client = await session(url, token, revision, declining)
    async with http, client:
        day, time = await free_time(client)
        refused = await client.call_tool("createBooking", {"date": day, "time": time, "people": 2, "guestName": "Declined Guest"})
        check(revision, "a declined form is an error result that says what to do",
              bool(refused.is_error) and "declined" in text(refused) and "nothing was booked" in text(refused), text(refused))
        check(revision, "a declined form books nothing", await bookings_for(client, day, "Declined Guest") == 0)


async def main(url: str, token: str) -> int:
    for revision in REVISIONS:
        try:
            await exercise(url, token, revision)
        except Exception as error:  # noqa: BLE001 - any failure is a failed check
            check(revision, "the session ran to the end", False, repr(error))
    print(f"\n{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    sys.exit(anyio.run(main, args.url, args.token))
