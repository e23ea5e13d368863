#!/usr/bin/env bash
# Runs the MCP conformance suite (pinned) against a bearer-protected MCP server, in
# both protocol revisions. The suite cannot send credentials, so a loopback proxy
# adds the token; it forwards Host and Origin untouched, so the DNS-rebinding
# checks still test the server itself.
#   MCP_TOKEN=… run.sh http://localhost:8082/mcp RESULTS_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
url="$1"
out="$2"
: "${MCP_TOKEN:?MCP_TOKEN must hold a token for the MCP server}"
version=0.2.0-alpha.12
origin="$(printf '%s' "$url" | sed -E 's#^(https?://[^/]+).*#\1#')"
path="$(printf '%s' "$url" | sed -E 's#^https?://[^/]+##')"
proxy_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

mkdir -p "$out"
node "$here/auth-proxy.mjs" "$proxy_port" "$origin" 2>"$out/proxy.log" &
proxy=$!
trap 'kill "$proxy" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do (echo >"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break; sleep 0.1; done

status=0
for revision in 2025-11-25 2026-07-28; do
  rm -rf "${out:?}/$revision"
  mkdir -p "$out/$revision"
  # The suite needs Node 22; npx fetches it (and the pinned suite) on first use.
  if npx -y -p node@22 -p "@modelcontextprotocol/conformance@$version" conformance server \
      --url "http://127.0.0.1:$proxy_port$path" --requirements "$revision" \
      --expected-failures "$here/baseline-$revision.yml" -o "$out/$revision" \
      >"$out/$revision.log" 2>&1; then
    echo "conformance $revision: every applicable check passes (the rest is in the baseline)"
  else
    status=1
    echo "conformance $revision: FAILED (log: $out/$revision.log)"
    sed -n '/Unexpected\|Stale/,$p' "$out/$revision.log" | head -40
  fi
done
python3 "$here/summarize.py" "$out" "$here" >"$out/table.md"
exit $status
