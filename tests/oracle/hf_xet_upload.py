"""Upload files with the stock hf_xet client (XetSession API) and print what it reports.

Usage: python hf_xet_upload.py ENDPOINT FILE...
Prints one JSON array: [{"path", "hash", "size", "sha256"}, ...] in argument order.
Configuration comes from the environment (HF_XET_*), read when XetConfig() is built,
so run one process per configuration.
"""

import json
import os
import sys

import hf_xet


def main() -> None:
    endpoint, files = sys.argv[1], sys.argv[2:]
    session = hf_xet.XetSession(hf_xet.XetConfig())
    with session.new_upload_commit(endpoint=endpoint) as commit:
        handles = [commit.start_upload_file(os.path.abspath(f)) for f in files]
    out = []
    for path, handle in zip(files, handles):
        info = handle.result().xet_info
        out.append({"path": path, "hash": info.hash, "size": info.file_size, "sha256": info.sha256})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
