#!/usr/bin/env bash
# Installs the tools that check terraform/ offline (see docs/deploy.md and
# internal/deploycheck): OpenTofu (`tofu fmt`) and tflint with its bundled
# terraform ruleset; staticcheck, which `make lint` runs over the Go code; and
# helm, whose `helm lint --strict` the chart check (deploy/helm/check) runs on
# deploy/helm/fedgate; and the Helm Terraform provider (hashicorp/helm 3.2.0),
# built from its source, in a plugin directory for `tofu init -plugin-dir`
# (terraform/modules/region-k8s). All are built from the Go module proxy.
#
#   scripts/deploytools.sh install [tofu|tflint|staticcheck|helm|helm-provider ...]   install (default: all); idempotent
#   scripts/deploytools.sh status                                                     what is installed
#
# Binaries go to $FEDGATE_TESTENV_CACHE/bin (default ~/.cache/fedgate-testenv/bin),
# next to the cloud stand-ins of scripts/testenv.sh; the tests look there.
# OpenTofu refuses `go install` (its go.mod has replace directives), so its
# module is downloaded, copied to a writable directory and built there; the
# Helm provider too, into $FEDGATE_TESTENV_CACHE/tofu-plugins.
set -euo pipefail

CACHE=${FEDGATE_TESTENV_CACHE:-$HOME/.cache/fedgate-testenv}
BIN=$CACHE/bin

TOFU_MOD=github.com/opentofu/opentofu
TOFU_VERSION=v1.12.6
TFLINT_MOD=github.com/terraform-linters/tflint
TFLINT_VERSION=v0.64.0
# staticcheck is installed as a tool (go install pkg@version), never added to go.mod.
STATICCHECK_MOD=honnef.co/go/tools
STATICCHECK_VERSION=v0.8.2
# helm too: a tool binary; the chart check's own module (deploy/helm/check)
# imports the same version as a library.
HELM_MOD=helm.sh/helm/v4
HELM_VERSION=v4.3.2
# The Helm provider: the proxy answers its v2/v3 release tags with 403, but
# serves a commit of its main branch (2026-06-29, after the 3.2.0 release;
# its version/VERSION and newest CHANGELOG entry say 3.2.0) as a v1
# pseudo-version. It is built into a plugin directory laid out as
# `tofu init -plugin-dir` reads it, as version 3.2.0.
HELM_PROVIDER_MOD=github.com/hashicorp/terraform-provider-helm
HELM_PROVIDER_PSEUDO=v1.3.3-0.20260629194918-a4f1c1d8b008
HELM_PROVIDER_VERSION=3.2.0
PLUGINS=$CACHE/tofu-plugins

log() { echo "deploytools: $*" >&2; }
die() { log "$*"; exit 1; }

timed() {
  local name=$1 start=$SECONDS; shift
  "$@"
  log "$name installed in $((SECONDS - start))s"
}

# tofu_version: "v1.12.6" from `tofu version`, or "".
tofu_version() {
  [ -x "$BIN/tofu" ] || return 0
  CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE=/dev/null "$BIN/tofu" version 2>/dev/null | awk 'NR == 1 && $1 == "OpenTofu" { print $2 }'
}

