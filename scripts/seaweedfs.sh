#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible store the tests run against) from the Go module proxy at a pinned
# version, once, into a cache outside the repository, and prints the binary's path.
#
#   scripts/seaweedfs.sh            build if missing, print the path
#   scripts/seaweedfs.sh --path     print the path only (exit 1 when it is not built)
#
# Cache: ${CAIRN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn}/seaweedfs/<version>/weed. The first build
# downloads ~3.7 GB of modules and takes ~20 min on two cores; later runs find the binary and do nothing.
#
# `go install …/weed@VERSION` refuses a module whose go.mod has `replace` directives, so a throwaway tools module
# requires SeaweedFS, repeats its one `replace`, and builds the package from there.
set -euo pipefail

VERSION=v0.0.0-20261109003541-7506e5f91cd6
cache=${CAIRN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn}/seaweedfs/$VERSION
bin=$cache/weed

if [[ "${1:-}" == "--path" ]]; then
  [[ -x "$bin" ]] || exit 1
  echo "$bin"
  exit 0
fi
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "seaweedfs.sh: needs Go (the go command) to build weed" >&2; exit 1; }
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >go.mod <<EOF
module cairn.local/seaweedfs-build

go 1.25

require github.com/seaweedfs/seaweedfs $VERSION

replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
EOF
cat >tools.go <<'EOF'
//go:build tools

package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
EOF
echo "seaweedfs.sh: building weed $VERSION (first time only; ~20 min)" >&2
GOFLAGS=-mod=mod go mod tidy >&2
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/weed" github.com/seaweedfs/seaweedfs/weed >&2
"$work/weed" version >&2
mv "$work/weed" "$bin"
echo "$bin"
