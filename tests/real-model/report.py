"""Print the results of a run (ask.py's results.jsonl) as one markdown table per mode,
each followed by its summary line.

usage: report.py results.jsonl [--strict]

With --strict the exit status is 1 when any answer leaked markup or ended in an error
(a timeout included): the issue's targets for a gate, whatever the answers' accuracy.
"""

import json
import statistics
import sys


def seconds(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def prompt_tokens(record: dict) -> str:
    """Per model turn: as the server reported it, else (~) as the gateway estimated it."""
    counts = [u.get("prompt_tokens") for u in record.get("usage", []) if u.get("prompt_tokens")]
    if counts:
        return " / ".join(f"{c:,}" for c in counts)
    estimates = record.get("prompt_estimates") or []
    return " / ".join(f"~{c:,}" for c in estimates) if estimates else "–"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> int:
    records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    strict = "--strict" in sys.argv[2:]
    modes = list(dict.fromkeys(r["mode"] for r in records))
    for mode in modes:
        rows = [r for r in records if r["mode"] == mode]
        print(f"\n### {mode}\n")
        print("| question | tools called | correct | markup leaked | first token s | total s "
              "| prompt tokens | finish / error |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            tools = ", ".join(t.split("__", 1)[-1] for t in r.get("tools", []) if t) or "none"
            if r.get("tools") and not r.get("right_tool"):
                tools += " (not " + "/".join(r["expected_tools"]) + ")"
            ending = r.get("finish") or "–"
            if r.get("error"):
                ending += f" / {r['error']}"
            print(
                f"| {r['name']} | {cell(tools)} | {'yes' if r.get('correct') else 'no'} "
                f"| {cell(', '.join(r.get('leaks', [])) or 'no')} | {seconds(r.get('first_token_s'))} "
                f"| {seconds(r.get('total_s'))} | {prompt_tokens(r)} | {cell(ending)} |"
            )
        firsts = [r["first_token_s"] for r in rows if r.get("first_token_s") is not None]
        median = f"{statistics.median(firsts):.1f} s" if firsts else "–"
        print(
            f"\n{mode}: loop completed (tool called, answer streamed) "
            f"{sum(bool(r.get('loop_completed')) for r in rows)} of {len(rows)}; "
            f"right tool {sum(bool(r.get('right_tool')) for r in rows)}; "
            f"correct {sum(bool(r.get('correct')) for r in rows)}; "
            f"leaks {sum(bool(r.get('leaks')) for r in rows)}; "
            f"errors {sum(bool(r.get('error')) for r in rows)}; "
            f"median first token {median}"
        )
    failed = [r for r in records if r.get("leaks") or r.get("error")]
    if strict and (failed or not records):
        print(f"\nstrict: {len(failed)} of {len(records)} answers leaked markup or ended in an error")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
