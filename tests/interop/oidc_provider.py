"""A real OpenID Connect provider for the trusted-publisher and company sign-in tests: Ory Hydra (scripts/hydra.sh
builds it once from the Go module proxy), in memory, on loopback ports of its own. `id_token(claims)` runs a real
authorization code flow through it — the authorization request, Hydra's login and consent challenges accepted
through its admin API (what a CI provider's own sign-in would do), the code exchanged at its token endpoint — and
returns the id token Hydra signed, with `claims` among its own (a CI job's repository and branch, say).

For people signing in through a browser, Hydra sends the browser to a login page and a consent page of the
company's: here a small HTTP server (`_CompanyPages`) that accepts whoever `sign_in_as(subject, claims)` named
last, through the same admin API, and sends the browser on to where Hydra says; `client(redirect_uri)`
registers a relying party (cairn) with Hydra."""

from __future__ import annotations

import http.cookiejar
import http.server
import json
import os
import secrets
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

from common import fail, free_port, tail

REPO = Path(__file__).resolve().parents[2]


def hydra_bin() -> str:
    """The Hydra binary scripts/hydra.sh built (make test's bootstrap builds it); a failure when it is missing."""
    if os.environ.get("CAIRN_HYDRA_BIN"):
        return os.environ["CAIRN_HYDRA_BIN"]
    out = subprocess.run([str(REPO / "scripts" / "hydra.sh"), "--path"], capture_output=True, text=True)
    if out.returncode != 0:
        fail("no Hydra binary: run scripts/hydra.sh (make test's bootstrap does)")
    return out.stdout.strip()


