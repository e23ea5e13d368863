#!/usr/bin/env python3
"""Asks maitred's gateway questions while it talks to LLMock, an OpenAI-compatible
mock we did not write, through the real async-openai path: a scripted tool call,
then LLMock's own answer; 500, 503 and 429 answers before the first token, which
must be retried out of sight; a stream that drops midway; one that ends early
without finishing. LLMock gives its verdict on how the client behaved.

    check_gateway.py --gateway http://localhost:8081 --llmock http://127.0.0.1:PORT --token TOKEN
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request

failures: list[str] = []


def check(what: str, ok: bool, detail: object = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def post(url: str, body: dict, token: str | None = None) -> urllib.request.addinfourl:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    return urllib.request.urlopen(request, timeout=60)


def ask(gateway: str, token: str, question: str) -> list[tuple[str, dict]]:
    """The chat stream's events, parsed from the raw SSE text."""
    events, name, data = [], None, []
    with post(f"{gateway}/api/v1/resos/stream/chat", {"question": question}, token) as response:
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and name:
                events.append((name, json.loads("".join(data))))
                name, data = None, []
                if events[-1][0] == "done":
                    break
    return events


def verdict(llmock: str) -> bool:
    with urllib.request.urlopen(f"{llmock}/_llmock/verdict", timeout=10) as response:
        found = json.loads(response.read())
    if found.get("findings"):
        print(json.dumps(found["findings"], indent=2))
    return found.get("passed") is True and not found.get("findings")


def verdict_text(llmock: str) -> str:
    with urllib.request.urlopen(f"{llmock}/_llmock/verdict?format=text", timeout=10) as response:
        return response.read().decode()


def scenario(llmock: str, behaviors: list[dict]) -> None:
    post(f"{llmock}/_llmock/reset", {}).read()
    post(f"{llmock}/_llmock/scenario", {"behaviors": behaviors}).read()


def main(gateway: str, llmock: str, token: str) -> int:
    # A tool call we script, then LLMock writes the answer from the tool's result.
    scenario(llmock, [{"type": "reply", "tool_calls": [{"name": "resos__getCustomers", "arguments": {"limit": 1}}]}])
    events = ask(gateway, token, "How many customers do we have?")
    names = [name for name, _ in events]
    check("the stream starts with meta and ends with done", names[:1] == ["meta"] and names[-1:] == ["done"], names)
    check("meta names the real model", events[0][1].get("model") == "gpt-4o-mini", events[0][1])
    calls = [data for name, data in events if name == "tool_call"]
    check("the model's tool call reached the MCP tool", [c["tool"] for c in calls] == ["getCustomers"], calls)
    results = [data for name, data in events if name == "tool_result"]
    check("the tool answered", [r["status"] for r in results] == ["ok"] and "60" in results[0]["summary"], results)
    text = "".join(data["text"] for name, data in events if name == "token")
    check("LLMock's answer streamed as tokens", len(text) > 0, text)
    check("usage was reported", "usage" in names, names)
    check("finished normally", events[-1][1] == {"finish_reason": "stop"}, events[-1])
    check("LLMock's verdict on the exchange: no finding", verdict(llmock), verdict(llmock))

    # Failures before the first token are retried out of sight: with backoff, and
    # after a 429 no sooner than Retry-After asks. LLMock judges the timing.
    for behaviors, what in [
        ([{"type": "fail", "status": 500}], "a 500"),
        ([{"type": "fail", "status": 503, "times": 2}], "two 503s"),
        ([{"type": "fail", "status": 429, "retry_after": 1}], "a 429 with Retry-After: 1"),
    ]:
        scenario(llmock, behaviors)
        events = ask(gateway, token, "What are the opening hours?")
        names = [name for name, _ in events]
        check(f"{what} before the first token is retried invisibly",
              "error" not in names and events[-1][1] == {"finish_reason": "stop"}, events[-3:])
        check(f"LLMock's verdict on the retries after {what}: no finding", verdict(llmock), verdict_text(llmock))

    # The connection drops after a few chunks: an error, not a silent half answer.
    scenario(llmock, [{"type": "stream_fault", "kind": "disconnect", "after_chunks": 3}])
    events = ask(gateway, token, "Tell me about the restaurant")
    check("a dropped stream ends in error", [n for n, _ in events][-2:] == ["error", "done"]
          and events[-1][1]["finish_reason"] == "error", events[-3:])

    # The stream ends early without a finish reason: also an error.
    scenario(llmock, [{"type": "stream_fault", "kind": "truncate", "after_chunks": 3}])
    events = ask(gateway, token, "Tell me about the restaurant again")
    check("a truncated stream is not taken for an answer", events[-1][1]["finish_reason"] == "error", events[-3:])

    # LLMock's verdict on these two would say the client "accepted" the cut stream
    # because it did not retry; the gateway deliberately does not repeat a request
    # whose tokens already reached the user: it reports the error instead.

    print(f"\n{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--llmock", required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    sys.exit(main(args.gateway.rstrip("/"), args.llmock.rstrip("/"), args.token))
