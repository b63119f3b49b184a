#!/usr/bin/env bash
# Checks what `make release` makes (docs/deploy.md, "Releases"):
# builds VERSION=v0.0.0-ci into a temp dir, then checks that SHA256SUMS
# covers every file and `sha256sum -c` passes, that the amd64 binary prints
# the version and commit (fedgate version, fedgate --version), that both are
# static ELF binaries of their machine (x86-64, AArch64) whose build info
# (go version -m) says CGO_ENABLED=0, -trimpath and GOARCH and which hold
# the version and commit strings, and that the SBOMs are CycloneDX JSON naming the modules
# fedgate is built from (hashicorp/raft at go.mod's version), and that the Helm
# chart's package says version and appVersion 0.0.0-ci and, rendered by helm,
# runs the image tag 0.0.0-ci. Also that a malformed VERSION is refused and
# builds nothing. Usage:
# scripts/test-release.sh
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
GO=${GO:-go}
PY=/usr/bin/python3
V=v0.0.0-ci
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { printf "FAIL: %b\n" "$*" >&2; exit 1; }

# A malformed VERSION: refused with the reason, nothing made.
if out=$(make -s release VERSION=1.2 DIST="$WORK/bad" 2>&1); then fail "make release VERSION=1.2 succeeded: $out"; fi
[[ $out == *"is not vMAJOR.MINOR.PATCH"* ]] || fail "make release VERSION=1.2 without the reason: $out"
[ ! -e "$WORK/bad" ] || fail "make release VERSION=1.2 made $WORK/bad"
if out=$(make -s release 2>&1); then fail "make release without VERSION succeeded: $out"; fi
[[ $out == *"give VERSION="* ]] || fail "make release without VERSION: $out"
# A DIST holding other files is refused, and left as it was.
mkdir "$WORK/other" && echo keep >"$WORK/other/notes.txt"
if out=$(make -s release VERSION=$V DIST="$WORK/other" 2>&1); then fail "make release into a directory with other files succeeded: $out"; fi
[ "$(ls "$WORK/other")" = notes.txt ] || fail "a refused release changed $WORK/other: $(ls "$WORK/other")"

