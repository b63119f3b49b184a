#!/usr/bin/env bash
# Common S3 tools at their default settings against a fedgate server started
# here (issue 11: "a tool at its defaults failing" is what outside testers
# found): s3cmd (Debian) with a config that sets only the keys and the host,
# rclone (Debian) copy/check/sync/purge, boto3's resource API (Debian's
# python3-boto3) cleaning up by listing versions, and boto3's
# generate_presigned_post forms and CORS, posted with requests as a browser
# would. Usage:
# scripts/test-tools.sh path/to/fedgate
set -euo pipefail

BIN=${1:?usage: $0 path/to/fedgate}
# Nothing from the environment changes the tools' defaults (a CA bundle set
# for real clouds makes rclone refuse its transport).
unset AWS_CA_BUNDLE AWS_PROFILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_ENDPOINT_URL
PY=/usr/bin/python3
for tool in /usr/bin/s3cmd /usr/bin/rclone; do
  if [ ! -x "$tool" ]; then
    if [ -n "${CI:-}" ]; then echo "FAIL: $tool missing (scripts/install-test-deps.sh installs it)"; exit 1; fi
    echo "SKIP: $tool not installed (run scripts/install-test-deps.sh)"; exit 0
  fi
done
if ! "$PY" -c 'import boto3' 2>/dev/null; then
  if [ -n "${CI:-}" ]; then echo "FAIL: python3-boto3 missing (scripts/install-test-deps.sh installs it)"; exit 1; fi
  echo "SKIP: python3-boto3 not installed (run scripts/install-test-deps.sh)"; exit 0
fi

. "$(dirname "$0")/lib-server.sh"

