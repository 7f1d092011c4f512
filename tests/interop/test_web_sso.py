"""Company sign-in through the pages (OpenID Connect) in a real browser: headless Chromium signs in at a real
provider (Ory Hydra, oidc_provider.py, whose login page accepts the person the test names) and comes back to
`cairn serve` signed in. A private repository that was a 404 appears, signing out hides it again; the person's
groups give their organization roles; a name taken locally is never handed to the provider's person; an answer
that is not to this browser's attempt signs nobody in; a disabled user's session ends and they sign in no more.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from browser import screenshot
from common import free_port, http
from hub_util import Hub
from oidc_provider import OidcProvider
from servers import WATCH
from test_web import browser, page_text, session_cookie, sign_out, wait_for  # noqa: F401 (browser: the fixture)


@pytest.fixture(scope="module")
def oidc(tmp_path_factory):
    provider = OidcProvider(tmp_path_factory.mktemp("hydra-pages"))
    yield provider
    provider.stop()


def sso_server(server, oidc: OidcProvider):
    """A cairn whose pages sign people in at `oidc`, members of its group ml-team reading acme."""
    port = free_port()
    client_id, secret = oidc.client(f"http://127.0.0.1:{port}/login/oidc/callback")
    WATCH.add_secret("cairn's client secret at the provider", secret)
    return server(port=port, env={"CAIRN_OIDC_ISSUER": oidc.issuer, "CAIRN_OIDC_CLIENT_ID": client_id,
                                  "CAIRN_OIDC_CLIENT_SECRET": secret, "CAIRN_OIDC_NAME": "Example SSO",
                                  "CAIRN_OIDC_GROUPS_CLAIM": "groups", "CAIRN_OIDC_GROUPS": "ml-team=acme:read",
                                  "CAIRN_PEOPLE_REFRESH": "1"})


class _Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def first_answer(url: str, headers: dict | None = None) -> tuple[int, dict]:
    """The status and headers `url` answers with, its redirect not followed."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _Stay())
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}


def sso_sign_in(browser, url: str, next_path: str = "/") -> None:
    """Signs in through the sign-in page's company button; back on cairn (or on its error) when it returns."""
    browser.get(f"{url}/login?next={next_path}")
    browser.find_element("link text", "Sign in with Example SSO").click()
    wait_for(lambda: browser.current_url.startswith(url) and "/login/oidc" not in browser.current_url
             and browser.execute_script("return document.readyState") == "complete"
             or bool(browser.find_elements("css selector", ".error")), timeout=30)


