#!/usr/bin/env bash
# Builds a fedgate release into DIST (default dist/VERSION): for linux/amd64
# and linux/arm64, a static binary (CGO off, -trimpath, version and commit
# set with -ldflags -X), a CycloneDX SBOM of the Go modules in it
# (cyclonedx-gomod, pinned in tools/go.mod), the Helm chart (deploy/helm/fedgate)
# packaged with version and appVersion VERSION without its v (so its image tag
# defaults to the release; docs/kubernetes.md), and SHA256SUMS over them all.
# docs/deploy.md says how to cut and publish a release. Usage:
#   scripts/release.sh VERSION [DIST]        (make release VERSION=v0.1.0 [DIST=dir])
# Files, for VERSION v0.1.0:
#   fedgate_v0.1.0_linux_amd64            fedgate_v0.1.0_linux_arm64
#   fedgate_v0.1.0_linux_amd64.cdx.json   fedgate_v0.1.0_linux_arm64.cdx.json
#   fedgate-0.1.0.tgz (the chart)          SHA256SUMS
set -euo pipefail

VERSION=${1:-}
# vMAJOR.MINOR.PATCH with an optional pre-release (semver, no build metadata).
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if ! [[ $VERSION =~ $semver ]]; then
  echo "release: VERSION=${VERSION:-(unset)} is not vMAJOR.MINOR.PATCH[-pre] (e.g. v0.1.0, v0.2.0-rc.1); nothing built" >&2
  exit 2
fi
REPO=$(cd "$(dirname "$0")/.." && pwd)
# The chart's version is the release's without the v (Helm wants semver).
CHART_VERSION=${VERSION#v}
CHART_TGZ=fedgate-$CHART_VERSION.tgz
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
  other=$(find "$DIST" -mindepth 1 -maxdepth 1 ! -name "fedgate_${VERSION}_*" ! -name "$CHART_TGZ" ! -name SHA256SUMS -printf '%f ')
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

# package_chart DIR: the chart as Helm packages it (a gzipped tar of fedgate/),
# Chart.yaml's version and appVersion set to CHART_VERSION, ci/ (the chart
# check's values files) left out; the same bytes for the same commit (sorted
# names, the commit's time, no owners, gzip -n).
package_chart() {
  local out=$1 tmp
  tmp=$(mktemp -d)
  cp -R deploy/helm/fedgate "$tmp/fedgate"
  rm -rf "$tmp/fedgate/ci"
  sed -i -E "s/^version: .*/version: $CHART_VERSION/; s/^appVersion: .*/appVersion: \"$CHART_VERSION\"/" "$tmp/fedgate/Chart.yaml"
  grep -qx "version: $CHART_VERSION" "$tmp/fedgate/Chart.yaml" || { echo "release: could not stamp the chart's version" >&2; rm -rf "$tmp"; exit 1; }
  tar -C "$tmp" --sort=name --mtime="@$(git log -1 --format=%ct)" --owner=0 --group=0 --numeric-owner -cf - fedgate |
    gzip -n -9 >"$out/$CHART_TGZ"
  rm -rf "$tmp"
}

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
step "$CHART_TGZ (deploy/helm/fedgate, version and appVersion $CHART_VERSION)"
package_chart "$stage"
step "SHA256SUMS"
(cd "$stage" && sha256sum fedgate_* "$CHART_TGZ" >SHA256SUMS)

mkdir -p "$DIST"
rm -f "$DIST"/fedgate_"${VERSION}"_* "$DIST/$CHART_TGZ" "$DIST/SHA256SUMS"
mv "$stage"/* "$DIST"/
rmdir "$stage"
trap - EXIT
step "done: $DIST"
(cd "$DIST" && ls -l)
