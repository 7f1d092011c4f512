#!/usr/bin/env bash
# Runs a command with the repository cut off from its surroundings, so that anything the build, the tests or
# the benchmarks read from outside the repository fails instead of quietly working on one machine:
#
#   scripts/isolated.sh COMMAND [ARG...]
#
# 1. Tracked files (documentation aside) must not name places outside the repository that a clone does not
#    have (a `shared` folder beside it, a developer's notes under /work/...).
# 2. COMMAND runs in a private mount namespace in which the repository's parent directory holds nothing but
#    the repository (an empty tmpfs with the repository bound back in at the same path, so absolute paths in
#    the build tree stay valid). System directories, /tmp and $HOME stay as they are: the tests' own temporary
#    files and the installed toolchain are not the repository's to carry.
#
# Needs root (or unprivileged user namespaces) for step 2; `make test` runs as root in CI. Where the namespace
# cannot be made, the command fails unless CAIRN_ALLOW_UNISOLATED=1 says to run it unisolated with a warning.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$repo"

if [[ "${CAIRN_ISOLATED:-}" == "$repo" ]]; then exec "$@"; fi  # already inside

# --- 1. what the tracked files name
pattern='\.\./shared|CAIRN_SHARED_DIR|/work/(shared|notes|main)'
if git grep -nIE "$pattern" -- . ':!*.md' ':!scripts/isolated.sh' >/tmp/cairn-outside-refs.$$ 2>/dev/null; then
  echo "isolated.sh: tracked files refer to places outside the repository (a clone has none of them):" >&2
  cat /tmp/cairn-outside-refs.$$ >&2
  rm -f /tmp/cairn-outside-refs.$$
  exit 1
fi
rm -f /tmp/cairn-outside-refs.$$

# --- 2. run cut off from the repository's siblings
parent=$(dirname "$repo")
name=$(basename "$repo")
if [[ "$parent" == "/" ]]; then
  echo "isolated.sh: the repository sits at the file system root; nothing beside it to hide" >&2
  CAIRN_ISOLATED="$repo" exec "$@"
fi
hold=$(mktemp -d -p /dev/shm cairn-isolated.XXXXXX 2>/dev/null || mktemp -d)
trap 'rmdir "$hold" 2>/dev/null || true' EXIT
# shellcheck disable=SC2016  # expanded by the inner shell
inner='set -e
mount --bind "$1" "$2"
mount -t tmpfs -o mode=0755 cairn-isolated "$3"
mkdir "$3/$4"
mount --bind "$2" "$3/$4"
umount -l "$2"
cd "$1"
shift 4
exec "$@"'
export CAIRN_ISOLATED="$repo"
if unshare --mount --propagation private true 2>/dev/null; then
  unshare --mount --propagation private bash -c "$inner" isolated "$repo" "$hold" "$parent" "$name" "$@"
elif unshare --user --map-root-user --mount --propagation private true 2>/dev/null; then
  unshare --user --map-root-user --mount --propagation private bash -c "$inner" isolated "$repo" "$hold" \
    "$parent" "$name" "$@"
elif [[ "${CAIRN_ALLOW_UNISOLATED:-}" == 1 ]]; then
  echo "isolated.sh: WARNING: cannot make a mount namespace here; running unisolated" >&2
  "$@"
else
  echo "isolated.sh: cannot make a mount namespace (needs root or user namespaces); set" \
    "CAIRN_ALLOW_UNISOLATED=1 to run without this check" >&2
  exit 1
fi
