# Shared by the check scripts: build maitred, start it in an empty directory on free
# ports, and set up pinned Python tools. Source it; it sets `root`, `bin_dir`, `work`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && cargo build --locked --quiet --bin maitred)
bin_dir="$(cd "$target/debug" && pwd)"
export PATH="$bin_dir:$PATH"
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${KEEP_WORK:-}" ] && trap - EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_ready URL PID LOG: until URL answers, or the process dies.
wait_ready() {
  for _ in $(seq 1 150); do
    curl -s -o /dev/null -f "$1" && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3"; echo "the process behind $1 exited" >&2; return 1; }
    sleep 0.2
  done
  cat "$3"; echo "$1 did not become ready" >&2; return 1
}

# start_maitred [ENV=VALUE…]: every role on free ports (or the ports already exported).
start_maitred() {
  export MAITRED_BACKEND_PORT="${MAITRED_BACKEND_PORT:-$(free_port)}"
  export MAITRED_MCP_PORT="${MAITRED_MCP_PORT:-$(free_port)}"
  export MAITRED_GATEWAY_PORT="${MAITRED_GATEWAY_PORT:-$(free_port)}"
  (cd "$work" && exec env "$@" maitred >"$work/maitred.log" 2>&1) &
  pids+=($!)
  wait_ready "http://localhost:$MAITRED_BACKEND_PORT/readyz" "${pids[-1]}" "$work/maitred.log"
  wait_ready "http://localhost:$MAITRED_MCP_PORT/readyz" "${pids[-1]}" "$work/maitred.log"
  wait_ready "http://localhost:$MAITRED_GATEWAY_PORT/readyz" "${pids[-1]}" "$work/maitred.log"
}

# token CLIENT: a client-credentials token, from inside the started maitred's directory.
token() {
  (cd "$work" && maitred token --client "$1")
}

# venv NAME REQUIREMENTS: a virtualenv under .venv/NAME with the pinned packages.
venv() {
  local dir="${MAITRED_VENV_DIR:-$root/.venv}/$1"
  [ -x "$dir/bin/python" ] || python3 -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$2" >&2
  echo "$dir"
}
