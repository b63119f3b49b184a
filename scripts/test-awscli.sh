#!/usr/bin/env bash
# End-to-end test with the real aws CLI v2 (Debian's /usr/bin/aws): starts a
# fedgate server on a free loopback port with a fresh data dir, runs
# `aws s3` and `aws s3api` commands with default client settings, and checks
# what comes back. Usage: scripts/test-awscli.sh path/to/fedgate
set -euo pipefail

BIN=${1:?usage: $0 path/to/fedgate}
AWS=${AWS:-/usr/bin/aws}
if [ ! -x "$AWS" ]; then
  if [ -n "${CI:-}" ]; then echo "FAIL: $AWS missing (scripts/install-test-deps.sh installs it)"; exit 1; fi
  echo "SKIP: $AWS not installed (run scripts/install-test-deps.sh)"; exit 0
fi

. "$(dirname "$0")/lib-server.sh"

export AWS_ACCESS_KEY_ID=CLITESTACCESSKEY0001 AWS_SECRET_ACCESS_KEY=cli-test-secret-key-0123456789abcdef
export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_PAGER="" AWS_EC2_METADATA_DISABLED=true
unset AWS_CA_BUNDLE AWS_PROFILE

start_server "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY"

aws() { "$AWS" --endpoint-url "$EP" "$@"; }
pass=0
check() { # check NAME EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then echo "FAIL: $1: expected [$2], got [$3]"; echo "--- server log"; tail -20 "$WORK/log"; exit 1; fi
  pass=$((pass + 1))
}
expect_fail() { # expect_fail NAME ERRORCODE cmd...
  local name=$1 code=$2; shift 2
  local out
  if out=$("$@" 2>&1); then echo "FAIL: $name: command succeeded"; exit 1; fi
  if ! grep -q "$code" <<<"$out"; then echo "FAIL: $name: expected $code in: $out"; exit 1; fi
  pass=$((pass + 1))
}

aws s3 mb s3://cli-bucket >/dev/null
check "ls buckets" "cli-bucket" "$(aws s3 ls | awk '{print $3}')"

head -c 3000000 /dev/urandom >"$WORK/small.bin"
head -c 20000000 /dev/urandom >"$WORK/big.bin" # multipart with the CLI's 8 MiB parts
aws s3 cp "$WORK/small.bin" s3://cli-bucket/dir/small.bin >/dev/null
aws s3 cp "$WORK/big.bin" "s3://cli-bucket/dir/big file ü.bin" >/dev/null
aws s3 cp s3://cli-bucket/dir/small.bin "$WORK/small.out" >/dev/null
aws s3 cp "s3://cli-bucket/dir/big file ü.bin" "$WORK/big.out" >/dev/null
check "small round trip" "$(sha256sum <"$WORK/small.bin")" "$(sha256sum <"$WORK/small.out")"
check "big round trip" "$(sha256sum <"$WORK/big.bin")" "$(sha256sum <"$WORK/big.out")"
etag=$(aws s3api head-object --bucket cli-bucket --key "dir/big file ü.bin" --query ETag --output text)
check "multipart etag suffix" "-3\"" "${etag: -3}"

check "ls recursive" "2" "$(aws s3 ls --recursive s3://cli-bucket/ | wc -l | tr -d ' ')"
check "ls delimiter" "PRE dir/" "$(aws s3 ls s3://cli-bucket/ | awk '{$1=$1};1')"

mkdir -p "$WORK/tree/a/b" "$WORK/back"
for i in 1 2 3; do echo "file $i" >"$WORK/tree/a/f$i.txt"; done
echo deep >"$WORK/tree/a/b/deep.txt"
aws s3 sync "$WORK/tree" s3://cli-bucket/tree >/dev/null
check "sync up count" "4" "$(aws s3 ls --recursive s3://cli-bucket/tree/ | wc -l | tr -d ' ')"
check "sync again uploads nothing" "" "$(aws s3 sync "$WORK/tree" s3://cli-bucket/tree)"
aws s3 sync s3://cli-bucket/tree "$WORK/back" >/dev/null
check "sync down" "" "$(diff -r "$WORK/tree" "$WORK/back")"

aws s3api put-object --bucket cli-bucket --key meta.txt --body "$WORK/tree/a/f1.txt" \
  --content-type text/plain --metadata run-id=42,owner=ml >/dev/null
