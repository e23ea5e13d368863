#!/usr/bin/env python3
"""Turns the conformance suite's checks.json files into the markdown table kept in
docs/mcp-conformance.md: one row per scenario and revision, with the reason for every
scenario that does not pass, taken from the baseline's comments.

    summarize.py RESULTS_DIR BASELINE_DIR > table.md
"""

import glob
import json
import os
import re
import sys

results, baselines = sys.argv[1], sys.argv[2]


def reasons(name):
    """entry -> the comment beside it, from one of the yml files here."""
    out = {}
    for line in open(os.path.join(baselines, name)):
        m = re.match(r"\s*-\s*([\w:.-]+)\s*#\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


unscored = reasons("not-scored.yml")


print("| revision | scenario | checks passed | checks failed | verdict |")
print("|---|---|---|---|---|")
for revision in ["2025-11-25", "2026-07-28"]:
    why = reasons(f"baseline-{revision}.yml")
    for directory in sorted(glob.glob(os.path.join(results, revision, "server-*"))):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", os.path.basename(directory))
        try:
            checks = json.load(open(os.path.join(directory, "checks.json")))
        except (OSError, ValueError):
            continue
        bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
        passed = sum(1 for c in checks if c["status"] == "SUCCESS")
        if not bad:
            verdict = "pass"
        elif scenario in unscored:
            verdict = f"not scored: {unscored[scenario]}"
        elif scenario in why:
            verdict = f"not applicable: {why[scenario]}"
        else:
            notes = sorted({why.get(f"{scenario}:{c['id']}", "") for c in bad} - {""})
            unexplained = [c["id"] for c in bad if f"{scenario}:{c['id']}" not in why]
            verdict = "pass, except: " + "; ".join(notes) if notes and not unexplained else "FAIL: " + ", ".join(unexplained)
        print(f"| {revision} | {scenario} | {passed} | {len(bad)} | {verdict} |")
