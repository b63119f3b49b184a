#!/usr/bin/env bash
# Two peered regions on this machine (issue 17; docs/regions.md), driven with
# the aws CLI at its defaults: region a of 3 nodes (one Raft region, a NAS
# posix store only a reaches) and region b of 1 node, one policy file.
#   - a bucket created through a's non-voter node is listed in b within
#     seconds;
#   - creating the same name in b fails with BucketAlreadyExists;
#   - an object written in a (to a's NAS) reads byte-identical in b, and the
#     second read in b is served from b's cache;
#   - with all of a stopped, b still serves its cached copy, its own
#     buckets (read and write), and refuses new buckets with
#     ServiceUnavailable;
#   - `fedgate egress report` over both regions shows the a->b bytes once;
#     `fedgate region status` shows both regions and the catalog.
# Usage: scripts/test-regions.sh path/to/fedgate
set -euo pipefail

BIN=$(realpath "${1:?usage: $0 path/to/fedgate}")
AWS=${AWS:-/usr/bin/aws}
if [ ! -x "$AWS" ]; then
  if [ -n "${CI:-}" ]; then echo "FAIL: $AWS missing (scripts/install-test-deps.sh installs it)"; exit 1; fi
  echo "SKIP: $AWS not installed (run scripts/install-test-deps.sh)"; exit 0
fi

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

export FEDGATE_ACCESS_KEY=REGIONSTESTACCESSKEY FEDGATE_SECRET_KEY=regions-test-secret-key-0123456789abcdef
export AWS_ACCESS_KEY_ID=$FEDGATE_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$FEDGATE_SECRET_KEY
export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_PAGER="" AWS_EC2_METADATA_DISABLED=true
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL

pass=0
fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -15 "$f"; done
  exit 1
}
check() { # check NAME EXPECTED ACTUAL
  [ "$2" == "$3" ] || fail "$1: expected [$2], got [$3]"
  pass=$((pass + 1))
}

