"""Time to first token with trace export on and off, asked in turns.

Two `maitred all` processes, alike but for OTEL_EXPORTER_OTLP_ENDPOINT, are asked the
same tool-calling question one after the other (on, off, on, off, ...), so both see
the same machine; the time is from sending the question to its first `token` event
(the model's first turn, the tool call through the MCP server and the backend, and the
second turn's first words).

    python ttft.py --on URL TOKEN --off URL TOKEN [--questions 25]
"""

import argparse
import json
import statistics
import time
import urllib.request

QUESTION = "How many tables are there?"


def first_token_ms(gateway, token):
    request = urllib.request.Request(
        f"{gateway}/api/v1/resos/stream/chat",
        data=json.dumps({"question": QUESTION}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    started = time.perf_counter()
    first = None
    with urllib.request.urlopen(request, timeout=60) as response:
        event = None
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event:"):
                event = line[6:].strip()
                if event == "token" and first is None:
                    first = (time.perf_counter() - started) * 1000
                if event == "done":
                    break
    if first is None:
        raise SystemExit("an answer had no token")
    return first


def summary(samples):
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered):.2f} ms, p90 {p90:.2f} ms, mean {statistics.mean(ordered):.2f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--on", nargs=2, required=True, metavar=("URL", "TOKEN"))
    parser.add_argument("--off", nargs=2, required=True, metavar=("URL", "TOKEN"))
    parser.add_argument("--questions", type=int, default=25)
    args = parser.parse_args()
    # One of each first, not counted: connections, the tool catalogue, caches.
    first_token_ms(*args.on)
    first_token_ms(*args.off)
    on, off = [], []
    for _ in range(args.questions):
        on.append(first_token_ms(*args.on))
        off.append(first_token_ms(*args.off))
    print(f"time to first token, {args.questions} questions each, in turns")
    print(f"  traces on:  {summary(on)}")
    print(f"  traces off: {summary(off)}")
    print(f"  added at p50: {statistics.median(on) - statistics.median(off):+.2f} ms")


if __name__ == "__main__":
    main()
