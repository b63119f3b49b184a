#!/usr/bin/env bash
# The Python client (clients/python: batch_get, the PyTorch dataset and
# open_local through the server's --local-socket)
# against a fedgate server started here, with Debian's python3-boto3 and
# python3-torch: `pip install clients/python` into a venv, then the unittest
# suite (clients/python/tests), which reads every sample of a 2-worker
# DataLoader and checks its sha256. Usage:
# scripts/test-python-client.sh path/to/fedgate
set -euo pipefail

BIN=${1:?usage: $0 path/to/fedgate}
unset AWS_PROFILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_CA_BUNDLE
PY=/usr/bin/python3
for mod in boto3 torch ensurepip setuptools wheel; do
  if ! "$PY" -c "import $mod" 2>/dev/null; then
    if [ -n "${CI:-}" ]; then echo "FAIL: python3 module $mod missing (scripts/install-test-deps.sh installs it)"; exit 1; fi
    echo "SKIP: python3 module $mod not installed (run scripts/install-test-deps.sh)"; exit 0
  fi
done
REPO=$(cd "$(dirname "$0")/.." && pwd)

. "$(dirname "$0")/lib-server.sh"

# The package installs with pip (offline: Debian's setuptools builds it) and
# imports from where pip put it.
# (from a copy: a build leaves build/ and *.egg-info beside the sources)
"$PY" -m venv --system-site-packages "$WORK/venv"
mkdir "$WORK/pkg" && cp -r "$REPO/clients/python/pyproject.toml" "$REPO/clients/python/README.md" "$REPO/clients/python/fedgate" "$WORK/pkg/"
out=$("$WORK/venv/bin/pip" install --no-build-isolation --no-deps --no-index -q "$WORK/pkg" 2>&1) ||
  { echo "FAIL: pip install clients/python: $out"; exit 1; }
where=$(cd "$WORK" && "$WORK/venv/bin/python" -c 'import fedgate, fedgate.dataset; print(fedgate.__file__)') ||
  { echo "FAIL: the installed package does not import"; exit 1; }
case "$where" in "$WORK/venv/"*) ;; *) echo "FAIL: fedgate imported from $where, not the venv"; exit 1 ;; esac
echo "pip install clients/python: ok"

AK=PYCLIENTTESTKEY00001 SK=py-client-test-secret-0123456789abcdef
start_server "$AK" "$SK" --local-socket "$WORK/s3.sock"
cd "$REPO/clients/python"
# The suite fails rather than skips without these (CI is set by .ci/run).
status=0
FEDGATE_TEST_ENDPOINT=$EP FEDGATE_TEST_ACCESS_KEY=$AK FEDGATE_TEST_SECRET_KEY=$SK FEDGATE_TEST_SOCKET=$WORK/s3.sock \
  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
  "$PY" -m unittest discover -s tests -t . >"$WORK/unittest.out" 2>&1 || status=$?
tail -60 "$WORK/unittest.out"
if [ "$status" -ne 0 ]; then echo "FAIL: python client tests (exit $status)"; echo "--- server log"; tail -20 "$WORK/log"; exit 1; fi
grep -q '^OK' "$WORK/unittest.out" || { echo "FAIL: python client tests did not report OK"; exit 1; }
if grep -q 'skipped=' "$WORK/unittest.out"; then echo "FAIL: python client tests skipped some (they must all run here)"; exit 1; fi
echo "PASS: python client (${SECONDS}s)"