AK=TOOLSTESTACCESSKEY01 SK=tools-test-secret-key-0123456789abcdef
start_server "$AK" "$SK"
HOSTPORT=${EP#http://}

pass=0
fail() { echo "FAIL: $*"; echo "--- server log"; tail -20 "$WORK/log"; exit 1; }
check() { # check NAME EXPECTED ACTUAL
  [ "$2" == "$3" ] || fail "$1: expected [$2], got [$3]"
  pass=$((pass + 1))
}

mkdir -p "$WORK/src/sub" "$WORK/got"
head -c 300000 /dev/urandom >"$WORK/src/a.bin"
echo "hello tools" >"$WORK/src/sub/b.txt"
head -c 20000000 /dev/urandom >"$WORK/src/big.bin" # s3cmd and rclone upload it in parts

# --- s3cmd: only keys and host set; everything else (signature v4 with
# bucket_location US, multipart chunk size, ...) is s3cmd's default.
cat >"$WORK/s3cfg" <<EOF
[default]
access_key = $AK
secret_key = $SK
host_base = $HOSTPORT
host_bucket = $HOSTPORT
use_https = False
EOF
s3c() { /usr/bin/s3cmd -c "$WORK/s3cfg" "$@" 2>&1; }
s3c mb s3://s3cmd-bkt >/dev/null || fail "s3cmd mb: $(s3c mb s3://s3cmd-bkt)"
out=$(s3c put "$WORK/src/a.bin" "$WORK/src/big.bin" s3://s3cmd-bkt/) || fail "s3cmd put: $out"
check "s3cmd ls" 2 "$(s3c ls s3://s3cmd-bkt/ | grep -c 's3://s3cmd-bkt/')"
out=$(s3c get s3://s3cmd-bkt/big.bin "$WORK/got/big.bin") || fail "s3cmd get: $out"
check "s3cmd get bytes" "$(sha256sum <"$WORK/src/big.bin")" "$(sha256sum <"$WORK/got/big.bin")"
out=$(s3c setacl --acl-public s3://s3cmd-bkt/a.bin) || fail "s3cmd setacl: $out"
check "s3cmd --acl-public, anonymous GET" "$(sha256sum <"$WORK/src/a.bin")" "$(curl -fsS "$EP/s3cmd-bkt/a.bin" | sha256sum)"
out=$(s3c setacl --acl-private s3://s3cmd-bkt/a.bin) || fail "s3cmd setacl private: $out"
check "s3cmd --acl-private" 403 "$(curl -s -o /dev/null -w '%{http_code}' "$EP/s3cmd-bkt/a.bin")"
cat >"$WORK/policy.json" <<'JSON'
{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::s3cmd-bkt/big.bin"}]}
JSON
out=$(s3c setpolicy "$WORK/policy.json" s3://s3cmd-bkt) || fail "s3cmd setpolicy: $out"
check "s3cmd setpolicy, anonymous GET" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$EP/s3cmd-bkt/big.bin")"
out=$(s3c delpolicy s3://s3cmd-bkt) || fail "s3cmd delpolicy: $out"
# s3cmd info asks for the policy, CORS and ACL of a bucket and an object.
cat >"$WORK/cors.xml" <<EOF
<CORSConfiguration><CORSRule><AllowedOrigin>https://app.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>
EOF
out=$(s3c setcors "$WORK/cors.xml" s3://s3cmd-bkt) || fail "s3cmd setcors: $out"
out=$(s3c info s3://s3cmd-bkt) || fail "s3cmd info (bucket): $out"
check "s3cmd info shows CORS" 1 "$(echo "$out" | grep -c 'https://app.example.com')"
out=$(s3c info s3://s3cmd-bkt/a.bin) || fail "s3cmd info (object): $out"
out=$(s3c delcors s3://s3cmd-bkt) || fail "s3cmd delcors: $out"
out=$(s3c del --recursive --force s3://s3cmd-bkt/) || fail "s3cmd del: $out"
out=$(s3c rb s3://s3cmd-bkt) || fail "s3cmd rb: $out"
check "s3cmd ls after rb" 0 "$(s3c ls | grep -c 's3cmd-bkt' || true)"

echo "s3cmd: ok (${SECONDS}s)"

# --- rclone: an S3 remote of provider Other with keys and endpoint only.
export RCLONE_CONFIG_FG_TYPE=s3 RCLONE_CONFIG_FG_PROVIDER=Other RCLONE_CONFIG_FG_ACCESS_KEY_ID=$AK \
  RCLONE_CONFIG_FG_SECRET_ACCESS_KEY=$SK RCLONE_CONFIG_FG_ENDPOINT=$EP RCLONE_CONFIG=/dev/null
rc() { /usr/bin/rclone --retries 1 --low-level-retries 1 "$@" 2>&1; }
out=$(rc mkdir fg:rclone-bkt) || fail "rclone mkdir: $out"
out=$(rc copy "$WORK/src" fg:rclone-bkt/data) || fail "rclone copy: $out"
out=$(rc check "$WORK/src" fg:rclone-bkt/data) || fail "rclone check: $out"
rm "$WORK/src/a.bin"
echo "changed" >"$WORK/src/sub/b.txt"
out=$(rc sync "$WORK/src" fg:rclone-bkt/data) || fail "rclone sync: $out"
out=$(rc check "$WORK/src" fg:rclone-bkt/data) || fail "rclone check after sync: $out"
check "rclone ls after sync" 2 "$(rc ls fg:rclone-bkt/data | wc -l | tr -d ' ')"
out=$(rc purge fg:rclone-bkt) || fail "rclone purge: $out"
check "rclone lsd after purge" 0 "$(rc lsd fg: | grep -c rclone-bkt || true)"

echo "rclone: ok (${SECONDS}s)"

# --- boto3's resource API, at its defaults: a cleanup that lists versions
# first, then one that lists objects, then the bucket goes.
out=$(AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null \
  AWS_SHARED_CREDENTIALS_FILE=/dev/null EP=$EP "$PY" - <<'EOF' 2>&1
import os, boto3
s3 = boto3.resource("s3", endpoint_url=os.environ["EP"])
b = s3.create_bucket(Bucket="boto3-bkt")
for i in range(5):
    b.put_object(Key=f"dir/obj-{i}", Body=b"x" * (i + 1))
versions = list(b.object_versions.all())
assert len(versions) == 5 and all(v.id == "null" for v in versions), [(v.key, v.id) for v in versions]
b.object_versions.delete()
assert list(b.objects.all()) == [], "objects left after object_versions.delete()"
b.upload_file(os.devnull, "empty")
b.put_object(Key="again", Body=b"y")
b.objects.all().delete()
assert list(b.objects.all()) == []
b.delete()
print("boto3 ok")
EOF
) || fail "boto3: $out"
check "boto3" "boto3 ok" "$(echo "$out" | tail -1)"
echo "boto3: ok (${SECONDS}s)"

# --- boto3 in a browser's place: CORS set with put_bucket_cors, the
# preflight and form uploads sent with requests (a dependency of Debian's
# python3-boto3), the forms from generate_presigned_post. At its defaults
# botocore signs presigned POSTs and presigned URLs with SigV2 (for an S3
# endpoint in us-east-1); fedgate verifies those, and the same forms signed
# with signature_version s3v4 (as AWS's documentation sets it) are SigV4.
out=$(AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null \
  AWS_SHARED_CREDENTIALS_FILE=/dev/null EP=$EP "$PY" - <<'EOF' 2>&1
import json, os, urllib.parse, boto3, requests
from botocore.config import Config
ep = os.environ["EP"]
s3 = boto3.client("s3", endpoint_url=ep, config=Config(signature_version="s3v4"))
s3.create_bucket(Bucket="forms")
origin = "https://app.example.com"
s3.put_bucket_cors(Bucket="forms", CORSConfiguration={"CORSRules": [
    {"AllowedOrigins": ["https://*.example.com"], "AllowedMethods": ["GET", "POST"], "AllowedHeaders": ["*"],
     "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 60}]})
rules = s3.get_bucket_cors(Bucket="forms")["CORSRules"]
assert rules[0]["AllowedOrigins"] == ["https://*.example.com"] and rules[0]["MaxAgeSeconds"] == 60, rules
r = requests.options(f"{ep}/forms", headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                             "Access-Control-Request-Headers": "content-type"})
assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == origin, (r.status_code, r.headers, r.text)
assert r.headers["Access-Control-Allow-Methods"] == "GET, POST", r.headers
r = requests.options(f"{ep}/forms", headers={"Origin": "https://evil.test", "Access-Control-Request-Method": "POST"})
assert r.status_code == 403 and "<Code>AccessForbidden</Code>" in r.text, (r.status_code, r.text)

def post(p, data, extra=None, **kw):
    fields = dict(p["fields"], **(extra or {}))
    return requests.post(p["url"], data=fields, files={"file": ("hello.txt", data)}, headers={"Origin": origin}, **kw)

def code(r):
    return r.text.split("<Code>")[1].split("</Code>")[0] if "<Code>" in r.text else r.status_code

rng = ["content-length-range", 1, 2 * 1024 * 1024]
defaults = boto3.client("s3", endpoint_url=ep)  # boto3 at its defaults
p = defaults.generate_presigned_post("forms", "v2/${filename}", Conditions=[rng])
r = post(p, b"signed the default way")
assert r.status_code == 204, (p["fields"].keys(), r.status_code, r.text)
url = defaults.generate_presigned_url("get_object", Params={"Bucket": "forms", "Key": "v2/hello.txt"})
r = requests.get(url)
assert r.status_code == 200 and r.content == b"signed the default way", (url, r.status_code, r.text)
r = requests.get(url.replace("hello", "other"))
assert code(r) == "SignatureDoesNotMatch", (r.status_code, r.text)
r = requests.put(defaults.generate_presigned_url("put_object", Params={"Bucket": "forms", "Key": "v2/put.txt"}), data=b"put")
assert r.status_code == 200, (r.status_code, r.text)
assert s3.get_object(Bucket="forms", Key="v2/put.txt")["Body"].read() == b"put"
p = s3.generate_presigned_post("forms", "up/${filename}", Conditions=[rng])
assert "x-amz-signature" in p["fields"] and p["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256", p["fields"]
r = post(p, b"hello form")
assert r.status_code == 204 and r.headers["Access-Control-Allow-Origin"] == origin and r.headers["ETag"], (r.status_code, r.headers, r.text)
assert s3.get_object(Bucket="forms", Key="up/hello.txt")["Body"].read() == b"hello form"
p = s3.generate_presigned_post("forms", "up/201.txt", Fields={"success_action_status": "201", "Content-Type": "text/plain"},
                               Conditions=[{"success_action_status": "201"}, {"Content-Type": "text/plain"}, rng])
r = post(p, b"x")
assert r.status_code == 201 and "<Key>up/201.txt</Key>" in r.text, (r.status_code, r.text)
assert s3.head_object(Bucket="forms", Key="up/201.txt")["ContentType"] == "text/plain"
p = s3.generate_presigned_post("forms", "up/r.txt", Fields={"success_action_redirect": origin + "/done"},
                               Conditions=[{"success_action_redirect": origin + "/done"}, rng])
r = post(p, b"x", allow_redirects=False)
q = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers.get("Location", "")).query)
assert r.status_code == 303 and q["bucket"] == ["forms"] and q["key"] == ["up/r.txt"] and q["etag"][0].startswith('"'), (r.status_code, r.headers)

p = s3.generate_presigned_post("forms", "up/${filename}", Conditions=[rng])
assert code(post(p, b"x", {"key": "other/x"})) == "AccessDenied"
assert code(post(p, b"x" * (3 * 1024 * 1024))) == "EntityTooLarge"
assert code(post(p, b"")) == "EntityTooSmall"
r = post(p, b"x", {"x-amz-meta-extra": "1"})
assert code(r) == "AccessDenied" and "Extra input fields: x-amz-meta-extra" in r.text, r.text
assert code(post(p, b"x", {"x-amz-signature": "0" * 64})) == "SignatureDoesNotMatch"
r = post(s3.generate_presigned_post("forms", "up/late", Conditions=[rng], ExpiresIn=-60), b"x")
assert code(r) == "AccessDenied" and "Policy expired" in r.text, r.text
for k in ["other/x", "up/late"]:
    assert s3.list_objects_v2(Bucket="forms", Prefix=k)["KeyCount"] == 0, k

def anon():
    return requests.post(f"{ep}/forms", data={"key": "drop/${filename}"}, files={"file": ("anon.txt", b"anon")})
assert code(anon()) == "AccessDenied"
s3.put_bucket_policy(Bucket="forms", Policy=json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::forms/drop/*"}]}))
r = anon()
assert r.status_code == 204, (r.status_code, r.text)
assert s3.get_object(Bucket="forms", Key="drop/anon.txt")["Body"].read() == b"anon"
s3.delete_bucket_cors(Bucket="forms")
r = requests.options(f"{ep}/forms", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
assert r.status_code == 403 and "CORS is not enabled" in r.text, r.text
print("boto3 forms ok")
EOF
) || fail "boto3 presigned POST and CORS: $out"
check "boto3 forms" "boto3 forms ok" "$(echo "$out" | tail -1)"
echo "boto3 presigned POST and CORS: ok (${SECONDS}s)"

echo "PASS: s3cmd, rclone and boto3 at their defaults ($pass checks)"
