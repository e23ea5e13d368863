# Sourced (after lib.sh) by the connected-accounts checks: the lab's virtualenv, and
# start_lab DIR [lab.py flags…], a lab on free ports, waited for until its
# ready.json is written.
accounts_python="$(venv connected-accounts "$root/tests/connected-accounts/requirements.txt")/bin/python"

start_lab() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  "$accounts_python" "$root/tests/connected-accounts/lab.py" run --state-dir "$dir" "$@" >"$dir/lab.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 150); do
    [ -f "$dir/ready.json" ] && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$dir/lab.log"; echo "the lab in $dir exited" >&2; return 1; }
    sleep 0.2
  done
  cat "$dir/lab.log"; echo "the lab in $dir did not become ready" >&2; return 1
}
