#!/usr/bin/env bash
# `make run`: start cairn with its embedded defaults (127.0.0.1:8080, ./cairn-data), print a development token,
# and keep the server in the foreground (Ctrl-C stops it cleanly).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/release/src/cli/cairn
DATA=${CAIRN_DATA_DIR:-./cairn-data}
"$BIN" serve --data "$DATA" "$@" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid' INT TERM
url="http://127.0.0.1:8080"
for _ in $(seq 1 100); do
  curl -fsS "$url/healthz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { wait $pid; exit 1; }
  sleep 0.1
done
token=$("$BIN" token --data "$DATA" --scope dev --write --ttl 7d | tail -n 1)
cat <<MSG

cairn is running at $url (data in $DATA). A development token (scope "dev", write, 7 days):

  $token

Upload and download with hf_xet (pip install hf_xet==1.8.0):

  python3 - <<'PY'
  import time, hf_xet
  s = hf_xet.XetSession()
  with s.new_upload_commit(endpoint="$url", token="$token", token_expiry_unix_secs=int(time.time()) + 3600) as c:
      h = c.start_upload_file("/etc/os-release")
  info = h.result().xet_info
  with s.new_file_download_group(endpoint="$url", token="$token", token_expiry_unix_secs=int(time.time()) + 3600) as g:
      g.start_download_file(hf_xet.XetFileInfo(info.hash, info.file_size), "/tmp/os-release.copy")
  print(info.hash, info.file_size)
  PY

Or with huggingface_hub and its hf CLI (pip install huggingface_hub==2.4.0), as on the Hub: the token's scope
"dev" is the namespace your repositories go in (docs/hub.md):

  export HF_ENDPOINT=$url HF_TOKEN=$token
  hf repos create my-model
  hf upload dev/my-model ./a-folder .
  hf download dev/my-model --local-dir ./a-copy

MSG
wait $pid