class OidcProvider:
    """One Hydra process. `issuer` is its URL (what id tokens name in `iss`), `client_id` the OAuth client the
    id tokens are for (their `aud`)."""

    def __init__(self, work: Path) -> None:
        self.public_port = free_port()
        self.admin_port = free_port()
        self.issuer = f"http://127.0.0.1:{self.public_port}"
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        self.log_path = work / "hydra.log"
        self.redirect_uri = "http://127.0.0.1:9/callback"  # never reached: the code is read from the redirect
        self.pages = _CompanyPages(self)
        env = dict(os.environ,
                   DSN="memory",
                   SECRETS_SYSTEM=secrets.token_hex(32),
                   URLS_SELF_ISSUER=self.issuer,
                   URLS_LOGIN=f"{self.pages.url}/login",
                   URLS_CONSENT=f"{self.pages.url}/consent",
                   SERVE_PUBLIC_HOST="127.0.0.1",
                   SERVE_PUBLIC_PORT=str(self.public_port),
                   SERVE_ADMIN_HOST="127.0.0.1",
                   SERVE_ADMIN_PORT=str(self.admin_port),
                   LOG_LEVEL="warn")
        self._log = open(self.log_path, "wb")
        # --dev: plain HTTP on loopback (Hydra insists on HTTPS otherwise).
        self.proc = subprocess.Popen([hydra_bin(), "serve", "all", "--dev"], env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        self._wait_ready()
        client = self._admin("POST", "/admin/clients", json_body={
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "scope": "openid",
            "redirect_uris": [self.redirect_uri],
            "token_endpoint_auth_method": "client_secret_post",
        })
        self.client_id = client["client_id"]
        self._client_secret = client["client_secret"]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail(f"hydra exited ({self.proc.returncode}):\n{tail(self.log_path.read_text(errors='replace'))}")
            if _send(_Browser(), "GET", f"{self.admin}/health/ready")[0] == 200 and \
                    _send(_Browser(), "GET", f"{self.issuer}/health/ready")[0] == 200:
                return
            time.sleep(0.2)
        fail(f"hydra did not become ready:\n{tail(self.log_path.read_text(errors='replace'))}")

    def _admin(self, method: str, path: str, params: dict | None = None, json_body: dict | None = None) -> dict:
        url = f"{self.admin}{path}" + (f"?{urlencode(params)}" if params else "")
        status, _, body = _send(_Browser(), method, url, json_body=json_body)
        if status >= 300:
            fail(f"hydra admin {method} {path}: {status} {body[:500]!r}")
        return json.loads(body)

    def id_token(self, claims: dict, subject: str = "ci-job") -> str:
        """An id token for this provider's client, through the authorization code flow."""
        browser = _Browser()  # keeps Hydra's CSRF cookies between the redirects, as a browser would
        state, nonce = secrets.token_hex(16), secrets.token_hex(16)
        r = _send(browser, "GET", f"{self.issuer}/oauth2/auth?" + urlencode({
            "client_id": self.client_id, "response_type": "code", "scope": "openid",
            "redirect_uri": self.redirect_uri, "state": state, "nonce": nonce}))
        challenge = _query(r, "login_challenge")
        accepted = self._admin("PUT", "/admin/oauth2/auth/requests/login/accept",
                               params={"login_challenge": challenge}, json_body={"subject": subject})
        challenge = _query(_send(browser, "GET", accepted["redirect_to"]), "consent_challenge")
        accepted = self._admin("PUT", "/admin/oauth2/auth/requests/consent/accept",
                               params={"consent_challenge": challenge},
                               json_body={"grant_scope": ["openid"], "session": {"id_token": claims}})
        r = _send(browser, "GET", accepted["redirect_to"])
        if _query(r, "state") != state:
            fail("hydra's redirect carried another state")
        status, _, body = _send(_Browser(), "POST", f"{self.issuer}/oauth2/token", form={
            "grant_type": "authorization_code", "code": _query(r, "code"), "redirect_uri": self.redirect_uri,
            "client_id": self.client_id, "client_secret": self._client_secret})
        if status != 200:
            fail(f"hydra token endpoint: {status} {body[:500]!r}")
        return json.loads(body)["id_token"]

    def client(self, redirect_uri: str) -> tuple[str, str]:
        """A confidential client of this provider (client_secret_basic) that may send people back to
        `redirect_uri`: its id and secret."""
        client = self._admin("POST", "/admin/clients", json_body={
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "scope": "openid profile email",
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "client_secret_basic",
        })
        return client["client_id"], client["client_secret"]

    def sign_in_as(self, subject: str | None, claims: dict | None = None) -> None:
        """Who the company's login page signs in next (None: it refuses everybody), with these claims in the id
        token (preferred_username, groups, ...)."""
        self.pages.subject, self.pages.claims = subject, dict(claims or {})

    def stop(self) -> None:
        self.pages.stop()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


class _CompanyPages:
    """The company's login and consent pages Hydra sends a browser to: each accepts (or, with no subject set,
    rejects) its challenge through Hydra's admin API and redirects the browser where Hydra says next."""

    def __init__(self, provider: OidcProvider) -> None:
        self.provider = provider
        self.subject: str | None = None
        self.claims: dict = {}
        self.logins = 0
        pages = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                query = parse_qs(urlparse(self.path).query)
                try:
                    to = pages.answer(urlparse(self.path).path, query)
                except Exception as e:  # the test reads the failure from the page
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(str(e).encode())
                    return
                self.send_response(302)
                self.send_header("Location", to)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, path: str, query: dict) -> str:
        p = self.provider
        if path == "/login":
            challenge = query["login_challenge"][0]
            if self.subject is None:
                return p._admin("PUT", "/admin/oauth2/auth/requests/login/reject",
                                params={"login_challenge": challenge},
                                json_body={"error": "access_denied", "error_description": "not signed in"})["redirect_to"]
            self.logins += 1
            return p._admin("PUT", "/admin/oauth2/auth/requests/login/accept",
                            params={"login_challenge": challenge},
                            json_body={"subject": self.subject, "remember": False})["redirect_to"]
        if path == "/consent":
            challenge = query["consent_challenge"][0]
            asked = p._admin("GET", "/admin/oauth2/auth/requests/consent", params={"consent_challenge": challenge})
            return p._admin("PUT", "/admin/oauth2/auth/requests/consent/accept",
                            params={"consent_challenge": challenge},
                            json_body={"grant_scope": asked.get("requested_scope", ["openid"]), "remember": False,
                                       "session": {"id_token": self.claims}})["redirect_to"]
        raise ValueError(f"no page at {path}")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _Browser() -> urllib.request.OpenerDirector:
    """An HTTP client that keeps cookies, follows no redirect and uses no proxy."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects(),
                                       urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))


def _send(browser, method: str, url: str, json_body: dict | None = None,
          form: dict | None = None) -> tuple[int, dict, bytes]:
    """(status, lower-cased headers, body); (0, {}, b"") when nothing answered."""
    data, headers = None, {}
    if json_body is not None:
        data, headers = json.dumps(json_body).encode(), {"Content-Type": "application/json"}
    elif form is not None:
        data, headers = urlencode(form).encode(), {"Content-Type": "application/x-www-form-urlencoded"}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with browser.open(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
    except (urllib.error.URLError, ConnectionError):
        return 0, {}, b""


def _query(r: tuple[int, dict, bytes], name: str) -> str:
    """A parameter of the redirect `r` answered with."""
    status, headers, body = r
    if status not in (302, 303) or "location" not in headers:
        fail(f"expected a redirect carrying {name}, got {status}: {body[:500]!r}")
    values = parse_qs(urlparse(headers["location"]).query).get(name)
    if not values:
        fail(f"the redirect to {headers['location']} carries no {name}")
    return values[0]
