"""`cairn serve --tls-cert --tls-key`: HTTPS with a certificate of a test CA (tls_ca.TestCa), driven by the
stock clients trusting that CA, by Python's ssl module for what a client may offer (protocol versions, ciphers,
ALPN), and by SIGHUP with a renewed certificate while a keep-alive connection stays open.
"""

from __future__ import annotations

import http.client as http_client
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from common import MiB, assert_same_file, http, sha256_file, write_random
from tls_ca import TestCa

SCOPE = "tls"


@pytest.fixture
def ca(tmp_path) -> TestCa:
    return TestCa(tmp_path / "ca")


def _serial(port: int, ca: TestCa) -> int:
    """The serial number of the certificate a new connection to `port` is given (verified against `ca`)."""
    ctx = ssl.create_default_context(cafile=str(ca.ca_pem))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            der = s.getpeercert(binary_form=True)
    r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der,
                       capture_output=True, timeout=30, check=True)
    return int(r.stdout.decode().strip().split("=", 1)[1], 16)


def _handshake(port: int, ctx: ssl.SSLContext) -> ssl.SSLSocket | None:
    """A handshake with `ctx` (certificate not checked); the socket, or None when the server refused."""
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        return ctx.wrap_socket(raw, server_hostname="localhost")
    except (ssl.SSLError, ConnectionResetError):
        raw.close()
        return None


# ------------------------------------------------------------------------------------------- stock clients


