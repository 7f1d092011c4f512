#!/usr/bin/env bash
# Installs everything cairn needs to build and test on Debian 12. Idempotent: a second run changes nothing.
#   scripts/bootstrap.sh          system packages + test tools (venv, npm)
#   scripts/bootstrap.sh --build  system packages only (enough for `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  clang-format clang-tidy clang-14 libclang-rt-14-dev
  librust-blake3-dev liblz4-dev zlib1g-dev libssl-dev libsqlite3-dev libjwt-dev libpq-dev postgresql-15 libcurl4-openssl-dev
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcmark-gfm-dev libcmark-gfm-extensions-dev libsodium-dev libkainjow-mustache-dev
  python3 python3-venv curl openssl faketime git-lfs lighttpd chromium chromium-driver
)

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js: machines of this kind ship NodeSource's nodejs (npm bundled, conflicting with Debian's npm); use
# whatever provides the commands, and fall back to Debian's packages only when they are absent.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)

if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[[ "${1:-}" == "--build" ]] && exit 0

# Python: the stock hf_xet client and pytest, pinned, in the project's own venv; and older huggingface_hub
# releases (tests/requirements-hub-*.txt), each in a venv of its own (.venv-hub-*), for the LFS tests.
venv() {  # venv DIR REQUIREMENTS
  local hash
  hash=$(sha256sum "$2" | cut -d' ' -f1)
  if [[ "$(cat "$1/.requirements" 2>/dev/null)" != "$hash" ]]; then
    [[ -x "$1/bin/python" ]] || python3 -m venv "$1"
    "$1/bin/pip" install -q --disable-pip-version-check -r "$2"
    echo "$hash" >"$1/.requirements"
  fi
}
venv .venv tests/requirements.txt
for req in tests/requirements-hub-*.txt; do
  release=${req#tests/requirements-hub-}
  venv ".venv-hub-${release%.txt}" "$req"
done

# Node: the stock @huggingface packages, pinned by package-lock.json.
if [[ ! -d tests/oracle/node_modules ]] || [[ tests/oracle/package-lock.json -nt tests/oracle/node_modules ]]; then
  (cd tests/oracle && npm ci --no-audit --no-fund --loglevel=error && touch node_modules)
fi

# SeaweedFS, the S3-compatible store the tests run against: built once from the Go module proxy into a cache
# outside the repository (~7-20 min the first time; nothing afterwards).
scripts/seaweedfs.sh >/dev/null

# Ory Hydra, the OpenID Connect provider the trusted-publisher tests sign id tokens with: built once the same way.
scripts/hydra.sh >/dev/null