@pytest.mark.backends("sqlite", "postgres")
def test_company_sign_in_shows_private_repositories_and_gives_the_groups_roles(server, hub_py, tmp_path, browser,
                                                                                oidc):
    srv = sso_server(server, oidc)
    srv.cli("org", "create", "acme")
    acme = Hub(hub_py, tmp_path / "acme", srv, srv.token("acme", write=True))
    acme.run("api.create_repo('acme/secret', private=True)\n"
             "api.upload_file(path_or_fileobj=b'for acme only', path_in_repo='s.txt', repo_id='acme/secret')")
    browser.delete_all_cookies()
    browser.get(srv.url + "/acme/secret")
    assert "404" in browser.title

    # Grace, in group ml-team at the provider: a user made for her, acme's reader, the repository shown.
    oidc.sign_in_as("u-grace", {"preferred_username": "grace@example.com", "name": "Grace H",
                                "groups": ["ml-team", "other"]})
    browser.get(srv.url + "/login")
    screenshot(browser, "sign-in-with-sso")
    sso_sign_in(browser, srv.url, "/acme/secret")
    assert browser.current_url == srv.url + "/acme/secret", browser.page_source[:2000]
    cookie = session_cookie(browser)
    WATCH.add_secret("grace's session", cookie)
    assert "acme / secret" in page_text(browser, srv.url + "/acme/secret", "sso-private-repository")
    shown = srv.cli("user", "show", "grace", "--json").stdout.splitlines()
    assert json.loads(shown[0])["fullname"] == "Grace H"
    assert {"name": "acme", "role": "read"}.items() <= json.loads(shown[1]).items()
    linked = srv.cli("user", "link", "grace").stdout
    assert oidc.issuer in linked and "u-grace" in linked

    # Signing out ends the session; the cookie replayed opens nothing.
    sign_out(browser)
    assert http("GET", srv.url + "/acme/secret", headers={"Cookie": f"cairn_session={cookie}"}).status == 404

    # Out of the group at the provider: out of acme at the next sign-in, the repository a 404 again.
    oidc.sign_in_as("u-grace", {"preferred_username": "grace", "groups": ["other"]})
    sso_sign_in(browser, srv.url, "/acme/secret")
    assert "404" in browser.title
    assert "acme" not in srv.cli("user", "show", "grace").stdout.split("\n", 1)[1]

    # Disabled: her session ends, and the provider's word no longer signs her in.
    cookie = session_cookie(browser)
    WATCH.add_secret("grace's second session", cookie)
    srv.cli("user", "disable", "grace")
    deadline = time.monotonic() + 10
    while first_answer(srv.url + "/settings/tokens", {"Cookie": f"cairn_session={cookie}"})[0] == 200:
        assert time.monotonic() < deadline, "a disabled user's session still works"
        time.sleep(0.2)
    browser.delete_all_cookies()
    sso_sign_in(browser, srv.url)
    assert "disabled" in browser.find_element("css selector", ".error").text
    assert "cairn_session" not in {c["name"] for c in browser.get_cookies()}
    events = [json.loads(line)["action"] for line in srv.cli("audit", "--json").stdout.splitlines() if line.strip()]
    assert "identity.link" in events and "member.set" in events and "member.remove" in events


@pytest.mark.backends("sqlite")
def test_a_local_name_is_never_handed_over_and_forged_answers_sign_nobody_in(server, browser, oidc):
    srv = sso_server(server, oidc)
    srv.cli("user", "create", "alice", "--operator")
    browser.delete_all_cookies()

    # The provider calls someone "alice": refused, not signed in as the local operator alice.
    oidc.sign_in_as("u-mallory", {"preferred_username": "alice"})
    sso_sign_in(browser, srv.url)
    assert "taken" in browser.find_element("css selector", ".error").text
    screenshot(browser, "sign-in-sso-refused")
    assert "cairn_session" not in {c["name"] for c in browser.get_cookies()}
    # Once an operator links the provider's alice to the local one, she signs in as herself.
    srv.cli("user", "link", "alice", "--issuer", oidc.issuer, "--subject", "u-alice")
    oidc.sign_in_as("u-alice", {"preferred_username": "someone-else"})
    sso_sign_in(browser, srv.url)
    assert "alice" in browser.find_element("tag name", "nav").text
    browser.delete_all_cookies()

    # The provider refusing: an error, nobody signed in.
    oidc.sign_in_as(None)
    sso_sign_in(browser, srv.url)
    assert "did not sign you in" in browser.find_element("css selector", ".error").text

    # An answer without this browser's attempt (no flow cookie, or another state): nothing redeemed, no session.
    r = http("GET", srv.url + "/login/oidc/callback?state=" + "a" * 43 + "&code=stolen")
    assert r.status == 401 and "cairn_session" not in r.headers.get("set-cookie", "")
    status, headers = first_answer(srv.url + "/login/oidc?next=/")
    assert status == 303 and headers["location"].startswith(oidc.issuer + "/oauth2/auth?")
    flow = headers["set-cookie"].split(";", 1)[0]
    assert "HttpOnly" in headers["set-cookie"] and "SameSite=Lax" in headers["set-cookie"]
    r = http("GET", srv.url + "/login/oidc/callback?state=" + "b" * 43 + "&code=stolen", headers={"Cookie": flow})
    assert r.status == 401 and "cairn_session" not in r.headers.get("set-cookie", "")
    # Without a company sign-in configured, its routes are not there.
    plain = server()
    assert http("GET", plain.url + "/login/oidc").status == 404
    assert "Example SSO" not in http("GET", plain.url + "/login").body.decode()
