# Sourced by the client scripts (test-awscli.sh, test-tools.sh): runs a
# fedgate server for them. Needs BIN set; sets WORK, PID and EP, and kills
# the server and removes WORK on exit.
WORK=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && { kill -9 "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }; rm -rf "$WORK"; }
trap cleanup EXIT

# start_server AK SK [FLAG...]: a server on a free loopback port with a
# fresh data dir, these root keys and any further flags; EP is its endpoint
# once it is ready.
start_server() {
  local ak=$1 sk=$2
  shift 2
  "$BIN" server --listen 127.0.0.1:0 --data-dir "$WORK/data" --log-level warn \
    --access-key "$ak" --secret-key "$sk" "$@" >"$WORK/out" 2>"$WORK/log" &
  PID=$!
  for _ in $(seq 1 300); do
    EP=$(sed -n 's/.*S3 endpoint \(http:[^ ]*\).*/\1/p' "$WORK/out" | head -1)
    [ -n "$EP" ] && curl -fs "$EP/_fedgate/readyz" >/dev/null 2>&1 && break
    kill -0 "$PID" 2>/dev/null || { cat "$WORK/log"; echo "FAIL: server exited"; exit 1; }
    sleep 0.1
  done
  [ -n "${EP:-}" ] || { echo "FAIL: server did not start"; cat "$WORK/log"; exit 1; }
}