# Free loopback ports: 3 per node of a (S3, Raft, internal), catalog ports.
read -r -a P <<<"$(python3 -c '
import socket
ss=[socket.socket() for _ in range(12)]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
A1=127.0.0.1:${P[0]} A2=127.0.0.1:${P[1]} A3=127.0.0.1:${P[2]} B1=127.0.0.1:${P[3]}
mkdir -p "$WORK/nas-a" "$WORK/nas-b"
cat >"$WORK/policy.yaml" <<EOF
regions:
  - {name: a, location: onprem:dc-a, endpoint: http://$A1, catalog: 127.0.0.1:${P[10]}}
  - {name: b, location: onprem:dc-b, endpoint: http://$B1, catalog: 127.0.0.1:${P[11]}}
stores:
  - {name: nas-a, kind: posix, location: onprem:dc-a, path: $WORK/nas-a}
  - {name: nas-b, kind: posix, location: onprem:dc-b, path: $WORK/nas-b}
EOF
"$BIN" policy validate "$WORK/policy.yaml" >/dev/null || fail "the policy does not validate"

# start NAME ARGS...: a node in the background, its log in WORK/NAME.log.
start() {
  local name=$1
  shift
  "$BIN" server --data-dir "$WORK/$name" --log-level warn --config "$WORK/policy.yaml" "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
  PIDS+=($!)
  eval "PID_$name=$!"
}
# Region b ran alone before it was peered: its bucket and user must not
# vanish when it joins (they are registered in the catalog).
cat >"$WORK/policy-alone.yaml" <<EOF
regions:
  - {name: b, location: onprem:dc-b}
stores:
  - {name: nas-b, kind: posix, location: onprem:dc-b, path: $WORK/nas-b}
EOF
"$BIN" server --data-dir "$WORK/b1" --node-id b1 --log-level warn --config "$WORK/policy-alone.yaml" --listen "$B1" >"$WORK/b1-alone.out" 2>"$WORK/b1-alone.log" &
alone=$!
for _ in $(seq 1 300); do curl -fs "http://$B1/_fedgate/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
"$AWS" --endpoint-url "http://$B1" s3 mb s3://legacy >/dev/null || fail "mb in b alone"
echo old | "$AWS" --endpoint-url "http://$B1" s3 cp - s3://legacy/old.txt >/dev/null || fail "put in b alone"
"$BIN" user add bob --endpoint "http://$B1" --access-key BOBREGIONSKEY0000001 --secret-key bob-secret-key-0123456789abcdef >/dev/null ||
  fail "user add in b alone"
# Peering is a policy change (applied to the running region), then a
# restart with --catalog-addr.
"$BIN" policy apply "$WORK/policy.yaml" --endpoint "http://$B1" >/dev/null || fail "policy apply of the peered policy in b"
kill "$alone"
wait "$alone" 2>/dev/null || true

start a1 --region a --node-id a1 --listen "$A1" --raft-addr "127.0.0.1:${P[4]}" --internal-addr "127.0.0.1:${P[5]}" \
  --bootstrap-expect 3 --join "$A2,$A3" --catalog-addr "127.0.0.1:${P[10]}"
start a2 --region a --node-id a2 --listen "$A2" --raft-addr "127.0.0.1:${P[6]}" --internal-addr "127.0.0.1:${P[7]}" \
  --bootstrap-expect 3 --join "$A1,$A3" --catalog-addr "127.0.0.1:$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')"
start a3 --region a --node-id a3 --listen "$A3" --raft-addr "127.0.0.1:${P[8]}" --internal-addr "127.0.0.1:${P[9]}" \
  --bootstrap-expect 3 --join "$A1,$A2" --catalog-addr "127.0.0.1:$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')"
start b1 --region b --node-id b1 --listen "$B1" --catalog-addr "127.0.0.1:${P[11]}"
for ep in $A1 $A2 $A3 $B1; do
  for _ in $(seq 1 600); do
    curl -fs "http://$ep/_fedgate/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fs "http://$ep/_fedgate/readyz" >/dev/null 2>&1 || fail "node $ep did not become ready"
done
aws() { local ep=$1; shift; "$AWS" --endpoint-url "http://$ep" "$@"; }

# 0. What b had before peering is in the catalog: a lists b's old bucket
# and reads it through b; b's old user signs in a.
registered=
for _ in $(seq 1 100); do
  if aws "$A1" s3 ls | grep -q ' legacy$'; then registered=yes; break; fi
  sleep 0.2
done
check "b's bucket from before peering listed in a" yes "$registered"
check "b's old object read in a" old "$(aws "$A1" s3 cp s3://legacy/old.txt - 2>/dev/null)"
check "b's old user signs in a" ok "$(AWS_ACCESS_KEY_ID=BOBREGIONSKEY0000001 AWS_SECRET_ACCESS_KEY=bob-secret-key-0123456789abcdef aws "$A1" s3 ls >/dev/null 2>&1 && echo ok)"

# 1. A bucket created through a node of a that is not its catalog voter.
t0=$(date +%s.%N)
aws "$A2" s3 mb s3://dataset >/dev/null || fail "mb in a"
t1=$(date +%s.%N)
listed=
for _ in $(seq 1 100); do
  if aws "$B1" s3 ls | grep -q ' dataset$'; then listed=yes; break; fi
  sleep 0.1
done
check "bucket made in a listed in b" yes "$listed"
echo "mb in a took $(python3 -c "print(round($t1-$t0,2))")s; listed in b $(python3 -c "print(round($(date +%s.%N)-$t1,2))")s after it returned"

# 2. The same name in b.
out=$(aws "$B1" s3 mb s3://dataset 2>&1 || true)
case "$out" in *BucketAlreadyExists*) pass=$((pass + 1)) ;; *) fail "mb of a's bucket in b: $out" ;; esac
aws "$B1" s3 mb s3://b-own >/dev/null || fail "mb in b"
out=$(aws "$A1" s3 mb s3://b-own 2>&1 || true)
case "$out" in *BucketAlreadyExists*) pass=$((pass + 1)) ;; *) fail "mb of b's bucket in a: $out" ;; esac

# The bucket's policy travels with it; only its home region changes it.
pol='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::dataset/public/*"}]}'
aws "$A1" s3api put-bucket-policy --bucket dataset --policy "$pol" || fail "put-bucket-policy in a"
got=$(aws "$B1" s3api get-bucket-policy --bucket dataset --query Policy --output text 2>&1 || true)
check "bucket policy seen in b" "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1]), sort_keys=True))' "$pol")" \
  "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1]), sort_keys=True))' "$got" 2>/dev/null || echo "$got")"
out=$(AWS_MAX_ATTEMPTS=1 aws "$B1" s3api delete-bucket-policy --bucket dataset 2>&1 || true)
case "$out" in *InvalidBucketState*) pass=$((pass + 1)) ;; *) fail "delete-bucket-policy of a's bucket in b: $out" ;; esac

# Users follow the same path: a user added in a signs in b; it owns what it
# creates in b, and a grant made in b lets b's reads of a's bucket through.
"$BIN" user add alice --endpoint "http://$A2" --access-key ALICEREGIONSKEY00001 --secret-key alice-secret-key-0123456789abcdef >/dev/null ||
  fail "user add in a"