tflint_version() {
  [ -x "$BIN/tflint" ] || return 0
  go version -m "$BIN/tflint" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

staticcheck_version() {
  [ -x "$BIN/staticcheck" ] || return 0
  go version -m "$BIN/staticcheck" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

helm_version() {
  [ -x "$BIN/helm" ] || return 0
  go version -m "$BIN/helm" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

helm_provider_bin() {
  echo "$PLUGINS/registry.opentofu.org/hashicorp/helm/$HELM_PROVIDER_VERSION/$(go env GOOS)_$(go env GOARCH)/terraform-provider-helm_v$HELM_PROVIDER_VERSION"
}

# helm_provider_version: the module version the plugin was built from (its
# .source stamp; a build from a copy of the module records no version), or "".
helm_provider_version() {
  local b; b=$(helm_provider_bin)
  [ -x "$b" ] && [ -f "$b.source" ] || return 0
  cat "$b.source"
}

# build_tofu runs in a subshell so that its work directory goes however it ends.
build_tofu() (
  src=$(cd "$CACHE" && GOFLAGS=-mod=mod go mod download -json "$TOFU_MOD@$TOFU_VERSION" |
    awk -F'"' '$2 == "Dir" { print $4 }')
  [ -n "$src" ] && [ -d "$src" ] || die "tofu: go mod download $TOFU_MOD@$TOFU_VERSION failed"
  work=$(mktemp -d "$CACHE/tofu-src.XXXXXX")
  trap 'rm -rf "$work" "$BIN/tofu.new"' EXIT
  cp -R "$src/." "$work/"
  chmod -R u+w "$work"
  # dev=no: `tofu version` prints the release version, not "-dev".
  cd "$work"
  GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w -X $TOFU_MOD/version.dev=no" -o "$BIN/tofu.new" ./cmd/tofu
  mv "$BIN/tofu.new" "$BIN/tofu"
)

install_tofu() {
  local have; have=$(tofu_version)
  if [ "$have" = "$TOFU_VERSION" ]; then
    log "tofu: present ($have)"; return
  fi
  [ -n "$have" ] && log "tofu: have $have, want $TOFU_VERSION"
  log "tofu: building $TOFU_MOD@$TOFU_VERSION from a copy of the module (~8 min on 2 cores)"
  timed tofu build_tofu
  [ "$(tofu_version)" = "$TOFU_VERSION" ] || die "tofu: built binary reports '$(tofu_version)', want $TOFU_VERSION"
}

install_tflint() {
  local have; have=$(tflint_version)
  if [ "$have" = "$TFLINT_VERSION" ]; then
    log "tflint: present ($have)"; return
  fi
  [ -n "$have" ] && log "tflint: have $have, want $TFLINT_VERSION"
  log "tflint: building $TFLINT_MOD@$TFLINT_VERSION (~3 min)"
  timed tflint env GOBIN="$BIN" GOFLAGS="-mod=mod -buildvcs=false" \
    go install -trimpath -ldflags "-s -w" "$TFLINT_MOD@$TFLINT_VERSION"
}

install_staticcheck() {
  local have; have=$(staticcheck_version)
  if [ "$have" = "$STATICCHECK_VERSION" ]; then
    log "staticcheck: present ($have)"; return
  fi
  [ -n "$have" ] && log "staticcheck: have $have, want $STATICCHECK_VERSION"
  log "staticcheck: building $STATICCHECK_MOD@$STATICCHECK_VERSION (~1-2 min)"
  timed staticcheck env GOBIN="$BIN" GOFLAGS="-mod=mod -buildvcs=false" \
    go install -trimpath "$STATICCHECK_MOD/cmd/staticcheck@$STATICCHECK_VERSION"
  [ "$(staticcheck_version)" = "$STATICCHECK_VERSION" ] ||
    die "staticcheck: built binary reports '$(staticcheck_version)', want $STATICCHECK_VERSION"
}

install_helm() {
  local have; have=$(helm_version)
  if [ "$have" = "$HELM_VERSION" ]; then
    log "helm: present ($have)"; return
  fi
  [ -n "$have" ] && log "helm: have $have, want $HELM_VERSION"
  log "helm: building $HELM_MOD@$HELM_VERSION (~3-5 min)"
  timed helm env GOBIN="$BIN" GOFLAGS="-mod=mod -buildvcs=false" \
    go install -trimpath -ldflags "-s -w" "$HELM_MOD/cmd/helm@$HELM_VERSION"
  [ "$(helm_version)" = "$HELM_VERSION" ] ||
    die "helm: built binary reports '$(helm_version)', want $HELM_VERSION"
}

# build_helm_provider: like tofu, from a writable copy of the module.
build_helm_provider() (
  src=$(cd "$CACHE" && GOFLAGS=-mod=mod go mod download -json "$HELM_PROVIDER_MOD@$HELM_PROVIDER_PSEUDO" |
    awk -F'"' '$2 == "Dir" { print $4 }')
  [ -n "$src" ] && [ -d "$src" ] || die "helm-provider: go mod download $HELM_PROVIDER_MOD@$HELM_PROVIDER_PSEUDO failed"
  out=$(helm_provider_bin)
  work=$(mktemp -d "$CACHE/helm-provider-src.XXXXXX")
  trap 'rm -rf "$work" "$out.new"' EXIT
  cp -R "$src/." "$work/"
  chmod -R u+w "$work"
  mkdir -p "$(dirname "$out")"
  cd "$work"
  GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w -X main.Version=$HELM_PROVIDER_VERSION" -o "$out.new" .
  mv "$out.new" "$out"
  echo "$HELM_PROVIDER_PSEUDO" >"$out.source"
)

install_helm_provider() {
  local have; have=$(helm_provider_version)
  if [ "$have" = "$HELM_PROVIDER_PSEUDO" ]; then
    log "helm-provider: present ($(helm_provider_bin))"; return
  fi
  [ -n "$have" ] && log "helm-provider: have $have, want $HELM_PROVIDER_PSEUDO"
  log "helm-provider: building $HELM_PROVIDER_MOD@$HELM_PROVIDER_PSEUDO ($HELM_PROVIDER_VERSION) (~5 min on 2 cores)"
  timed helm-provider build_helm_provider
  [ -x "$(helm_provider_bin)" ] || die "helm-provider: $(helm_provider_bin) was not built"
}

cmd_install() {
  local kinds=("$@") k
  [ ${#kinds[@]} -eq 0 ] && kinds=(tofu tflint staticcheck helm helm-provider)
  mkdir -p "$BIN"
  # One installer at a time per cache (the same lock as scripts/testenv.sh).
  exec 9>"$CACHE/.install.lock"
  if command -v flock >/dev/null; then flock 9; fi
  for k in "${kinds[@]}"; do
    case $k in
      tofu | opentofu) install_tofu ;;
      tflint) install_tflint ;;
      staticcheck) install_staticcheck ;;
      helm) install_helm ;;
      helm-provider) install_helm_provider ;;
      *) die "unknown tool $k (tofu, tflint, staticcheck, helm, helm-provider)" ;;
    esac
  done
}

cmd_status() {
  local v
  v=$(tofu_version)
  if [ -n "$v" ]; then echo "tofu:            installed $v (want $TOFU_VERSION)"; else echo "tofu:            missing"; fi
  v=$(tflint_version)
  if [ -n "$v" ]; then echo "tflint:          installed $v (want $TFLINT_VERSION)"; else echo "tflint:          missing"; fi
  v=$(staticcheck_version)
  if [ -n "$v" ]; then echo "staticcheck:     installed $v (want $STATICCHECK_VERSION)"; else echo "staticcheck:     missing"; fi
  v=$(helm_version)
  if [ -n "$v" ]; then echo "helm:            installed $v (want $HELM_VERSION)"; else echo "helm:            missing"; fi
  v=$(helm_provider_version)
  if [ -n "$v" ]; then echo "helm-provider:   installed $HELM_PROVIDER_VERSION ($v) in $PLUGINS"; else echo "helm-provider:   missing"; fi
}

case ${1:-} in
  install) shift; cmd_install "$@" ;;
  status) cmd_status ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
