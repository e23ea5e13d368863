#!/usr/bin/env python3
"""Uses maitred's Responses API (/v1/responses) through the official openai Python
SDK, as its users would: `client.responses`.

    check_responses.py one --base-url http://localhost:8081/v1 --token "$CHAT_TOKEN" \
        --other-token "$SOMEONE_ELSES_TOKEN" --expect 42
    check_responses.py replicas --base-url http://localhost:8081/v1 \
        --other-replica http://localhost:8083/v1 --token "$CHAT_TOKEN"

`one`, against a maitred answering with its offline model: a question streamed (the
SDK's own stream helper puts the events back together) and in one object, each with
the gateway's tool call as an `mcp_call` item; a background response retrieved until
it completes, then its stream replayed from after an event; `previous_response_id`;
a booking that waits for approval (`mcp_approval_request`), approved by a new
response whose `mcp_call` runs once; someone else's response refused as not found;
a response deleted; client-side tools refused.

`replicas`, against two gateway replicas sharing Redis and PostgreSQL, answering with
a slow scripted upstream: a background response streamed from one replica and
continued on the other with `starting_after`; and cancelled through the other.

Exits 0 when every check passes, 1 otherwise; prints one line per check.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from typing import Any

import openai

QUESTION = "How many customers do we have?"

failures: list[str] = []


def check(what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def maitred(obj: Any) -> dict[str, Any]:
    """maitred's extra field on a response, which the SDK keeps as an unknown field."""
    return (obj.model_extra or {}).get("maitred") or {}


def of_type(response: Any, kind: str) -> list[Any]:
    return [item for item in response.output if item.type == kind]


