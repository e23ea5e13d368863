"""Ask the fixed questions through maitred's chat API, one at a time, and record for
each what the stream showed: the tools called, the answer, its first token's time, the
total, how it finished, the usage the model reported; and whether the answer states the
backend's truth and whether markup leaked into it.

usage: ask.py --mode MODE --gateway URL --backend URL --work DIR --out results.jsonl
              [--questions a,b] [--timeout S] [--deadline EPOCH]

Tokens come from `maitred token` run in DIR (the started maitred's directory), fresh for
every question: a run outlives a token's 15 minutes.
"""

import argparse
import http.client
import json
import re
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from questions import QUESTIONS, Backend, leaks_in, next_open_day, prose  # noqa: E402


def token(work: str, client: str) -> str:
    return subprocess.run(
        ["maitred", "token", "--client", client],
        cwd=work, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()


def cancel(gateway: str, bearer: str, message_id: str) -> None:
    url = urllib.parse.urlsplit(gateway)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request("POST", f"/api/v1/resos/chat/{message_id}/cancel", body=b"{}",
                     headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"})
        conn.getresponse().read()
    except OSError:
        pass
    finally:
        conn.close()


def ask(gateway: str, bearer: str, question: str, timeout: float) -> dict:
    """One question through the chat API; the stream read until `done` or the timeout."""
    url = urllib.parse.urlsplit(gateway)
    record = {"tools": [], "tool_results": [], "usage": [], "answer": "", "error": None,
              "finish": None, "first_token_s": None, "total_s": None, "events": 0}
    started = time.monotonic()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    message_id = None
    try:
        conn.request("POST", "/api/v1/resos/stream/chat",
                     body=json.dumps({"question": question}).encode(),
                     headers={"Authorization": f"Bearer {bearer}",
                              "Content-Type": "application/json",
                              "Accept": "text/event-stream"})
        response = conn.getresponse()
        if response.status != 200:
            record["error"] = f"http_{response.status}"
            record["answer"] = response.read().decode(errors="replace")[:500]
            return record
        event = None
        while True:
            if time.monotonic() - started > timeout:
                record["error"] = "client_timeout"
                break
            line = response.readline()  # a ping comes every 15 s while nothing else does
            if not line:
                break
            line = line.decode().rstrip("\r\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event:
                data = json.loads(line[5:].strip())
                record["events"] += 1
                now = round(time.monotonic() - started, 2)
                if event == "meta":
                    message_id = data.get("message_id") or message_id
                    record["message_id"] = message_id
                    record.setdefault("model", data.get("model"))
                elif event == "token":
                    if record["first_token_s"] is None:
                        record["first_token_s"] = now
                    record["answer"] += data.get("text", "")
                elif event == "tool_call":
                    record["tools"].append(data.get("tool"))
                elif event == "tool_result":
                    record["tool_results"].append(data.get("status"))
                elif event == "usage":
                    record["usage"].append(data)
                elif event == "error":
                    record["error"] = data.get("code")
                    record["error_message"] = data.get("message")
                elif event == "done":
                    record["finish"] = data.get("finish_reason")
                    break
                event = None
    except TimeoutError:
        record["error"] = "client_timeout"  # nothing, not even a ping, for 60 s
    except (OSError, http.client.HTTPException) as e:
        record["error"] = record["error"] or f"client: {e}"
    finally:
        record["total_s"] = round(time.monotonic() - started, 2)
        if record["error"] == "client_timeout" and message_id:
            cancel(gateway, bearer, message_id)
        conn.close()
    return record


def prompt_estimates(log: str | None, message_id: str | None) -> list[int]:
    """The gateway's estimate of each model turn's prompt, in tokens, from its debug log."""
    if not log or not message_id or not os.path.exists(log):
        return []
    turns = []
    with open(log, errors="replace") as f:
        for line in f:
            if message_id in line and "prompt size in estimated tokens" in line:
                parts = re.findall(r"\b(system|user|assistant|tool|tools)=(\d+)", line)
                turns.append(sum(int(n) for _, n in parts))
    return turns


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--gateway", required=True)
    p.add_argument("--backend", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--log", help="maitred's log, for its estimate of each turn's prompt")
    p.add_argument("--out", required=True)
    p.add_argument("--questions", default=",".join(QUESTIONS))
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--deadline", type=float, default=0, help="epoch seconds; no question starts after it")
    args = p.parse_args()

    backend = Backend(f"{args.backend}/api/v1/resos", token(args.work, "maitred-mcp"))
    day = next_open_day(backend)
    names = [n.strip() for n in args.questions.split(",") if n.strip()]
    unknown = [n for n in names if n not in QUESTIONS]
    if unknown:
        print(f"unknown questions {unknown}; known: {', '.join(QUESTIONS)}", file=sys.stderr)
        return 2
    with open(args.out, "a") as out:
        for name in names:
            build, expected_tools = QUESTIONS[name]
            backend.token = token(args.work, "maitred-mcp")
            question, truth, check = build(backend, day)
            left = args.deadline - time.time() if args.deadline else args.timeout
            if left < 30:
                record = {"error": "skipped: out of time", "tools": [], "answer": "", "usage": []}
            else:
                record = ask(args.gateway, token(args.work, "maitred-cli"), question,
                             min(args.timeout, left))
            time.sleep(0.5)  # the log line of the last turn is written as the stream ends
            record["prompt_estimates"] = prompt_estimates(args.log, record.get("message_id"))
            tools = [t.split("__", 1)[-1] for t in record["tools"] if t]
            record.update(
                mode=args.mode, name=name, question=question, truth=truth,
                expected_tools=sorted(expected_tools),
                right_tool=bool(expected_tools & set(tools)),
                correct=bool(prose(record["answer"]).strip()) and check(prose(record["answer"])),
                leaks=leaks_in(record["answer"]),
            )
            record["loop_completed"] = bool(record["tools"]) and bool(record["answer"].strip()) \
                and record.get("finish") == "stop" and not record["error"]
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(
                f"  [{args.mode}] {name}: tools={','.join(tools) or '-'} "
                f"correct={'yes' if record['correct'] else 'no'} leaks={','.join(record['leaks']) or '-'} "
                f"first_token={record.get('first_token_s')} total={record.get('total_s')} "
                f"finish={record.get('finish')} error={record.get('error') or '-'}",
                flush=True,
            )
            print(f"      {record['answer'][:200]!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