alice() { AWS_ACCESS_KEY_ID=ALICEREGIONSKEY00001 AWS_SECRET_ACCESS_KEY=alice-secret-key-0123456789abcdef aws "$@"; }
alice "$B1" s3 mb s3://alice-b >/dev/null || fail "alice's mb in b"
echo hi | alice "$B1" s3 cp - s3://alice-b/hello.txt >/dev/null || fail "alice's put in b"
check "alice reads her b bucket through a" hi "$(alice "$A1" s3 cp s3://alice-b/hello.txt - 2>/dev/null)"
out=$(AWS_MAX_ATTEMPTS=1 alice "$B1" s3 ls s3://dataset 2>&1 || true)
case "$out" in *AccessDenied*) pass=$((pass + 1)) ;; *) fail "alice listing a's bucket without a grant: $out" ;; esac
"$BIN" user grant alice dataset read --endpoint "http://$B1" >/dev/null || fail "grant in b of a's user on a's bucket"
alice "$B1" s3 ls s3://dataset >/dev/null || fail "alice listing a's bucket in b after b's grant"
pass=$((pass + 1))
out=$("$BIN" user add alice --endpoint "http://$B1" 2>&1 || true)
case "$out" in *exists*) pass=$((pass + 1)) ;; *) fail "user add of a's user name in b: $out" ;; esac

# 3. Written in a to a's NAS, read in b twice.
head -c 20000000 /dev/urandom >"$WORK/obj"
aws "$A3" s3 cp --no-progress "$WORK/obj" s3://dataset/train/obj.bin >/dev/null || fail "cp to a"
check "the object is on a's NAS" 1 "$(find "$WORK/nas-a" -type f -size 19532k | wc -l | tr -d ' ')"
check "nothing of it on b's NAS" 0 "$(find "$WORK/nas-b" -type f -size 19532k | wc -l | tr -d ' ')"
aws "$B1" s3 cp --no-progress s3://dataset/train/obj.bin "$WORK/got1" >/dev/null || fail "first read in b"
cmp -s "$WORK/obj" "$WORK/got1" || fail "first read in b differs"
pass=$((pass + 1))
aws "$B1" s3 cp --no-progress s3://dataset/train/obj.bin "$WORK/got2" >/dev/null || fail "second read in b"
cmp -s "$WORK/obj" "$WORK/got2" || fail "second read in b differs"
pass=$((pass + 1))
st=$("$BIN" region status --endpoint "http://$B1" --json)
from_a=$(python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin)["regions"] if x["name"]=="a"][0]; print(r["bytes_from"], r["avoided_bytes"]>=20000000, r["reachable"])' <<<"$st")
check "b read through a once (bytes, second read from cache, a reachable)" "20000000 True True" "$from_a"

# A write in a is read in b at once (each open revalidates with a).
echo "v2" | aws "$A1" s3 cp - s3://dataset/train/small.txt >/dev/null
echo "v3" | aws "$A2" s3 cp - s3://dataset/train/small.txt >/dev/null
check "read-after-write across regions" v3 "$(aws "$B1" s3 cp s3://dataset/train/small.txt - 2>/dev/null)"

# 4. Region a stopped.
for p in "$PID_a1" "$PID_a2" "$PID_a3"; do kill -9 "$p"; done
aws "$B1" s3 cp --no-progress s3://dataset/train/obj.bin "$WORK/got3" >/dev/null || fail "read in b with a stopped"
cmp -s "$WORK/obj" "$WORK/got3" || fail "read in b with a stopped differs"
pass=$((pass + 1))
aws "$B1" s3 cp --no-progress "$WORK/obj" s3://b-own/ckpt.bin >/dev/null || fail "write to b's bucket with a stopped"
aws "$B1" s3 cp --no-progress s3://b-own/ckpt.bin "$WORK/got4" >/dev/null || fail "read of b's bucket with a stopped"
cmp -s "$WORK/obj" "$WORK/got4" || fail "b's own object differs"
pass=$((pass + 1))
out=$(AWS_MAX_ATTEMPTS=1 aws "$B1" s3 mb s3://new-while-cut-off 2>&1 || true)
case "$out" in *ServiceUnavailable*) pass=$((pass + 1)) ;; *) fail "mb in b with a stopped: $out" ;; esac
st=$("$BIN" region status --endpoint "http://$B1" --json)
check "region status: a unreachable, no catalog leader" "False " "$(python3 -c 'import json,sys; s=json.load(sys.stdin); print([x for x in s["regions"] if x["name"]=="a"][0]["reachable"], s["catalog"]["leader"])' <<<"$st")"

# 5. The egress report (a's ledger is gone with it; b's holds the
# crossing): the a->b bytes once: the 20 MB object and small.txt's 3.
csv=$("$BIN" egress report --endpoint "http://$B1" --format csv)
check "egress a->b read bytes" 20000003 "$(python3 -c '
import csv,sys
rows=list(csv.DictReader(sys.stdin))
print(sum(int(r["bytes"]) for r in rows if r["src"]=="onprem:dc-a" and r["dst"]=="onprem:dc-b" and r["direction"]=="read"))' <<<"$csv")"

echo "PASS: $pass checks (two regions: catalog, BucketAlreadyExists, reads through a's gateway, a stopped, egress once)"
