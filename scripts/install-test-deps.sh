#!/usr/bin/env bash
# Installs what `make test` needs beyond Go: the aws CLI v2 (Debian's awscli),
# the local cloud stand-ins (MinIO, fake-gcs-server, Azurite; see
# scripts/testenv.sh and docs/testing.md), OpenTofu and tflint for the
# offline checks of terraform/ (scripts/deploytools.sh, docs/deploy.md),
# staticcheck for `make lint` and helm for the chart check (deploy/helm/check)
# (scripts/deploytools.sh, docs/testing.md, docs/kubernetes.md), and
# Debian's Chromium for the console's headless-browser test
# (e2e/console_test.go, docs/console.md), and Debian's s3cmd, rclone and
# python3-boto3 for the tools-at-their-defaults test (scripts/test-tools.sh),
# and python3-torch, python3-venv, python3-setuptools and python3-wheel for
# the Python client's test (scripts/test-python-client.sh: pip builds the
# package offline into a venv), rsync for the mount's region test
# (e2e/mount_region_test.go), and Debian's s3fs and fuse3 (fusermount3, which
# `rclone mount` needs) for the mount benchmark's peers (bench/mount_test.go).
# Idempotent: reruns skip what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
missing=()
[ -x /usr/bin/aws ] || missing+=(awscli)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v curl >/dev/null || missing+=(curl)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v chromium >/dev/null || missing+=(chromium)
[ -x /usr/bin/s3cmd ] || missing+=(s3cmd)
[ -x /usr/bin/rclone ] || missing+=(rclone)
[ -x /usr/bin/rsync ] || missing+=(rsync)
[ -x /usr/bin/s3fs ] || missing+=(s3fs)
[ -x /usr/bin/fusermount3 ] || missing+=(fuse3)
/usr/bin/python3 -c 'import boto3' 2>/dev/null || missing+=(python3-boto3)
/usr/bin/python3 -c 'import torch' 2>/dev/null || missing+=(python3-torch)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
/usr/bin/python3 -c 'import setuptools' 2>/dev/null || missing+=(python3-setuptools)
/usr/bin/python3 -c 'import wheel' 2>/dev/null || missing+=(python3-wheel)
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
/usr/bin/aws --version
chromium --version 2>/dev/null
./scripts/testenv.sh install
./scripts/testenv.sh status
./scripts/deploytools.sh install
./scripts/deploytools.sh status
