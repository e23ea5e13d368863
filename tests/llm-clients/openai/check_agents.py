#!/usr/bin/env python3
"""Runs a short agent of the OpenAI Agents SDK whose model is maitred: the SDK's
Responses model pointed at the gateway's /v1, as `OpenAIResponsesModel`.

    check_agents.py --base-url http://localhost:8081/v1 --token "$CHAT_TOKEN" --expect 42

Checks: the agent's run ends with an answer that states --expect, the gateway's tool
call among the run's items (an `mcp_call`); streamed, the text arrives in deltas; a
second run goes on from the first with `previous_response_id`.
Exits 0 when every check passes, 1 otherwise; prints one line per check.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

QUESTION = "How many customers do we have?"

failures: list[str] = []


def check(what: str, ok: bool, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


async def run(args: argparse.Namespace) -> None:
    # The SDK's traces go to OpenAI's own service by default: not from here.
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=args.base_url, api_key=args.token, max_retries=0)
    agent = Agent(
        name="Front of house",
        instructions="You answer questions about the restaurant, briefly.",
        model=OpenAIResponsesModel(model="maitred", openai_client=client),
    )

    result = await Runner.run(agent, QUESTION)
    answer = str(result.final_output)
    check(f"agents: the run's final output states {args.expect}", args.expect in answer, answer)
    raw = [getattr(item, "raw_item", None) for item in result.new_items]
    check("agents: the gateway's tool call is among the run's items (mcp_call)",
          any(getattr(r, "type", None) == "mcp_call" for r in raw),
          [getattr(r, "type", None) for r in raw])
    check("agents: the run's last response is maitred's", str(result.last_response_id)
          .startswith("resp_"), result.last_response_id)

    streamed = Runner.run_streamed(agent, QUESTION)
    deltas = 0
    async for event in streamed.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas += 1
    check("agents: streamed, the text arrives in deltas", deltas >= 1, deltas)
    check(f"agents: streamed, the final output states {args.expect}",
          args.expect in str(streamed.final_output), streamed.final_output)

    follow = await Runner.run(agent, "And how many tables are there?",
                              previous_response_id=result.last_response_id)
    check("agents: a run goes on from the last with previous_response_id",
          bool(str(follow.final_output).strip()) and follow.last_response_id != result.last_response_id,
          follow.final_output)
    await client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--expect", required=True, help="text the answer must contain")
    args = parser.parse_args()
    asyncio.run(run(args))
    print(f"{'all checks passed' if not failures else f'{len(failures)} checks failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
