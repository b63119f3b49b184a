#!/usr/bin/env bash
# ListBuckets with more than a page of buckets, against a fedgate server
# started here: Debian's aws CLI v2 (`s3api list-buckets`, `s3 ls`) and
# boto3 (its ListBuckets paginator where its model has one, else
# list_buckets) at their defaults, for root and for a user who owns one
# bucket in nine and holds two grants; and the S3 paging parameters
# (max-buckets, continuation-token, prefix) page by page with curl's SigV4
# signing. Usage: scripts/test-listbuckets.sh path/to/fedgate
set -euo pipefail

BIN=${1:?usage: $0 path/to/fedgate}
AWS=${AWS:-/usr/bin/aws}
PY=${PY:-/usr/bin/python3}
for need in "$AWS" "$PY"; do
  if [ ! -x "$need" ]; then
    if [ -n "${CI:-}" ]; then echo "FAIL: $need missing (scripts/install-test-deps.sh installs it)"; exit 1; fi
    echo "SKIP: $need not installed (run scripts/install-test-deps.sh)"; exit 0
  fi
done
"$PY" -c 'import boto3' 2>/dev/null || { echo "SKIP: boto3 missing for $PY (scripts/install-test-deps.sh)"; exit 0; }

. "$(dirname "$0")/lib-server.sh"

ROOT_AK=LBTESTROOTACCESSKEY1 ROOT_SK=lb-test-root-secret-0123456789abcdef
ALICE_AK=LBTESTALICEACCESSKY1 ALICE_SK=lb-test-alice-secret-0123456789abcdef
export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_PAGER="" AWS_EC2_METADATA_DISABLED=true
unset AWS_CA_BUNDLE AWS_PROFILE

start_server "$ROOT_AK" "$ROOT_SK"
pass=0
check() { # check NAME EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then echo "FAIL: $1: expected [$2], got [$3]"; echo "--- server log"; tail -20 "$WORK/log"; exit 1; fi
  pass=$((pass + 1))
}
as_root() { AWS_ACCESS_KEY_ID=$ROOT_AK AWS_SECRET_ACCESS_KEY=$ROOT_SK "$@"; }
as_alice() { AWS_ACCESS_KEY_ID=$ALICE_AK AWS_SECRET_ACCESS_KEY=$ALICE_SK "$@"; }
admin() { "$BIN" user "$@" --endpoint "$EP" --root-access-key "$ROOT_AK" --root-secret-key "$ROOT_SK" >/dev/null; }

admin add alice --access-key "$ALICE_AK" --secret-key "$ALICE_SK"

# 1,350 buckets b-0000..b-1349, alice's every ninth, created with boto3
# (one process: the CLI would start 1,350 times).
N=1350
as_root "$PY" - "$EP" "$N" "$ALICE_AK" "$ALICE_SK" <<'PYEOF'
import sys, boto3
from concurrent.futures import ThreadPoolExecutor
ep, n, ak, sk = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
root = boto3.client("s3", endpoint_url=ep)
alice = boto3.client("s3", endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk)
def mk(i):
    (alice if i % 9 == 0 else root).create_bucket(Bucket="b-%04d" % i)
with ThreadPoolExecutor(8) as ex:
    list(ex.map(mk, range(n)))
PYEOF
admin grant alice b-0001 read
admin grant alice b-1300 write

seq -f 'b-%04g' 0 $((N - 1)) >"$WORK/want-root"
{ seq -f 'b-%04g' 0 9 $((N - 1)); echo b-0001; echo b-1300; } | sort >"$WORK/want-alice"

lines() { tr '\t' '\n' | sed '/^$/d'; }
for who in root alice; do
  want=$(cat "$WORK/want-$who")
  check "$who: aws s3api list-buckets" "$want" \
    "$("as_$who" "$AWS" --endpoint-url "$EP" s3api list-buckets --query 'Buckets[].Name' --output text | lines)"
  check "$who: aws s3 ls" "$want" "$("as_$who" "$AWS" --endpoint-url "$EP" s3 ls | awk '{print $3}')"
  got=$("as_$who" "$PY" - "$EP" <<'PYEOF'
import sys, boto3
c = boto3.client("s3", endpoint_url=sys.argv[1])
if c.can_paginate("list_buckets"):  # botocore >= 1.35: pages with max-buckets
    names = [b["Name"] for p in c.get_paginator("list_buckets").paginate() for b in p["Buckets"]]
else:  # Debian 12's botocore 1.29: no paging parameters in its model
    names = [b["Name"] for b in c.list_buckets()["Buckets"]]
print("\n".join(names))
PYEOF
)
  check "$who: boto3" "$want" "$got"

  # max-buckets and continuation-token, page by page: every page full
  # but the last, the token only while more follow.
  ak=$ROOT_AK sk=$ROOT_SK
  [ "$who" = alice ] && ak=$ALICE_AK sk=$ALICE_SK
  token=""
  pages=0
  : >"$WORK/got"
  while :; do
    q="max-buckets=100" # parameters in sorted order: Debian's curl 7.88 signs them as given
    [ -n "$token" ] && q="continuation-token=$token&$q"
    curl -fsS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$EP/?$q" >"$WORK/page.xml"
    grep -o '<Name>[^<]*</Name>' "$WORK/page.xml" | sed 's/<[^>]*>//g' >"$WORK/names"
    n=$(wc -l <"$WORK/names")
    cat "$WORK/names" >>"$WORK/got"
    pages=$((pages + 1))
    token=$(sed -n 's/.*<ContinuationToken>\([^<]*\)<.*/\1/p' "$WORK/page.xml")
    if [ -z "$token" ]; then break; fi
    check "$who: page $pages is full" 100 "$n"
  done
  check "$who: max-buckets=100 pages" "$want" "$(cat "$WORK/got")"
  check "$who: max-buckets=100 page count" $((($(wc -l <"$WORK/want-$who") + 99) / 100)) "$pages"
  check "$who: prefix b-13" "$(grep '^b-13' <<<"$want")" \
    "$(curl -fsS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$EP/?max-buckets=1000&prefix=b-13" |
      grep -o '<Name>[^<]*</Name>' | sed 's/<[^>]*>//g')"
done

kill -TERM "$PID"
wait "$PID" || { echo "FAIL: server exit status $? after SIGTERM"; exit 1; }
PID=
echo "PASS: ListBuckets with $N buckets ($pass checks)"
