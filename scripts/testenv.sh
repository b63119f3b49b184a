#!/usr/bin/env bash
# Installs and runs the local cloud stand-ins that tests use through
# internal/testenv: MinIO (S3), fake-gcs-server (GCS) and Azurite (Azure Blob).
#
#   scripts/testenv.sh install [minio|gcs|azurite ...]  install (default: all); idempotent
#   scripts/testenv.sh status                           what is installed, what is running
#   scripts/testenv.sh start minio|gcs|azurite          run one in the background for manual use
#   scripts/testenv.sh stop [minio|gcs|azurite ...]     stop what `start` started (default: all)
#
# Everything lives in $FEDGATE_TESTENV_CACHE (default ~/.cache/fedgate-testenv):
# Go binaries in bin/, Azurite in azurite/node_modules/, manual runs in run/.
# MinIO is AGPL: it is only ever built and run as a separate binary.
set -euo pipefail

CACHE=${FEDGATE_TESTENV_CACHE:-$HOME/.cache/fedgate-testenv}
BIN=$CACHE/bin
RUN=$CACHE/run

MINIO_MOD=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
GCS_MOD=github.com/fsouza/fake-gcs-server
GCS_VERSION=v1.56.1
AZURITE_VERSION=3.35.0
AZURITE_BLOB=$CACHE/azurite/node_modules/.bin/azurite-blob

log() { echo "testenv: $*" >&2; }
die() { log "$*"; exit 1; }

# go_version_of BINARY: the main module version recorded in a Go binary, or "".
go_version_of() {
  [ -x "$1" ] || return 0
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

azurite_version() {
  local pkg=$CACHE/azurite/node_modules/azurite/package.json
  [ -f "$pkg" ] || return 0
  node -p "require('$pkg').version" 2>/dev/null || true
}

# timed NAME CMD...: runs CMD and logs how long it took.
timed() {
  local name=$1 start=$SECONDS; shift
  "$@"
  log "$name installed in $((SECONDS - start))s"
}

install_minio() {
  local have; have=$(go_version_of "$BIN/minio")
  if [ -x "$BIN/minio" ] && { [ "$have" = "$MINIO_VERSION" ] || [ -z "$have" ]; }; then
    log "minio: present ($BIN/minio ${have:-unknown version})"; return
  fi
  [ -n "$have" ] && log "minio: have $have, want $MINIO_VERSION"
  log "minio: building $MINIO_MOD@$MINIO_VERSION (~7 min on 2 cores)"
  timed minio env GOBIN="$BIN" GOFLAGS="-mod=mod -buildvcs=false" \
    go install "$MINIO_MOD@$MINIO_VERSION"
}

install_gcs() {
  local have; have=$(go_version_of "$BIN/fake-gcs-server")
  if [ "$have" = "$GCS_VERSION" ]; then
    log "fake-gcs-server: present ($have)"; return
  fi
  log "fake-gcs-server: building $GCS_MOD@$GCS_VERSION (~3 min)"
  timed fake-gcs-server env GOBIN="$BIN" GOFLAGS="-mod=mod -buildvcs=false" \
    go install "$GCS_MOD@$GCS_VERSION"
}

install_azurite() {
  command -v node >/dev/null && command -v npm >/dev/null ||
    die "azurite needs node and npm (Debian: apt-get install -y nodejs npm)"
  local have; have=$(azurite_version)
  if [ "$have" = "$AZURITE_VERSION" ] && [ -e "$AZURITE_BLOB" ]; then
    log "azurite: present ($have)"; return
  fi
  log "azurite: npm install azurite@$AZURITE_VERSION (~40 s)"
  mkdir -p "$CACHE/azurite"
  timed azurite npm install --prefix "$CACHE/azurite" "azurite@$AZURITE_VERSION" \
    --no-audit --no-fund --no-update-notifier --loglevel=error
}

cmd_install() {
  local kinds=("$@")
  [ ${#kinds[@]} -eq 0 ] && kinds=(minio gcs azurite)
  mkdir -p "$BIN"
  # One installer at a time per cache (CI jobs and developers may race).
  exec 9>"$CACHE/.install.lock"
  if command -v flock >/dev/null; then flock 9; fi
  for k in "${kinds[@]}"; do
    case $k in
      minio) install_minio ;;
      gcs | fake-gcs | fake-gcs-server) install_gcs ;;
      azurite | azure) install_azurite ;;
      *) die "unknown kind $k (minio, gcs, azurite)" ;;
    esac
  done
}

