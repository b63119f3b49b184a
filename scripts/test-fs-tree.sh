#!/usr/bin/env bash
# An existing file tree as a bucket (issue 14; docs/stores.md "fs"): 10,000
# files made by a program and copied with plain `cp -r` (nested, names with
# spaces, '-', unicode), served through an fs store in the policy file, and
# driven with the aws CLI and rclone at their defaults:
#   - `aws s3 ls --recursive` lists exactly the tree's files, in S3 byte
#     order ('-' < '/' < '0' across directories);
#   - `aws s3 sync` back out is byte-identical;
#   - a file changed with `echo >>` is read new on the next GET (ttl 0);
#   - `rclone check` passes (fedgate's ETags of files it did not write are
#     not MD5s, so rclone does not compare them with its own);
#   - the same tree through a read_only store refuses PUT with AccessDenied.
# Usage: scripts/test-fs-tree.sh path/to/fedgate [NFILES]
set -euo pipefail

BIN=${1:?usage: $0 path/to/fedgate [NFILES]}
NFILES=${2:-10000}
AWS=${AWS:-/usr/bin/aws}
for tool in "$AWS" /usr/bin/rclone /usr/bin/python3; do
  if [ ! -x "$tool" ]; then
    if [ -n "${CI:-}" ]; then echo "FAIL: $tool missing (scripts/install-test-deps.sh installs it)"; exit 1; fi
    echo "SKIP: $tool not installed (run scripts/install-test-deps.sh)"; exit 0
  fi
done

. "$(dirname "$0")/lib-server.sh"

export AWS_ACCESS_KEY_ID=FSTREETESTACCESSKEY1 AWS_SECRET_ACCESS_KEY=fs-tree-secret-key-0123456789abcdef
export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_PAGER="" AWS_EC2_METADATA_DISABLED=true
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL

pass=0
fail() { echo "FAIL: $*"; echo "--- server log"; tail -20 "$WORK/log"; exit 1; }
check() { # check NAME EXPECTED ACTUAL
  [ "$2" == "$3" ] || fail "$1: expected [$2], got [$3]"
  pass=$((pass + 1))
}

# The tree: made in one place, copied with cp -r to the served one.
/usr/bin/python3 - "$WORK/made" "$NFILES" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(14)
tops = ["train", "train-extra", "train0", "val set", "ünïcödé 日本", "a-b", "a"]
made = 0
def write(rel, size):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(rnd.randbytes(size))
# Names whose order differs between a per-directory sort and S3's.
for rel in ["a/b", "a-b/c", "a0", "a.txt", "train/shard-0.tar", "train/shard/0"]:
    write(rel, 100); made += 1
write("big/blob.bin", 9 << 20); made += 1  # the aws CLI reads it in ranges
while made < n:
    top = rnd.choice(tops)
    rel = f"{top}/part {made % 17}/s-{made % 5}/sample-{made:06d} ü.bin"
    write(rel, rnd.randrange(0, 3000)); made += 1
EOF
cp -r "$WORK/made" "$WORK/tree"
check "files in the tree" "$NFILES" "$(find "$WORK/tree" -type f | wc -l | tr -d ' ')"

cat >"$WORK/policy.yaml" <<EOF
regions:
  - {name: lab, location: onprem:lab}
stores:
  - {name: nas, kind: fs, location: onprem:lab, path: $WORK/tree}
  - {name: nas-ro, kind: fs, location: onprem:lab, path: $WORK/tree, read_only: true}
buckets:
  - {name: dataset, origin: nas, cache: {ttl: 0s}}
  - {name: dataset-ro, origin: nas-ro, cache: {ttl: 0s}}
EOF
start_server "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" --config "$WORK/policy.yaml"
aws() { "$AWS" --endpoint-url "$EP" "$@"; }

# 1. Listed exactly, in S3 byte order.
(cd "$WORK/made" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$WORK/want-keys"
aws s3 ls --recursive s3://dataset/ | sed -E 's/^[0-9-]+ [0-9:]+ +[0-9]+ //' >"$WORK/got-keys" || fail "aws s3 ls"
cmp -s "$WORK/want-keys" "$WORK/got-keys" || fail "aws s3 ls --recursive: $(diff "$WORK/want-keys" "$WORK/got-keys" | head -5)"
pass=$((pass + 1))
[ ! -e "$WORK/tree/_fedgate" ] || fail "the server wrote its region marker into the tree (no store should be its default)"
echo "ls: ok (${SECONDS}s)"

# 2. Synced back out, byte-identical.
aws s3 sync --only-show-errors s3://dataset/ "$WORK/synced" || fail "aws s3 sync"
diff -r "$WORK/made" "$WORK/synced" >/dev/null || fail "sync out differs: $(diff -rq "$WORK/made" "$WORK/synced" | head -3)"
pass=$((pass + 1))
echo "sync: ok (${SECONDS}s)"

# 3. A file changed in place is seen on the next GET.
f="train/shard-0.tar"
aws s3 cp --only-show-errors "s3://dataset/$f" "$WORK/before" || fail "get $f"
echo "appended" >>"$WORK/tree/$f"
aws s3 cp --only-show-errors "s3://dataset/$f" "$WORK/after" || fail "get $f again"
cmp -s "$WORK/after" "$WORK/tree/$f" || fail "the GET after 'echo >>' did not return the new bytes"
check "size after append" "$(($(stat -c %s "$WORK/before") + 9))" "$(stat -c %s "$WORK/after")"

# 4. rclone check, tree against bucket (an S3 remote, keys and endpoint only).
export RCLONE_CONFIG_FG_TYPE=s3 RCLONE_CONFIG_FG_PROVIDER=Other RCLONE_CONFIG_FG_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID \
  RCLONE_CONFIG_FG_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY RCLONE_CONFIG_FG_ENDPOINT=$EP RCLONE_CONFIG=/dev/null
rc() { /usr/bin/rclone --retries 1 --low-level-retries 1 "$@" 2>&1; }
out=$(rc check "$WORK/tree" fg:dataset) || fail "rclone check: $out"
grep -q "0 differences found" <<<"$out" || fail "rclone check: $out"
echo "$out" | grep -E "differences|matching|hashes" | sed 's/^/  rclone: /'

out=$(rc check --download "$WORK/tree/a" fg:dataset/a) || fail "rclone check --download: $out"
pass=$((pass + 1))
echo "rclone check: ok (${SECONDS}s)"

# 5. Writes: through the writable bucket a plain file appears (a large one
# by multipart); through read_only, AccessDenied and nothing changes.
head -c 12000000 /dev/urandom >"$WORK/upload.bin"
aws s3 cp --only-show-errors "$WORK/upload.bin" "s3://dataset/uploads/new file.bin" || fail "put through the writable store"
cmp -s "$WORK/upload.bin" "$WORK/tree/uploads/new file.bin" || fail "the uploaded file is not a plain copy in the tree"
pass=$((pass + 1))
if out=$(aws s3 cp "$WORK/before" s3://dataset-ro/refused.bin 2>&1); then fail "PUT to the read_only store succeeded"; fi
grep -q AccessDenied <<<"$out" || fail "PUT to the read_only store: expected AccessDenied in: $out"
[ ! -e "$WORK/tree/refused.bin" ] || fail "the refused PUT left a file"
if out=$(aws s3 rm "s3://dataset-ro/$f" 2>&1); then fail "DELETE through the read_only store succeeded"; fi
[ -e "$WORK/tree/$f" ] || fail "the refused DELETE removed the file"
pass=$((pass + 2))

echo "PASS: a $NFILES-file tree as a bucket ($pass checks, ${SECONDS}s)"
