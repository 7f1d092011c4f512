# Sourced by the scripts that build a test service from the Go module proxy (seaweedfs.sh, hydra.sh): the
# cache outside the repository, the `--path` query and an existing build answered at once, the go command
# found, and a build directory removed on exit.
#
#   go_cache_begin NAME VERSION BINARY [ARG]
#
# sets `bin` (the cached binary: ${CAIRN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn}/NAME/VERSION/BINARY)
# and `work` (a fresh build directory in the cache). With ARG `--path` it prints the binary's path and exits
# (1 when it is not built); when the binary is there it prints the path and exits 0. The caller builds into
# "$work", moves the result to "$bin" and prints "$bin".

go_cache_begin() {
  local name=$1 version=$2 binary=$3 arg=${4:-}
  local cache=${CAIRN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn}/$name/$version
  bin=$cache/$binary
  if [[ "$arg" == "--path" ]]; then
    [[ -x "$bin" ]] || exit 1
    echo "$bin"
    exit 0
  fi
  if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
  fi
  export PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null || { echo "$name: needs Go (the go command) to build $binary" >&2; exit 1; }
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/build.XXXXXX")
  # Module caches are read-only: make them writable so that they can go.
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  echo "$name: building $binary $version (first time only)" >&2
}
