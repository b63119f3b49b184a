#!/usr/bin/env bash
# Builds a fedgate release into DIST (default dist/VERSION): for linux/amd64
# and linux/arm64, a static binary (CGO off, -trimpath, version and commit
# set with -ldflags -X), a CycloneDX SBOM of the Go modules in it
# (cyclonedx-gomod, pinned in tools/go.mod), and SHA256SUMS over them all.
# docs/deploy.md says how to cut and publish a release. Usage:
#   scripts/release.sh VERSION [DIST]        (make release VERSION=v0.1.0 [DIST=dir])
# Files, for VERSION v0.1.0:
#   fedgate_v0.1.0_linux_amd64            fedgate_v0.1.0_linux_arm64
#   fedgate_v0.1.0_linux_amd64.cdx.json   fedgate_v0.1.0_linux_arm64.cdx.json
#   SHA256SUMS
set -euo pipefail

VERSION=${1:-}
# vMAJOR.MINOR.PATCH with an optional pre-release (semver, no build metadata).
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if ! [[ $VERSION =~ $semver ]]; then
  echo "release: VERSION=${VERSION:-(unset)} is not vMAJOR.MINOR.PATCH[-pre] (e.g. v0.1.0, v0.2.0-rc.1); nothing built" >&2
  exit 2
fi
REPO=$(cd "$(dirname "$0")/.." && pwd)
DIST=${2:-$REPO/dist/$VERSION}
DIST=${DIST%/}
GO=${GO:-go}
ARCHES=(amd64 arm64)
start=$SECONDS
step() { echo "release: [$((SECONDS - start))s] $*"; }

cd "$REPO"
commit=$(git rev-parse HEAD 2>/dev/null) || { echo "release: $REPO is not a git checkout: a release names its commit; nothing built" >&2; exit 2; }
if [ -n "$(git status --porcelain)" ]; then
  commit+="+dirty"
  echo "release: warning: the working tree has uncommitted changes; the binaries say commit $commit" >&2
fi
if [[ $VERSION != *-* ]] && [ "$(git tag --points-at HEAD --list "$VERSION")" != "$VERSION" ]; then
  echo "release: warning: HEAD is not tagged $VERSION (git tag -a $VERSION first; docs/deploy.md)" >&2
fi

# DIST holds one release: refuse one that holds anything else (another
# version's files would not be in its SHA256SUMS).
if [ -e "$DIST" ]; then
  [ -d "$DIST" ] || { echo "release: DIST=$DIST is not a directory; nothing built" >&2; exit 2; }
  other=$(find "$DIST" -mindepth 1 -maxdepth 1 ! -name "fedgate_${VERSION}_*" ! -name SHA256SUMS -printf '%f ')
  if [ -n "$other" ]; then
    echo "release: DIST=$DIST holds files of no $VERSION release ($other); give an empty or new directory; nothing built" >&2
    exit 2
  fi
fi
# Built beside DIST and moved into place at the end: a failed build leaves
# DIST as it was.
mkdir -p "$(dirname "$DIST")"
stage=$(mktemp -d "$DIST.tmp.XXXXXX")
trap 'rm -rf "$stage"' EXIT

ldflags="-s -w -X main.version=$VERSION -X main.commit=$commit"
for arch in "${ARCHES[@]}"; do
  name=fedgate_${VERSION}_linux_${arch}
  step "building $name (linux/$arch, CGO_ENABLED=0, -trimpath)"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -buildvcs=auto -ldflags "$ldflags" \
    -o "$stage/$name" ./cmd/fedgate
done
for arch in "${ARCHES[@]}"; do
  name=fedgate_${VERSION}_linux_${arch}
  step "SBOM $name.cdx.json (CycloneDX, from the binary's build info)"
  "$GO" tool -modfile=tools/go.mod cyclonedx-gomod bin -json -version "$VERSION" \
    -output "$stage/$name.cdx.json" "$stage/$name"
done
step "SHA256SUMS"
(cd "$stage" && sha256sum fedgate_* >SHA256SUMS)

mkdir -p "$DIST"
rm -f "$DIST"/fedgate_"${VERSION}"_* "$DIST/SHA256SUMS"
mv "$stage"/* "$DIST"/
rmdir "$stage"
trap - EXIT
step "done: $DIST"
(cd "$DIST" && ls -l)
