"""Signing-key rotation on a live server (SQLite, and PostgreSQL where the keys live in the shared index):
tokens, transfer URLs and download links made before a rotation keep working after it, new ones name the new
key, a retired key's stop working once the node refreshes (periodically, or at once on SIGHUP), and an
unknown key id is refused. Also the self-test of SecretWatch, the check that no secret reaches a log."""

from __future__ import annotations

import base64
import json
import signal
import time

import pytest

from clients import upload_random_files
from common import KiB, http
from servers import SecretWatch

SCOPE = "keys"
KEYED = pytest.mark.backends("sqlite", "postgres")


def _header(token: str) -> dict:
    b64 = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)))


def _with_kid(token: str, kid: str) -> str:
    """The token with its header's kid replaced (its signature no longer matters: the kid is refused first)."""
    header = {**_header(token), "kid": kid}
    b64 = base64.urlsafe_b64encode(json.dumps(header, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return ".".join([b64, *token.split(".")[1:]])


def _eventually(check, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def _transfer_url(srv, token: str, file_hash: str) -> str:
    r = srv.get(f"/v1/reconstructions/{file_hash}", token=token)
    assert r.status == 200, r
    return next(iter(r.json()["fetch_info"].values()))[0]["url"]


@KEYED
def test_rotation_keeps_live_tokens_and_urls_until_retired(server, hfx, tmp_path):
    srv = server(env={"CAIRN_KEY_REFRESH": "1"})  # keys re-read every second; a new key signs after 2 s
    before = srv.token(SCOPE, write=True)
    assert "kid" not in _header(before)  # the legacy key signs as cairn always did
    meta, paths = upload_random_files(hfx, srv, SCOPE, tmp_path, {"a.bin": (300 * KiB, 7)})
    file = meta["a.bin"]
    url_before = _transfer_url(srv, before, file["hash"])
    assert "&k=" not in url_before
    def link() -> str:
        return srv.cli("link", file["hash"], "--scope", SCOPE, "--ttl", "1h", "--public-url", srv.url,
                       secret_output=True).stdout.strip()

    link_before = link()

    jwt_id = srv.cli("keys", "rotate", "--kind", "jwt").stdout.strip()
    url_id = srv.cli("keys", "rotate", "--kind", "url", "--id", "url-2").stdout.strip()
    assert url_id == "url-2"
    listed = srv.cli("keys", "list").stdout
    assert jwt_id in listed and "pending" in listed, listed

    # Once due, new tokens name the new key, and the node (which re-read the keys meanwhile) takes them.
    _eventually(lambda: _header(srv.token(SCOPE)).get("kid") == jwt_id, "tokens signed with the new key")
    after = srv.token(SCOPE, write=True)
    for tok in (before, after):
        assert srv.get("/v1/files", token=tok).status == 200
    _eventually(lambda: f"&k={url_id}&s=" in _transfer_url(srv, after, file["hash"]), "URLs signed with url-2")
    url_after = _transfer_url(srv, after, file["hash"])
    link_after = link()
    assert f"&k={url_id}&s=" in link_after
    for url in (url_before, url_after, link_before, link_after):
        assert http("GET", url).status in (200, 206), url
    out = tmp_path / "after.bin"
    hfx.download(srv.url, after, [(file["hash"], file["size"], out)])  # the stock client, new keys throughout
    assert out.read_bytes() == paths["a.bin"].read_bytes()

    # A kid the server does not have: 401.
    assert srv.get("/v1/files", token=_with_kid(after, "no-such-key")).status == 401

    # Retiring the legacy keys: SIGHUP makes the node re-read them at once.
    srv.cli("keys", "retire", "--kind", "jwt", "legacy")
    srv.cli("keys", "retire", "--kind", "url", "legacy")
    srv.proc.send_signal(signal.SIGHUP)
    _eventually(lambda: srv.get("/v1/files", token=before).status == 401, "the retired key's token refused", 3)
    assert srv.get("/v1/files", token=after).status == 200
    assert http("GET", url_before).status == 403
    assert http("GET", link_before).status in (401, 403, 404)
    assert http("GET", url_after).status in (200, 206)
    assert http("GET", link_after).status == 200
    # The last key of a kind stays.
    refused = srv.cli("keys", "retire", "--kind", "jwt", jwt_id, expect_ok=False)
    assert refused.returncode != 0 and "only one" in refused.stderr, refused.stderr
    # A restarted node starts with the keys as they are now (no legacy key is made again).
    srv.restart()
    assert srv.get("/v1/files", token=before).status == 401
    assert srv.get("/v1/files", token=after).status == 200
    listed = srv.cli("keys", "list").stdout
    assert "legacy" not in listed and jwt_id in listed and url_id in listed, listed


def test_secret_watch_finds_what_leaks(tmp_path):
    """The leak check can fail: each kind of secret, written into a log, is found, and a clean log passes."""
    token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzY29wZSI6InMiLCJwZXJtIjoicmVhZCJ9.c2lnbmF0dXJlc2lnbmF0dXJl"
    watch = SecretWatch()
    watch.add_secret("a token", token)
    watch.add_secret("signing key jwt", "a" * 64)
    watch.add_env({"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG", "CAIRN_INDEX": "postgres://u:hunter2pw@db/x",
                   "CAIRN_URL_KEYS": "k1:" + "u" * 40})
    clean = tmp_path / "clean.log"
    clean.write_text("[info] request id=1 method=GET path=/v1/files status=200\n"
                     "[info] index postgres://u:***@db/x\n"
                     '[info] request id=2 status=401 error="invalid token: signed with an unknown or retired key"\n')
    assert watch.leaks([clean], []) == []
    lines = [f"Authorization: Bearer {token}", "key " + "a" * 64, "s3 wJalrXUtnFEMI/K7MDENG", "db hunter2pw",
             "k " + "u" * 40, "GET /v1/transfer/ab?r=0-9&x=1&s=" + "0f" * 16,
             "https://s3/b/k?X-Amz-Signature=" + "ab" * 32, "postgres://cairn:pw1234567@host/db",
             "a fresh eyJhbGciOiJIUzI1NiJ9.eyJzY29wZSI6Im90aGVyIn0.AAAAAAAAAAAAAAAAAAAAAA"]
    for line in lines:
        leaky = tmp_path / "leaky.log"
        leaky.write_text(f"[info] fine\n[error] {line}\n")
        assert watch.leaks([leaky], []), f"not found: {line}"
    assert watch.leaks([], [("stderr", "oops " + token)])
