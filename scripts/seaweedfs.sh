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
# shellcheck source=go_cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/go_cache.sh"
go_cache_begin seaweedfs "$VERSION" weed "${1:-}"
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
GOFLAGS=-mod=mod go mod tidy >&2
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/weed" github.com/seaweedfs/seaweedfs/weed >&2
"$work/weed" version >&2
mv "$work/weed" "$bin"
echo "$bin"