def wait_for_end(client: openai.OpenAI, response_id: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress") or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def refused(what: str, error: type[Exception], call: Any) -> None:
    try:
        call()
        check(what, False, "it was accepted")
    except error:
        check(what, True)
    except openai.APIError as other:
        check(what, False, f"{type(other).__name__}: {other}")


def one(args: argparse.Namespace) -> None:
    client = openai.OpenAI(base_url=args.base_url, api_key=args.token, max_retries=0)

    # Streamed, through the SDK's helper, which rebuilds the response from the events.
    seen: list[Any] = []
    with client.responses.stream(model="maitred", input=QUESTION) as stream:
        for event in stream:
            seen.append(event)
        final = stream.get_final_response()
    kinds = [event.type for event in seen]
    numbers = [event.sequence_number for event in seen]
    check("stream: response.created first, response.completed last",
          kinds[:1] == ["response.created"] and kinds[-1:] == ["response.completed"], kinds)
    check("stream: sequence numbers count from 0 without a gap",
          numbers == list(range(len(seen))), numbers)
    check("stream: the tool call streams as an mcp_call item",
          "response.mcp_call.completed" in kinds and "response.output_item.added" in kinds, kinds)
    check("stream: text comes as output_text deltas",
          kinds.count("response.output_text.delta") >= 1, kinds)
    check(f"stream: the final response states {args.expect}", args.expect in final.output_text,
          final.output_text)
    calls = of_type(final, "mcp_call")
    check("stream: its mcp_call names the server and the tool",
          bool(calls) and calls[0].server_label == "resos" and calls[0].name.startswith("get")
          and calls[0].status == "completed", calls)

    # One object.
    response = client.responses.create(model="maitred", input=QUESTION)
    check("create: completed, with a resp_ id", response.status == "completed"
          and response.id.startswith("resp_"), (response.status, response.id))
    check(f"create: output_text states {args.expect}", args.expect in response.output_text,
          response.output_text)
    check("create: the tool call is an mcp_call item with its output",
          any(c.status == "completed" and c.output for c in of_type(response, "mcp_call")),
          response.output)
    check("create: usage counts tokens", response.usage is not None
          and response.usage.total_tokens > 0, response.usage)
    check("create: maitred names the stored conversation",
          str(maitred(response).get("conversation_id", "")).startswith("conv_"),
          response.model_extra)

    # Background: at once in progress, then retrieved until done, then replayed.
    begun = client.responses.create(model="maitred", input=QUESTION, background=True)
    check("background: answered at once, queued or in progress",
          begun.status in ("queued", "in_progress") and begun.background, begun.status)
    done = wait_for_end(client, begun.id)
    check("background: retrieved, it completes", done.status == "completed", done.status)
    check(f"background: and states {args.expect}", args.expect in done.output_text,
          done.output_text)
    replay = list(client.responses.retrieve(begun.id, stream=True, starting_after=3))
    check("background: its stream resumes after sequence number 3",
          bool(replay) and replay[0].sequence_number == 4
          and replay[-1].type == "response.completed", [e.type for e in replay[:3]])
    check("background: the replay ends with the same response",
          replay[-1].response.output_text == done.output_text)

    # The conversation goes on with previous_response_id.
    follow = client.responses.create(model="maitred", input="And how many tables are there?",
                                     previous_response_id=done.id)
    check("previous_response_id: completed, and names the response it continues",
          follow.status == "completed" and follow.previous_response_id == done.id,
          (follow.status, follow.previous_response_id))
    check("previous_response_id: in the same conversation",
          maitred(follow).get("conversation_id") == maitred(done).get("conversation_id"))

    # A booking waits for the person's approval, given in a new response.
    day = (datetime.date.today() + datetime.timedelta(days=3)).isoformat()
    # With every detail the booking needs: a tool's form cannot be filled in on this API.
    ask = f"Book a table for 2 on {day} at 19:00 for Ada Lovelace, ada.lovelace@example.com"
    asked = client.responses.create(model="maitred", input=ask)
    requests = of_type(asked, "mcp_approval_request")
    check("approval: the response ends with an mcp_approval_request",
          asked.status == "completed" and len(requests) == 1
          and requests[0].name == "createBooking", asked.output)
    if requests:
        request = requests[0]
        approval = [{"type": "mcp_approval_response", "approval_request_id": request.id,
                     "approve": True}]
        other = openai.OpenAI(base_url=args.base_url, api_key=args.other_token, max_retries=0)
        refused("approval: someone else cannot answer it", openai.BadRequestError,
                lambda: other.responses.create(model="maitred", input=approval))
        approved = client.responses.create(model="maitred", previous_response_id=asked.id,
                                           input=approval)
        ran = of_type(approved, "mcp_call")
        check("approval: approved, the call runs in the new response",
              approved.status == "completed" and len(ran) == 1
              and ran[0].approval_request_id == request.id and ran[0].status == "completed",
              approved.output)
        refused("approval: a second answer is refused", openai.BadRequestError,
                lambda: client.responses.create(model="maitred", previous_response_id=asked.id,
                                                input=approval))

    # Someone else's response is not found; nor is a deleted one.
    other = openai.OpenAI(base_url=args.base_url, api_key=args.other_token, max_retries=0)
    refused("someone else's response: NotFoundError", openai.NotFoundError,
            lambda: other.responses.retrieve(response.id))
    refused("someone else's previous_response_id: NotFoundError", openai.NotFoundError,
            lambda: other.responses.create(model="maitred", input="Hi",
                                           previous_response_id=response.id))
    refused("someone else cannot cancel it", openai.NotFoundError,
            lambda: other.responses.cancel(response.id))
    client.responses.delete(follow.id)
    refused("delete: a deleted response is not found", openai.NotFoundError,
            lambda: client.responses.retrieve(follow.id))
    refused("client-side tools: BadRequestError", openai.BadRequestError,
            lambda: client.responses.create(
                model="maitred", input="Hi",
                tools=[{"type": "function", "name": "f", "parameters": {}, "strict": False}]))


def replicas(args: argparse.Namespace) -> None:
    a = openai.OpenAI(base_url=args.base_url, api_key=args.token, max_retries=0)
    b = openai.OpenAI(base_url=args.other_replica, api_key=args.token, max_retries=0)

    stream = a.responses.create(model="maitred", input="Tell me a long story",
                                background=True, stream=True)
    seen: list[Any] = []
    for event in stream:
        seen.append(event)
        if len(seen) >= 10:
            break
    stream.close()
    response_id = seen[0].response.id
    last = seen[-1].sequence_number
    rest = list(b.responses.retrieve(response_id, stream=True, starting_after=last))
    check("replicas: the stream continues on the other replica right after the last event",
          bool(rest) and rest[0].sequence_number == last + 1, [e.sequence_number for e in rest[:2]])
    every = seen + rest
    check("replicas: every event once, numbered without a gap",
          [e.sequence_number for e in every] == list(range(len(every))))
    text = "".join(e.delta for e in every if e.type == "response.output_text.delta")
    final = rest[-1] if rest else None
    check("replicas: it ends with response.completed",
          final is not None and final.type == "response.completed", final and final.type)
    check("replicas: the deltas from both replicas make the whole text",
          final is not None and text == final.response.output_text and len(text.split()) > 20,
          text)

    begun = a.responses.create(model="maitred", input="Tell me another", background=True)
    time.sleep(0.5)
    cancelled = b.responses.cancel(begun.id)
    check("replicas: cancelled through the other replica", cancelled.status == "cancelled",
          cancelled.status)
    check("replicas: read on the first, it is cancelled",
          a.responses.retrieve(begun.id).status == "cancelled")


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    one_parser = sub.add_parser("one")
    one_parser.add_argument("--base-url", required=True)
    one_parser.add_argument("--token", required=True)
    one_parser.add_argument("--other-token", required=True)
    one_parser.add_argument("--expect", required=True)
    replicas_parser = sub.add_parser("replicas")
    replicas_parser.add_argument("--base-url", required=True)
    replicas_parser.add_argument("--other-replica", required=True)
    replicas_parser.add_argument("--token", required=True)
    args = parser.parse_args()
    try:
        (one if args.what == "one" else replicas)(args)
    except openai.APIError as error:
        check(f"no unexpected API error ({type(error).__name__})", False, error)
    print(f"{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