DIST=$WORK/dist
t0=$SECONDS
make -s release VERSION=$V DIST="$DIST" >"$WORK/release.log" 2>&1 || { cat "$WORK/release.log"; fail "make release VERSION=$V"; }
echo "make release VERSION=$V: $((SECONDS - t0))s"
cd "$DIST"
amd=fedgate_${V}_linux_amd64
arm=fedgate_${V}_linux_arm64
chart=fedgate-${V#v}.tgz
want="SHA256SUMS $amd $amd.cdx.json $arm $arm.cdx.json $chart"
got=$(ls | sort | tr '\n' ' ')
[ "$got" = "$(tr ' ' '\n' <<<"$want" | sort | tr '\n' ' ')" ] || fail "release files: $got, want $want"

# Checksums: every file but SHA256SUMS is listed, and all match.
listed=$(awk '{print $2}' SHA256SUMS | sort | tr '\n' ' ')
[ "$listed" = "$(ls | grep -v '^SHA256SUMS$' | sort | tr '\n' ' ')" ] || fail "SHA256SUMS lists $listed"
sha256sum -c --strict SHA256SUMS || fail "sha256sum -c SHA256SUMS"

commit=$(git -C "$REPO" rev-parse HEAD)
[ -n "$(git -C "$REPO" status --porcelain)" ] && commit+="+dirty"
for args in version --version; do
  out=$("./$amd" $args) || fail "$amd $args"
  grep -qx "fedgate $V" <<<"$out" || fail "$amd $args does not print the version $V:\n$out"
  grep -qx "commit: $commit" <<<"$out" || fail "$amd $args does not print commit $commit:\n$out"
  grep -qx "go: $($GO env GOVERSION) linux/amd64" <<<"$out" || fail "$amd $args does not print the Go version:\n$out"
done

# ELF machine (e_machine at offset 18): 62 x86-64, 183 AArch64; static: no
# PT_INTERP (a dynamically linked binary names its loader).
machine() { od -An -tu2 -j18 -N2 "$1" | tr -d ' '; }
[ "$(head -c4 "$arm" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "$arm is not an ELF file"
[ "$(machine "$amd")" = 62 ] || fail "$amd: ELF machine $(machine "$amd"), want 62 (x86-64)"
[ "$(machine "$arm")" = 183 ] || fail "$arm: ELF machine $(machine "$arm"), want 183 (AArch64)"
for b in "$amd" "$arm"; do
  ! grep -q 'ld-linux' "$b" || fail "$b names a dynamic loader: not static"
  if command -v readelf >/dev/null; then
    hdr=$(readelf -lW "$b") || fail "readelf -l $b"
    ! grep -q INTERP <<<"$hdr" || fail "$b has a program interpreter (PT_INTERP): not static"
  fi
  # The build info (with -trimpath Go records no -ldflags there).
  m=$($GO version -m "$b") || fail "go version -m $b"
  arch=${b##*_}
  for w in "path	github.com/fedgate/fedgate/cmd/fedgate" "CGO_ENABLED=0" "-trimpath=true" "GOOS=linux" "GOARCH=$arch"; do
    grep -qF -- "$w" <<<"$m" || fail "go version -m $b has no $w:\n$m"
  done
  # The version and commit -X set (the arm64 binary cannot run here).
  grep -aqF -- "$V" "$b" || fail "$b does not hold the version string $V"
  grep -aqF -- "$commit" "$b" || fail "$b does not hold the commit $commit"
done

# The SBOMs: CycloneDX JSON, the fedgate component at this version, and a
# component per module, hashicorp/raft at the version go.mod resolves.
raft=$(cd "$REPO" && $GO list -m -f '{{.Version}}' github.com/hashicorp/raft)
for b in "$amd" "$arm"; do
  "$PY" - "$b.cdx.json" "$V" "$raft" <<'EOF' || fail "SBOM $b.cdx.json"
import json, sys
path, version, raft = sys.argv[1:]
bom = json.load(open(path))
assert bom["bomFormat"] == "CycloneDX", bom.get("bomFormat")
main = bom["metadata"]["component"]
assert main["name"] == "github.com/fedgate/fedgate" and main["version"] == version, main
purls = {c.get("purl", "").split("?")[0] for c in bom["components"]}
want = "pkg:golang/github.com/hashicorp/raft@" + raft
assert want in purls, (want, sorted(purls)[:20])
assert len(purls) > 50, len(purls)
print(f"{path}: CycloneDX {bom['specVersion']}, {len(purls)} components, {want}")
EOF
done
# The chart: stamped with the release's version, its ci/ left out; helm (from
# scripts/deploytools.sh) reads it and renders the release's image tag.
cv=${V#v}
files=$(tar -tzf "$chart") || fail "$chart is not a gzipped tar"
grep -qx fedgate/Chart.yaml <<<"$files" || fail "$chart has no fedgate/Chart.yaml:\n$files"
grep -qx fedgate/templates/statefulset.yaml <<<"$files" || fail "$chart has no templates/statefulset.yaml"
! grep -q '^fedgate/ci/' <<<"$files" || fail "$chart holds ci/"
meta=$(tar -xzOf "$chart" fedgate/Chart.yaml)
grep -qx "version: $cv" <<<"$meta" || fail "$chart: Chart.yaml version is not $cv:\n$meta"
grep -qx "appVersion: \"$cv\"" <<<"$meta" || fail "$chart: Chart.yaml appVersion is not $cv:\n$meta"
HELM=${FEDGATE_TESTENV_CACHE:-$HOME/.cache/fedgate-testenv}/bin/helm
[ -x "$HELM" ] || HELM=$(command -v helm || true)
if [ -n "$HELM" ]; then
  out=$(HELM_CACHE_HOME=$WORK/helm HELM_CONFIG_HOME=$WORK/helm HELM_DATA_HOME=$WORK/helm "$HELM" show chart "$chart") || fail "helm show chart $chart"
  grep -qx "version: $cv" <<<"$out" || fail "helm show chart $chart:\n$out"
  out=$(HELM_CACHE_HOME=$WORK/helm HELM_CONFIG_HOME=$WORK/helm HELM_DATA_HOME=$WORK/helm "$HELM" template r "$chart") || fail "helm template $chart"
  grep -q "image: fedgate/fedgate:$cv\$" <<<"$out" || fail "helm template $chart does not run image tag $cv"
  echo "$chart: version $cv, image tag $cv (helm template)"
elif [ -n "${CI:-}" ]; then
  fail "helm is not installed (CI is set; scripts/deploytools.sh install helm)"
else
  echo "SKIP: helm is not installed: the chart package is checked without it (scripts/deploytools.sh install helm)"
fi

ls -l "$DIST"
echo "PASS: release (${SECONDS}s)"