check "metadata" "42 text/plain" "$(aws s3api head-object --bucket cli-bucket --key meta.txt --query '[Metadata."run-id",ContentType]' --output text | tr '\t' ' ')"
aws s3api get-object --bucket cli-bucket --key dir/small.bin --range bytes=10-19 "$WORK/range.out" >/dev/null
check "range" "$(head -c 20 "$WORK/small.bin" | tail -c 10 | sha256sum)" "$(sha256sum <"$WORK/range.out")"
expect_fail "range past end" "InvalidRange" aws s3api get-object --bucket cli-bucket --key meta.txt --range bytes=1000-2000 "$WORK/x"
aws s3api put-object --bucket cli-bucket --key sha.txt --body "$WORK/tree/a/f2.txt" --checksum-algorithm SHA256 >/dev/null
check "checksum stored" "$(openssl dgst -sha256 -binary "$WORK/tree/a/f2.txt" | base64)" \
  "$(aws s3api head-object --bucket cli-bucket --key sha.txt --checksum-mode ENABLED --query ChecksumSHA256 --output text)"
aws s3api copy-object --bucket cli-bucket --key copy.txt --copy-source cli-bucket/meta.txt >/dev/null
check "copy keeps metadata" "42" "$(aws s3api head-object --bucket cli-bucket --key copy.txt --query 'Metadata."run-id"' --output text)"

# Tagging: objects (tags kept with the object) and buckets; GetObjectAttributes.
aws s3api put-object-tagging --bucket cli-bucket --key meta.txt --tagging 'TagSet=[{Key=stage,Value=raw},{Key=team,Value=ml ops}]' >/dev/null
check "get-object-tagging" "stage raw team ml ops" "$(aws s3api get-object-tagging --bucket cli-bucket --key meta.txt --query 'TagSet[].[Key,Value]' --output text | tr '\t\n' '  ' | sed 's/ $//')"
check "tag count" "2" "$(aws s3api get-object --bucket cli-bucket --key meta.txt "$WORK/tagged.out" --query TagCount --output text)"
check "tagging keeps metadata" "42" "$(aws s3api head-object --bucket cli-bucket --key meta.txt --query 'Metadata."run-id"' --output text)"
aws s3api put-object --bucket cli-bucket --key tagged.txt --body "$WORK/tree/a/f3.txt" --tagging 'a=1&b=two%20words' >/dev/null
check "put-object --tagging" "a 1 b two words" "$(aws s3api get-object-tagging --bucket cli-bucket --key tagged.txt --query 'TagSet[].[Key,Value]' --output text | tr '\t\n' '  ' | sed 's/ $//')"
aws s3api delete-object-tagging --bucket cli-bucket --key tagged.txt >/dev/null
check "delete-object-tagging" "0" "$(aws s3api get-object-tagging --bucket cli-bucket --key tagged.txt --query 'length(TagSet)' --output text)"
expect_fail "11 object tags" "BadRequest" aws s3api put-object-tagging --bucket cli-bucket --key meta.txt \
  --tagging "TagSet=[$(for i in $(seq 1 11); do printf '{Key=k%d,Value=v},' "$i"; done | sed 's/,$//')]"
expect_fail "aws: tag key" "InvalidTag" aws s3api put-object-tagging --bucket cli-bucket --key meta.txt --tagging 'TagSet=[{Key=aws:x,Value=v}]'
expect_fail "no bucket tags" "NoSuchTagSet" aws s3api get-bucket-tagging --bucket cli-bucket
aws s3api put-bucket-tagging --bucket cli-bucket --tagging 'TagSet=[{Key=cost-center,Value=ml 42}]' >/dev/null
check "get-bucket-tagging" "cost-center ml 42" "$(aws s3api get-bucket-tagging --bucket cli-bucket --query 'TagSet[].[Key,Value]' --output text | tr '\t' ' ')"
aws s3api delete-bucket-tagging --bucket cli-bucket >/dev/null
expect_fail "bucket tags deleted" "NoSuchTagSet" aws s3api get-bucket-tagging --bucket cli-bucket
expect_fail "no lifecycle" "NoSuchLifecycleConfiguration" aws s3api get-bucket-lifecycle-configuration --bucket cli-bucket
aws s3api put-bucket-lifecycle-configuration --bucket cli-bucket --lifecycle-configuration \
  '{"Rules":[{"ID":"old-runs","Status":"Enabled","Filter":{"Prefix":"runs/"},"Expiration":{"Days":7}},{"ID":"uploads","Status":"Enabled","Filter":{},"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":2}}]}' >/dev/null
