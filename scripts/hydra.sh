#!/usr/bin/env bash
# Builds Ory Hydra (the OpenID Connect provider the trusted-publisher tests run against) from the Go module proxy
# at a pinned version, once, into a cache outside the repository, and prints the binary's path.
#
#   scripts/hydra.sh            build if missing, print the path
#   scripts/hydra.sh --path     print the path only (exit 1 when it is not built)
#
# Cache: ${CAIRN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn}/hydra/<version>/hydra.
#
# Hydra's go.mod replaces its API client with a folder of its own source tree (a nested module, which the
# proxy's copy of Hydra leaves out), so neither `go install` nor a tools module can build it: the module's source
# is downloaded from the proxy and built as itself (its go.mod and go.sum: every dependency the version Hydra
# pins), with the API client the published one Hydra requires. The SQLite driver (cgo) serves `DSN=memory`.
set -euo pipefail

VERSION=v2.3.0
# shellcheck source=go_cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/go_cache.sh"
go_cache_begin hydra "$VERSION" hydra "${1:-}"
src=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/ory/hydra/v2@$VERSION" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -n "$src" && -f "$src/go.mod" ]] || { echo "hydra.sh: the module source did not download" >&2; exit 1; }
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
go mod edit -dropreplace github.com/ory/hydra-client-go/v2
GOFLAGS=-mod=mod CGO_ENABLED=1 go build -trimpath -ldflags='-s -w' -tags sqlite,sqlite_omit_load_extension \
  -o "$work/hydra" . >&2
"$work/hydra" version >&2
mv "$work/hydra" "$bin"
echo "$bin"