@pytest.mark.backends("sqlite", "s3")
def test_hf_xet_uploads_and_downloads_over_https(server, hfx, ca, tmp_path):
    srv = server(tls=ca.issue())
    assert srv.url.startswith("https://")
    tok = srv.token(SCOPE, write=True)
    files = [write_random(tmp_path / "big.bin", 70 * MiB, seed=1), write_random(tmp_path / "small.bin", 5000, seed=2)]
    env = ca.client_env()
    up = hfx.upload(srv.url, tok, files, env=env)
    meta = {f["path"]: f for f in up.result["files"]}
    out = tmp_path / "out"
    out.mkdir()
    hfx.download(srv.url, tok, [(meta[str(f)]["hash"], meta[str(f)]["size"], out / f.name) for f in files], env=env)
    for f in files:
        assert_same_file(out / f.name, f, sha256_file(f))
    # The transfer URLs the reconstructions handed out are HTTPS too (public URL https://...).
    assert srv.requests_count("GET", "transfer", status="206") + srv.requests_count("GET", "transfer", status="200") > 0, \
        srv.requests_table()

    # cairn's own client (libcurl, SSL_CERT_FILE) over HTTPS: a put, a get of what hf_xet uploaded.
    cli_env = {"PATH": "/usr/bin:/bin", "CAIRN_ENDPOINT": srv.url, "CAIRN_TOKEN": tok, **env}
    mine = write_random(tmp_path / "mine.bin", 3 * MiB + 1, seed=5)
    r = subprocess.run([srv.bin, "put", str(mine), "--json"], capture_output=True, text=True, env=cli_env, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([srv.bin, "get", meta[str(files[0])]["hash"], "-o", str(out / "cairn-get.bin")],
                       capture_output=True, text=True, env=cli_env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert_same_file(out / "cairn-get.bin", files[0], sha256_file(files[0]))

    # A client that does not trust the CA gets no answer at all (and the server logs the handshake at debug).
    bad = hfx.run("download", srv.url, tok, [meta[str(files[1])]["hash"], 5000, out / "untrusted.bin"],
                  env={"SSL_CERT_FILE": str(tmp_path / "nonexistent.pem")}, expect_ok=False)
    assert not bad.ok
    assert "certificate" in bad.error_text().lower() or "unknownissuer" in bad.error_text().lower(), bad.describe()


@pytest.mark.backends("sqlite")
def test_hf_cli_and_hub_js_over_https(server, hf_python, hubjs, ca, tmp_path):
    from hub_util import Hub

    srv = server(tls=ca.issue())
    hub = Hub(hf_python, tmp_path / "hub", srv, srv.token("alice", write=True))
    env = ca.client_env()
    src = write_random(tmp_path / "model.bin", 3 * MiB, seed=3)
    hub.cli("repos", "create", "secure", env=env)
    hub.cli("upload", "alice/secure", str(src), "model.bin", env=env)
    got = hub.cli("download", "alice/secure", "model.bin", "--local-dir", str(tmp_path / "dl"), env=env)
    assert_same_file(tmp_path / "dl" / "model.bin", src, sha256_file(src)), got.stdout

    # @huggingface/hub (Node's fetch, NODE_EXTRA_CA_CERTS): a CAS upload and a download of what hf uploaded.
    tok = srv.token(SCOPE, write=True)
    js_src = write_random(tmp_path / "js.bin", 2 * MiB, seed=4)
    up = hubjs.run("upload", ["--cas", srv.url, "--token", tok, js_src], env=env)
    meta = {f["path"]: f for f in up.result["files"]}[str(js_src)]
    out = tmp_path / "js-out.bin"
    hubjs.run("download", ["--cas", srv.url, "--token", tok, "--hash", meta["xetHash"], "--size", meta["size"],
                           "--out", out], env=env)
    assert_same_file(out, js_src, sha256_file(js_src))


# ------------------------------------------------------------------------------------------- what is offered


@pytest.mark.backends("sqlite")
def test_only_modern_protocols_and_ciphers_are_accepted(server, ca):
    srv = server(tls=ca.issue())

    # TLS 1.3 and TLS 1.2 with a forward-secret AEAD cipher: accepted, HTTP/1.1 chosen by ALPN.
    for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ctx.maximum_version = version
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        s = _handshake(srv.port, ctx)
        assert s is not None, f"{version.name} refused\n{srv.log()}"
        assert s.version() == {"TLSv1_3": "TLSv1.3", "TLSv1_2": "TLSv1.2"}[version.name]
        assert s.selected_alpn_protocol() == "http/1.1"
        if version == ssl.TLSVersion.TLSv1_2:
            name, _, _ = s.cipher()
            assert name.startswith("ECDHE-") and ("GCM" in name or "CHACHA20" in name), name
        s.close()

    # Old protocol versions are refused (the client's OpenSSL may not even offer them at its security level:
    # either way no session is made).
    for version in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            ctx.set_ciphers("ALL:@SECLEVEL=0")
            ctx.minimum_version = ctx.maximum_version = version
        except (ValueError, ssl.SSLError):
            continue
        s = _handshake(srv.port, ctx)
        assert s is None, f"{version.name} accepted: {s.version()} {s.cipher()}"

    # TLS 1.2 with weak or non-forward-secret ciphers only: refused.
    for ciphers in ("AES128-SHA:AES256-SHA:AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES128-SHA",
                    "DES-CBC3-SHA", "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.set_ciphers(ciphers + ":@SECLEVEL=0")
        except ssl.SSLError:
            continue  # this OpenSSL has none of them at all
        s = _handshake(srv.port, ctx)
        assert s is None, f"{ciphers}: accepted {s.cipher()}"

    # Plain HTTP sent to the HTTPS port: the connection is closed, the server carries on.
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        raw.settimeout(10)
        try:
            data = raw.recv(4096)
        except ConnectionResetError:
            data = b""
        assert b"HTTP/1.1 200" not in data
    assert http("GET", f"{srv.url}/healthz").status == 200


# ------------------------------------------------------------------------------------------- reload


@pytest.mark.backends("sqlite")
def test_sighup_reloads_the_certificate_without_dropping_connections(server, ca, tmp_path):
    cert, key = ca.issue("first")
    live_cert, live_key = tmp_path / "live.pem", tmp_path / "live.key"
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    srv = server(tls=(live_cert, live_key))
    first = _serial(srv.port, ca)

    # A keep-alive connection, open across the reload.
    conn = http_client.HTTPSConnection("127.0.0.1", srv.port, timeout=30,
                                       context=ssl.create_default_context(cafile=str(ca.ca_pem)))
    conn.request("GET", "/healthz")
    r = conn.getresponse()
    assert r.status == 200 and r.read()
    sock_before = conn.sock

    # Renewed in place (a new key too), then SIGHUP: new connections get it.
    cert2, key2 = ca.issue("second")
    shutil.copy(cert2, live_cert)
    shutil.copy(key2, live_key)
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while _serial(srv.port, ca) == first and time.monotonic() < deadline:
        time.sleep(0.05)
    second = _serial(srv.port, ca)
    assert second != first, srv.log()
    assert "reloaded the TLS certificate" in srv.log()

    # The open connection was not dropped: the next request goes over the same socket.
    conn.request("GET", "/healthz")
    r = conn.getresponse()
    assert r.status == 200 and r.read()
    assert conn.sock is sock_before

    # A broken renewal (a key that does not match): the server says so and keeps the certificate it has.
    cert3, _ = ca.issue("third")
    shutil.copy(cert3, live_cert)
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "keeping the current certificate" not in srv.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "keeping the current certificate" in srv.log()
    assert "does not match" in srv.log()
    assert _serial(srv.port, ca) == second
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    conn.close()


@pytest.mark.backends("sqlite")
def test_bad_tls_settings_stop_the_server_with_a_clear_error(cairn_bin, ca, tmp_path):
    cert, key = ca.issue()
    other_cert, _ = ca.issue("other")
    cases = [
        (["--tls-cert", str(cert)], "needs both tls_cert and tls_key"),
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(key)], "cannot load the certificate chain"),
        (["--tls-cert", str(cert), "--tls-key", str(tmp_path / "missing.key")], "cannot read the private key"),
        (["--tls-cert", str(other_cert), "--tls-key", str(key)], "does not match the certificate"),
        (["--tls-cert", str(cert), "--tls-key", str(cert)], "cannot load the private key"),
    ]
    for args, message in cases:
        r = subprocess.run([cairn_bin, "serve", "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data"), *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0, (args, r.stdout, r.stderr)
        assert message in r.stderr, (args, r.stderr)