check "get-bucket-lifecycle-configuration" "old-runs runs/ 7 uploads 2" \
  "$(aws s3api get-bucket-lifecycle-configuration --bucket cli-bucket --query 'Rules[].[ID,Filter.Prefix,Expiration.Days,AbortIncompleteMultipartUpload.DaysAfterInitiation]' --output text | tr '\t\n' '  ' | sed 's/ None//g; s/ $//')"
expect_fail "lifecycle Days 0" "InvalidArgument" aws s3api put-bucket-lifecycle-configuration --bucket cli-bucket --lifecycle-configuration \
  '{"Rules":[{"Status":"Enabled","Filter":{},"Expiration":{"Days":0}}]}'
expect_fail "lifecycle transition" "NotImplemented" aws s3api put-bucket-lifecycle-configuration --bucket cli-bucket --lifecycle-configuration \
  '{"Rules":[{"Status":"Enabled","Filter":{},"Transitions":[{"Days":30,"StorageClass":"GLACIER"}]}]}'
aws s3api delete-bucket-lifecycle --bucket cli-bucket >/dev/null
expect_fail "lifecycle deleted" "NoSuchLifecycleConfiguration" aws s3api get-bucket-lifecycle-configuration --bucket cli-bucket
check "get-object-attributes" "$(md5sum <"$WORK/tree/a/f3.txt" | cut -d' ' -f1) $(wc -c <"$WORK/tree/a/f3.txt" | tr -d ' ') STANDARD" \
  "$(aws s3api get-object-attributes --bucket cli-bucket --key tagged.txt --object-attributes ETag ObjectSize StorageClass --query '[ETag,ObjectSize,StorageClass]' --output text | tr '\t' ' ')"
check "get-object-attributes parts" "3" "$(aws s3api get-object-attributes --bucket cli-bucket --key "dir/big file ü.bin" --object-attributes ObjectParts --query ObjectParts.TotalPartsCount --output text)"
expect_fail "get-object-attributes unknown name" "InvalidArgument" aws s3api get-object-attributes --bucket cli-bucket --key tagged.txt --object-attributes Bogus
expect_fail "missing key" "404" aws s3api head-object --bucket cli-bucket --key nope
expect_fail "bucket not empty" "BucketNotEmpty" aws s3 rb s3://cli-bucket
expect_fail "invalid bucket name" "InvalidBucketName" aws s3 mb s3://Bad_Name
expect_fail "wrong secret" "SignatureDoesNotMatch" env AWS_SECRET_ACCESS_KEY=wrong-secret-key-xxxxxxxxxxxxxxxxxxxx "$AWS" --endpoint-url "$EP" s3 ls
url=$(aws s3 presign s3://cli-bucket/meta.txt --expires-in 60)
check "presigned get" "file 1" "$(curl -fsS "$url")"

# Access control (issue 11): ACLs, bucket policies, Block Public Access.
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
aws s3api put-object --bucket cli-bucket --key public/open.txt --body "$WORK/tree/a/f1.txt" --acl public-read >/dev/null
check "public-read object, anonymous GET" "file 1" "$(curl -fsS "$EP/cli-bucket/public/open.txt")"
check "get-object-acl" "READ" "$(aws s3api get-object-acl --bucket cli-bucket --key public/open.txt --query "Grants[?Grantee.Type=='Group'].Permission" --output text)"
aws s3api put-object-acl --bucket cli-bucket --key public/open.txt --acl private
check "put-object-acl private" "403" "$(status "$EP/cli-bucket/public/open.txt")"
check "get-bucket-acl owner" "root" "$(aws s3api get-bucket-acl --bucket cli-bucket --query Owner.ID --output text)"
cat >"$WORK/policy.json" <<'JSON'
{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead","Effect":"Allow","Principal":"*",
 "Action":"s3:GetObject","Resource":"arn:aws:s3:::cli-bucket/public/*"}]}
