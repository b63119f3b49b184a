#!/usr/bin/env bash
# Installs what `make test` needs beyond Go: the aws CLI v2 (Debian's awscli)
# and the local cloud stand-ins (MinIO, fake-gcs-server, Azurite; see
# scripts/testenv.sh and docs/testing.md). Idempotent: reruns skip what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
missing=()
[ -x /usr/bin/aws ] || missing+=(awscli)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
/usr/bin/aws --version
./scripts/testenv.sh install
./scripts/testenv.sh status
