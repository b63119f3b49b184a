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

# The install exactly as docs/training.md gives it for a Debian machine with
# python3-torch, offline: a venv that sees Debian's packages, and pip
# without build isolation or an index (Debian's setuptools builds it).
# (from a copy: a build leaves build/ and *.egg-info beside the sources)
mkdir "$WORK/pkg" && cp -r "$REPO/clients/python/pyproject.toml" "$REPO/clients/python/README.md" "$REPO/clients/python/fedgate" "$WORK/pkg/"
"$PY" -m venv --system-site-packages "$WORK/venv"
out=$("$WORK/venv/bin/pip" install --no-build-isolation --no-deps --no-index "$WORK/pkg" 2>&1) ||
  { echo "FAIL: the documented pip install of clients/python: $out"; exit 1; }
# And from a wheel built the documented way, into a second venv.
out=$("$WORK/venv/bin/pip" wheel --no-build-isolation --no-deps --no-index -w "$WORK/dist" "$WORK/pkg" 2>&1) ||
  { echo "FAIL: pip wheel clients/python: $out"; exit 1; }
"$PY" -m venv --system-site-packages "$WORK/venv2"
out=$("$WORK/venv2/bin/pip" install --no-deps --no-index "$WORK"/dist/fedgate_client-*.whl 2>&1) ||
  { echo "FAIL: pip install of the wheel: $out"; exit 1; }
for v in venv venv2; do
  where=$(cd "$WORK" && "$WORK/$v/bin/python" -c 'import fedgate, fedgate.dataset; print(fedgate.__file__)') ||
    { echo "FAIL: import fedgate in $v"; exit 1; }
  case "$where" in "$WORK/$v/"*) ;; *) echo "FAIL: fedgate imported from $where, not $v"; exit 1 ;; esac
done
echo "pip install clients/python (source and wheel): ok"

AK=PYCLIENTTESTKEY00001 SK=py-client-test-secret-0123456789abcdef
start_server "$AK" "$SK" --local-socket "$WORK/s3.sock"
# The suite runs against the installed package: from a copy of the tests in
# a directory where the sources are not importable, with the venv's python.
cp -r "$REPO/clients/python/tests" "$WORK/tests"
cd "$WORK"
# The suite fails rather than skips without these (CI is set by .ci/run).
status=0
FEDGATE_TEST_ENDPOINT=$EP FEDGATE_TEST_ACCESS_KEY=$AK FEDGATE_TEST_SECRET_KEY=$SK FEDGATE_TEST_SOCKET=$WORK/s3.sock \
  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
  "$WORK/venv/bin/python" -m unittest discover -s tests -t . >"$WORK/unittest.out" 2>&1 || status=$?
tail -60 "$WORK/unittest.out"
if [ "$status" -ne 0 ]; then echo "FAIL: python client tests (exit $status)"; echo "--- server log"; tail -20 "$WORK/log"; exit 1; fi
grep -q '^OK' "$WORK/unittest.out" || { echo "FAIL: python client tests did not report OK"; exit 1; }
if grep -q 'skipped=' "$WORK/unittest.out"; then echo "FAIL: python client tests skipped some (they must all run here)"; exit 1; fi
echo "PASS: python client (${SECONDS}s)"