JSON
aws s3api put-bucket-policy --bucket cli-bucket --policy "file://$WORK/policy.json"
check "policy opens its prefix" "file 1" "$(curl -fsS "$EP/cli-bucket/public/open.txt")"
check "policy opens nothing else" "403" "$(status "$EP/cli-bucket/meta.txt")"
check "policy no listing" "403" "$(status "$EP/cli-bucket?list-type=2")"
check "policy status" "True" "$(aws s3api get-bucket-policy-status --bucket cli-bucket --query PolicyStatus.IsPublic --output text)"
check "get-bucket-policy" "PublicRead" "$(aws s3api get-bucket-policy --bucket cli-bucket --query Policy --output text | grep -o PublicRead)"
expect_fail "malformed policy" "MalformedPolicy" aws s3api put-bucket-policy --bucket cli-bucket --policy '{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObjet","Resource":"arn:aws:s3:::cli-bucket/*"}]}'
aws s3api put-public-access-block --bucket cli-bucket --public-access-block-configuration RestrictPublicBuckets=true,BlockPublicAcls=true
check "get-public-access-block" "True" "$(aws s3api get-public-access-block --bucket cli-bucket --query PublicAccessBlockConfiguration.RestrictPublicBuckets --output text)"
check "RestrictPublicBuckets" "403" "$(status "$EP/cli-bucket/public/open.txt")"
expect_fail "BlockPublicAcls" "AccessDenied" aws s3api put-object-acl --bucket cli-bucket --key public/open.txt --acl public-read
aws s3api delete-public-access-block --bucket cli-bucket
aws s3api delete-bucket-policy --bucket cli-bucket
check "policy deleted" "403" "$(status "$EP/cli-bucket/public/open.txt")"
expect_fail "no policy" "NoSuchBucketPolicy" aws s3api get-bucket-policy --bucket cli-bucket

# Versioning (issue 12): a checkpoint's versions, a delete marker, a rollback.
aws s3 mb s3://cli-versions >/dev/null
aws s3api put-bucket-versioning --bucket cli-versions --versioning-configuration Status=Enabled
check "get-bucket-versioning" "Enabled" "$(aws s3api get-bucket-versioning --bucket cli-versions --query Status --output text)"
v1=$(aws s3api put-object --bucket cli-versions --key latest.pt --body "$WORK/tree/a/f1.txt" --query VersionId --output text)
aws s3api put-object --bucket cli-versions --key latest.pt --body "$WORK/tree/a/f2.txt" >/dev/null
aws s3api put-object --bucket cli-versions --key latest.pt --body "$WORK/tree/a/f3.txt" >/dev/null
check "three versions" "3" "$(aws s3api list-object-versions --bucket cli-versions --query 'length(Versions)' --output text)"
aws s3api get-object --bucket cli-versions --key latest.pt --version-id "$v1" "$WORK/v1.out" >/dev/null
check "get the first version" "file 1" "$(cat "$WORK/v1.out")"
marker=$(aws s3api delete-object --bucket cli-versions --key latest.pt --query VersionId --output text)
expect_fail "get after delete" "404" aws s3api head-object --bucket cli-versions --key latest.pt
check "delete marker listed" "$marker" "$(aws s3api list-object-versions --bucket cli-versions --query 'DeleteMarkers[0].VersionId' --output text)"
aws s3api delete-object --bucket cli-versions --key latest.pt --version-id "$marker" >/dev/null
aws s3 cp s3://cli-versions/latest.pt "$WORK/back.out" >/dev/null
check "marker removed: object back" "file 3" "$(cat "$WORK/back.out")"
aws s3api copy-object --bucket cli-versions --key latest.pt --copy-source "cli-versions/latest.pt?versionId=$v1" >/dev/null
aws s3 cp s3://cli-versions/latest.pt "$WORK/rolled.out" >/dev/null
check "rollback by copy" "file 1" "$(cat "$WORK/rolled.out")"
for v in $(aws s3api list-object-versions --bucket cli-versions --query 'Versions[].VersionId' --output text); do
  aws s3api delete-object --bucket cli-versions --key latest.pt --version-id "$v" >/dev/null
done
aws s3 rb s3://cli-versions >/dev/null

# Object Lock (issue 35): WORM versions, at the CLI's defaults (its
# Content-MD5 or flexible checksum on the Put* bodies).
aws s3api create-bucket --bucket cli-worm --object-lock-enabled-for-bucket >/dev/null
check "object lock enables versioning" "Enabled" "$(aws s3api get-bucket-versioning --bucket cli-worm --query Status --output text)"
check "get-object-lock-configuration" "Enabled" "$(aws s3api get-object-lock-configuration --bucket cli-worm --query ObjectLockConfiguration.ObjectLockEnabled --output text)"
expect_fail "object lock: versioning not suspended" "InvalidBucketState" \
  aws s3api put-bucket-versioning --bucket cli-worm --versioning-configuration Status=Suspended
