#!/usr/bin/env bash
# Installs what `make test` needs beyond Go: the aws CLI v2 (Debian's awscli).
set -euo pipefail
if [ ! -x /usr/bin/aws ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq awscli >/dev/null
fi
/usr/bin/aws --version