cmd_status() {
  echo "cache: $CACHE"
  local v
  if [ -x "$BIN/minio" ]; then v=$(go_version_of "$BIN/minio"); echo "minio:           installed ${v:-?} (want $MINIO_VERSION)"
  else echo "minio:           missing"; fi
  if [ -x "$BIN/fake-gcs-server" ]; then v=$(go_version_of "$BIN/fake-gcs-server"); echo "fake-gcs-server: installed ${v:-?} (want $GCS_VERSION)"
  else echo "fake-gcs-server: missing"; fi
  v=$(azurite_version)
  if [ -n "$v" ] && [ -e "$AZURITE_BLOB" ]; then echo "azurite:         installed $v (want $AZURITE_VERSION)"
  else echo "azurite:         missing"; fi
  command -v node >/dev/null && echo "node:            $(node --version)" || echo "node:            missing (azurite needs it)"
  local k
  for k in minio gcs azurite; do
    if running "$k"; then echo "running $k: pid $(cat "$RUN/$k.pid"), $(cat "$RUN/$k.env" | tr '\n' ' ')"; fi
  done
}

running() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

free_port() {
  # python3 is on PATH here; fall back to a random high port.
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

cmd_start() {
  [ $# -eq 1 ] || die "usage: $0 start minio|gcs|azurite"
  local kind=$1 port dir
  case $kind in fake-gcs | fake-gcs-server) kind=gcs ;; azure) kind=azurite ;; esac
  running "$kind" && die "$kind already running (pid $(cat "$RUN/$kind.pid")); see $RUN/$kind.env"
  mkdir -p "$RUN"
  dir=$RUN/$kind.data
  port=$(free_port)
  case $kind in
    minio)
      [ -x "$BIN/minio" ] || die "minio missing; run: $0 install minio"
      local user=fgadmin pass; pass=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
      MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$pass MINIO_BROWSER=off MINIO_UPDATE=off \
        MINIO_CALLHOME_ENABLE=off MINIO_CI_CD=1 \
        setsid "$BIN/minio" server "$dir" --address "127.0.0.1:$port" \
        --console-address "127.0.0.1:$(free_port)" --certs-dir "$RUN/minio.certs" --quiet \
        >"$RUN/minio.log" 2>&1 </dev/null &
      printf 'AWS_ENDPOINT_URL=http://127.0.0.1:%s\nAWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\nAWS_REGION=us-east-1\n' \
        "$port" "$user" "$pass" >"$RUN/minio.env"
      ready_url=http://127.0.0.1:$port/minio/health/ready
      ;;
    gcs)
      [ -x "$BIN/fake-gcs-server" ] || die "fake-gcs-server missing; run: $0 install gcs"
      mkdir -p "$dir"
      setsid "$BIN/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$port" \
        -public-host "127.0.0.1:$port" -external-url "http://127.0.0.1:$port" \
        -backend filesystem -filesystem-root "$dir" -data "$RUN/gcs.seed" \
        >"$RUN/gcs.log" 2>&1 </dev/null &
      printf 'STORAGE_EMULATOR_HOST=127.0.0.1:%s\n' "$port" >"$RUN/gcs.env"
      ready_url=http://127.0.0.1:$port/storage/v1/b?project=fedgate-test
      ;;
    azurite)
      [ -e "$AZURITE_BLOB" ] || die "azurite missing; run: $0 install azurite"
      setsid node "$AZURITE_BLOB" --blobHost 127.0.0.1 --blobPort "$port" --location "$dir" \
        --skipApiVersionCheck --loose --disableTelemetry --silent \
        >"$RUN/azurite.log" 2>&1 </dev/null &
      printf 'AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:%s/devstoreaccount1;\n' \
        "$port" >"$RUN/azurite.env"
      ready_url=http://127.0.0.1:$port/devstoreaccount1?comp=list
      ;;
    *) die "unknown kind $kind (minio, gcs, azurite)" ;;
  esac
  echo $! >"$RUN/$kind.pid"
  local i
  for i in $(seq 1 120); do
    # Any HTTP answer counts for azurite (unauthenticated: 403); the others need 200.
    code=$(curl -s -o /dev/null -w '%{http_code}' --noproxy '*' "$ready_url" || true)
    if { [ "$kind" = azurite ] && [ "$code" != 000 ]; } || [ "$code" = 200 ]; then
      log "$kind ready (pid $(cat "$RUN/$kind.pid")); environment in $RUN/$kind.env:"
      cat "$RUN/$kind.env"
      return
    fi
    running "$kind" || { tail -50 "$RUN/$kind.log" >&2; die "$kind exited"; }
    sleep 0.5
  done
  tail -50 "$RUN/$kind.log" >&2
  cmd_stop "$kind"
  die "$kind not ready after 60s"
}

cmd_stop() {
  local kinds=("$@") k pid i
  [ ${#kinds[@]} -eq 0 ] && kinds=(minio gcs azurite)
  for k in "${kinds[@]}"; do
    case $k in fake-gcs | fake-gcs-server) k=gcs ;; azure) k=azurite ;; esac
    [ -f "$RUN/$k.pid" ] || continue
    pid=$(cat "$RUN/$k.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL -- "-$pid" 2>/dev/null || true
      log "$k stopped (pid $pid)"
    fi
    rm -rf "$RUN/$k.pid" "$RUN/$k.env" "$RUN/$k.data" "$RUN/$k.certs" "$RUN/$k.seed"
  done
}

case ${1:-} in
  install) shift; cmd_install "$@" ;;
  status) cmd_status ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