expect_fail "no object lock configuration" "ObjectLockConfigurationNotFoundError" aws s3api get-object-lock-configuration --bucket cli-bucket
expect_fail "retention without object lock" "InvalidRequest" aws s3api put-object-retention --bucket cli-bucket --key meta.txt \
  --retention "Mode=GOVERNANCE,RetainUntilDate=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)"
# The refusals are checked on a version kept for a day (a loaded machine may
# take a minute for the calls below); a second version with a date 15 s
# ahead is deleted once its date has passed. The first stays: the bucket is
# not removed.
cv=$(aws s3api put-object --bucket cli-worm --key c.pt --body "$WORK/tree/a/f1.txt" --query VersionId --output text)
until=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
aws s3api put-object-retention --bucket cli-worm --key c.pt --version-id "$cv" --retention "Mode=COMPLIANCE,RetainUntilDate=$until" >/dev/null
check "get-object-retention" "COMPLIANCE" "$(aws s3api get-object-retention --bucket cli-worm --key c.pt --version-id "$cv" --query Retention.Mode --output text)"
until_epoch=$(($(date +%s) + 15))
sv=$(aws s3api put-object --bucket cli-worm --key s.pt --body "$WORK/tree/a/f1.txt" --object-lock-mode COMPLIANCE \
  --object-lock-retain-until-date "$(date -u -d "@$until_epoch" +%Y-%m-%dT%H:%M:%SZ)" --query VersionId --output text)
expect_fail "compliance: delete-object --version-id refused" "AccessDenied" aws s3api delete-object --bucket cli-worm --key c.pt --version-id "$cv"
expect_fail "compliance: even with --bypass-governance-retention" "AccessDenied" \
  aws s3api delete-object --bucket cli-worm --key c.pt --version-id "$cv" --bypass-governance-retention
expect_fail "compliance: not turned into governance" "AccessDenied" aws s3api put-object-retention --bucket cli-worm --key c.pt \
  --version-id "$cv" --retention "Mode=GOVERNANCE,RetainUntilDate=$until" --bypass-governance-retention
gv=$(aws s3api put-object --bucket cli-worm --key g.pt --body "$WORK/tree/a/f2.txt" --object-lock-mode GOVERNANCE \
  --object-lock-retain-until-date "$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)" --query VersionId --output text)
check "head-object lock mode" "GOVERNANCE" "$(aws s3api head-object --bucket cli-worm --key g.pt --query ObjectLockMode --output text)"
expect_fail "governance: delete refused" "AccessDenied" aws s3api delete-object --bucket cli-worm --key g.pt --version-id "$gv"
aws s3api delete-object --bucket cli-worm --key g.pt --version-id "$gv" --bypass-governance-retention >/dev/null
hv=$(aws s3api put-object --bucket cli-worm --key h.pt --body "$WORK/tree/a/f3.txt" --query VersionId --output text)
aws s3api put-object-legal-hold --bucket cli-worm --key h.pt --version-id "$hv" --legal-hold Status=ON >/dev/null
check "get-object-legal-hold" "ON" "$(aws s3api get-object-legal-hold --bucket cli-worm --key h.pt --version-id "$hv" --query LegalHold.Status --output text)"
expect_fail "legal hold: delete refused" "AccessDenied" \
  aws s3api delete-object --bucket cli-worm --key h.pt --version-id "$hv" --bypass-governance-retention
aws s3api put-object-legal-hold --bucket cli-worm --key h.pt --version-id "$hv" --legal-hold Status=OFF >/dev/null
aws s3api delete-object --bucket cli-worm --key h.pt --version-id "$hv" >/dev/null
while [ "$(date +%s)" -le "$until_epoch" ]; do sleep 1; done # the compliance date passes
aws s3api delete-object --bucket cli-worm --key s.pt --version-id "$sv" >/dev/null
check "object lock: only the version kept for a day is left" "c.pt" "$(aws s3api list-object-versions --bucket cli-worm --query 'Versions[].Key' --output text)"

aws s3 rm --recursive s3://cli-bucket/ >/dev/null
check "rm recursive" "0" "$(aws s3 ls --recursive s3://cli-bucket/ | wc -l | tr -d ' ')"
aws s3 rb s3://cli-bucket >/dev/null
check "rb" "cli-worm" "$(aws s3 ls | awk '{print $3}')"

kill -TERM "$PID"
wait "$PID" || { echo "FAIL: server exit status $? after SIGTERM"; exit 1; }
PID=
echo "PASS: aws CLI end-to-end ($pass checks)"
