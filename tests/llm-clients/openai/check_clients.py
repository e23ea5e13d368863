#!/usr/bin/env python3
"""Uses maitred's gateway as a model through clients we did not write: the official
openai Python SDK and LangChain's ChatOpenAI, against /v1 (the OpenAI-compatible API).

    check_clients.py --base-url http://localhost:8081/v1 --token "$CHAT_TOKEN" --expect 42

Checks: models.list() has `maitred`; a streamed and a non-streamed question are
answered with a tool result (seen on the extra `maitred` field) and the answer states
--expect; a wrong key is the SDK's AuthenticationError; LangChain streams the answer.
Exits 0 when every check passes, 1 otherwise; prints one line per check.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import openai
from langchain_openai import ChatOpenAI

QUESTION = "How many customers do we have?"

failures: list[str] = []


def check(what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def extra(obj: Any) -> dict[str, Any]:
    """maitred's extra field, which the SDK keeps as an unknown field."""
    return (obj.model_extra or {}).get("maitred") or {}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--expect", required=True, help="text every answer must contain")
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key=args.token, max_retries=0)

    models = [m.id for m in client.models.list()]
    check("openai: models.list() has maitred", "maitred" in models, models)

    stream = client.chat.completions.create(
        model="maitred",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, calls, results, finish, usage = "", [], [], None, None
    for chunk in stream:
        calls += [extra(chunk)["tool_call"]] if "tool_call" in extra(chunk) else []
        results += [extra(chunk)["tool_result"]] if "tool_result" in extra(chunk) else []
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
        usage = chunk.usage or usage
    check("openai: streamed answer ends with stop", finish == "stop", finish)
    check("openai: streamed answer called a tool", len(calls) >= 1, calls)
    check("openai: streamed tool result is ok",
          bool(results) and all(r["status"] == "ok" for r in results), results)
    check(f"openai: streamed answer states {args.expect}", args.expect in text, text)
    check("openai: include_usage gives the usage", usage is not None and usage.total_tokens > 0,
          usage)

    completion = client.chat.completions.create(
        model="maitred", messages=[{"role": "user", "content": QUESTION}]
    )
    answer = completion.choices[0].message.content or ""
    activity = extra(completion).get("tool_activity", [])
    check("openai: completion id is chatcmpl-…", completion.id.startswith("chatcmpl-"),
          completion.id)
    check("openai: completion model echoed", completion.model == "maitred", completion.model)
    check("openai: completion called a tool",
          any("tool_result" in a and a["tool_result"]["status"] == "ok" for a in activity),
          activity)
    check(f"openai: completion states {args.expect}", args.expect in answer, answer)

    try:
        openai.OpenAI(base_url=args.base_url, api_key="not-a-token", max_retries=0).models.list()
        check("openai: a wrong key is refused", False, "it was accepted")
    except openai.AuthenticationError as error:
        check("openai: a wrong key is AuthenticationError with code invalid_api_key",
              error.code == "invalid_api_key", error.body)

    llm = ChatOpenAI(model="maitred", base_url=args.base_url, api_key=args.token,
                     streaming=True, max_retries=0)
    pieces = [chunk.content for chunk in llm.stream(QUESTION)]
    streamed = "".join(p for p in pieces if isinstance(p, str))
    check("langchain: ChatOpenAI streamed in several chunks", len(pieces) > 2, pieces)
    check(f"langchain: ChatOpenAI's answer states {args.expect}", args.expect in streamed,
          streamed)

    print(f"{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
