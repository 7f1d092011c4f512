"""The web pages in a real browser (headless Chromium from Debian, through Selenium) against `cairn serve`
with repositories written by the stock `hf` CLI: every link the CLI prints opens the right page, the card,
tree, blob, history and commit pages show what the API says, hostile names and READMEs run nothing under a
strict Content-Security-Policy, large folders page, a private repository is the same 404 as a missing one.
Screenshots of each page are kept under build/test-artifacts/web/."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

from browser import alert_text, csp_violations, screenshot, start_browser
from common import http
from hub_util import Hub
from servers import WATCH

HOSTILE_NAME = "<img src=x onerror=alert(7)>.txt"
README = """---
license: mit
tags:
- text-generation
- "<b>bold</b>"
---
# Card Model

A **test** model: <script>alert(1)</script>

| column | value |
|---|---|
| depth | 12 |

<img src=x onerror="alert(2)">

[a link](javascript:alert(3)) and <a href="javascript:alert(4)">another</a>
"""


@pytest.fixture(scope="module")
def browser():
    driver = start_browser()
    yield driver
    driver.quit()


def printed_url(out: str) -> str:
    """The URL `hf` printed last (`url: ...`)."""
    urls = re.findall(r"url: (\S+)", re.sub(r"\x1b\[[0-9;]*m", "", out))
    assert urls, out
    return urls[-1]


def safetensors(path: Path, shapes: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file of zeros with these tensors (dtype, shape)."""
    sizes = {"F32": 4, "F16": 2, "BF16": 2}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in shapes.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(offset))


def page_text(browser, url: str, name: str) -> str:
    browser.get(url)
    assert alert_text(browser) is None, f"a script ran on {url}"
    assert browser.execute_script("return document.scripts.length") == 0, url
    screenshot(browser, name)
    return browser.find_element("tag name", "main").text


@pytest.mark.backends("sqlite")
def test_links_the_cli_prints_open_pages_that_show_what_the_api_says(server, hub_py, tmp_path, browser):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    repo_url = printed_url(hub.cli("repos", "create", "alice/card-model").stdout)
    assert repo_url == f"{srv.url}/alice/card-model"

    folder = tmp_path / "upload"
    (folder / "docs").mkdir(parents=True)
    (folder / "README.md").write_text(README)
    (folder / "docs" / "notes.txt").write_text("line one\nline two\n")
    (folder / HOSTILE_NAME).write_text("hostile\n")
    safetensors(folder / "model.safetensors", {"w": ("F16", [1000, 1000]), "b": ("F32", [1000])})
    commit_url = printed_url(hub.cli("upload", "alice/card-model", str(folder), ".").stdout)
    assert commit_url.startswith(f"{srv.url}/alice/card-model/commit/")

    # The repository's page: its card, metadata, parameters from the safetensors header.
    card = page_text(browser, repo_url, "repository")
    assert "Card Model" in card and "license" in card and "mit" in card and "<b>bold</b>" in card
    assert "1.0M" in card and "F16 · F32" in card  # 1,001,000 parameters
    assert [td.text for td in browser.find_elements("css selector", "article table:not(.metadata) td")] == ["depth", "12"]
    article = browser.find_element("css selector", "article").get_attribute("innerHTML")
    assert "<script" not in article and "onerror" not in article and "<img" not in article
    for link in browser.find_elements("css selector", "article a"):
        assert not (link.get_attribute("href") or "").startswith("javascript:")
    r = http("GET", repo_url)
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"

    # The commit the CLI printed: the files it added, a diff of the small text ones.
    commit = page_text(browser, commit_url, "commit")
    commits = hub.run("result = [c.commit_id for c in api.list_repo_commits('alice/card-model')]")
    assert len(commits) == 2 and commit_url.endswith(commits[0])
    assert "4 files changed" in commit and "+line two" in commit and "docs/notes.txt" in commit
    assert HOSTILE_NAME in commit and "A large file" in commit

    # The tree at main as the API lists it, each name a link to its file's page.
    tree = page_text(browser, f"{repo_url}/tree/main", "tree")
    listed = hub.run("result = sorted(f.path for f in api.list_repo_tree('alice/card-model'))")
    for path in listed:
        assert path in tree
    # A click returns before the page it opens may be there: each read waits for it.
    browser.find_element("link text", HOSTILE_NAME).click()
    wait_for(lambda: "hostile" in browser.find_element("tag name", "main").text)
    assert alert_text(browser) is None
    browser.get(f"{repo_url}/tree/main")
    browser.find_element("link text", "docs/").click()
    wait_for(lambda: bool(browser.find_elements("link text", "notes.txt")))
    browser.find_element("link text", "notes.txt").click()
    wait_for(lambda: "line two" in browser.find_element("tag name", "main").text)
    blob = browser.find_element("tag name", "main").text
    assert "line one" in blob and "line two" in blob and "18 Bytes" in blob
    screenshot(browser, "blob")

    # A large file's page: its size and a download link to /resolve/, served sandboxed.
    big = page_text(browser, f"{repo_url}/blob/main/model.safetensors", "blob-large")
    assert "Xet" in big and "download" in big.lower()
    link = browser.find_element("link text", "Download").get_attribute("href")
    assert link == f"{repo_url}/resolve/main/model.safetensors"
    got = http("GET", link)
    assert got.status == 200 and got.headers["content-security-policy"].startswith("sandbox")

    # The history: both commits, newest first, each a link to its page.
    history = page_text(browser, f"{repo_url}/commits/main", "history")
    assert history.index(commits[0][:7]) < history.index(commits[1][:7])  # newest first
    home = page_text(browser, f"{srv.url}/", "home")
    assert "alice/card-model" in home
    assert "alice/card-model" in page_text(browser, f"{srv.url}/alice", "namespace")
    assert not [v for v in csp_violations(browser) if "script" in v.lower() and "inline" not in v.lower()]


@pytest.mark.backends("sqlite")
def test_private_repositories_are_the_same_404_as_missing_ones(server, hub_py, tmp_path, browser):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    hub.run("HfApi().create_repo('alice/secret', private=True)\n"
            "HfApi().upload_file(path_or_fileobj=b'top secret', path_in_repo='s.txt', repo_id='alice/secret')")
    for path in ("/alice/secret", "/alice/secret/tree/main", "/alice/secret/blob/main/s.txt",
                 "/alice/secret/commits/main"):
        hidden, missing = http("GET", srv.url + path), http("GET", srv.url + path.replace("secret", "nothing"))
        assert hidden.status == missing.status == 404, path
        assert hidden.body.replace(b"secret", b"nothing") == missing.body.replace(b"secret", b"nothing")
    assert "alice/secret" not in page_text(browser, srv.url + "/", "home-anonymous")
    browser.get(srv.url + "/alice/secret")
    assert "404" in browser.title
    screenshot(browser, "not-found")


@pytest.mark.backends("sqlite")
def test_a_folder_of_10000_files_pages(server, hub_py, tmp_path, browser):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    hub.run("""
        api = HfApi()
        api.create_repo('alice/many')
        ops = [CommitOperationAdd(path_in_repo=f'data/f{i:05d}.txt', path_or_fileobj=str(i).encode())
               for i in range(10000)]
        api.create_commit('alice/many', operations=ops, commit_message='10,000 files')
    """, timeout=900)
    text = page_text(browser, f"{srv.url}/alice/many/tree/main/data", "tree-paged")
    assert "10000 entries, 1–200 shown" in text and "f00000.txt" in text and "f00200.txt" not in text
    browser.find_element("link text", "Next").click()
    wait_for(lambda: "201–400 shown" in browser.find_element("tag name", "main").text)
    text = browser.find_element("tag name", "main").text
    assert "201–400 shown" in text and "f00200.txt" in text and "f00199.txt" not in text
    last = http("GET", f"{srv.url}/alice/many/tree/main/data?p=49")
    assert b"f09999.txt" in last.body and b"rel=\"next\"" not in last.body
    assert len(last.body) < 100_000


def wait_for(predicate, timeout: float = 10) -> None:
    """Until `predicate` holds (a page being replaced as it is read counts as not yet)."""
    from selenium.common.exceptions import WebDriverException

    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except WebDriverException:
            pass
        assert time.monotonic() < deadline, "the page did not get there"
        time.sleep(0.05)


def sign_in(browser, url: str, name: str, password: str) -> None:
    browser.get(url + "/login")
    browser.find_element("id", "username").send_keys(name)
    browser.find_element("id", "password").send_keys(password)
    browser.find_element("css selector", "form.stack button").click()
    wait_for(lambda: browser.execute_script("return document.readyState") == "complete" and
             (browser.find_elements("css selector", ".error") or "/login" not in browser.current_url))


def sign_out(browser) -> None:
    """The header's "Sign out", until the page says "Sign in"."""
    browser.find_element("css selector", "form.inline button").click()
    wait_for(lambda: "Sign in" in browser.find_element("tag name", "nav").text)


def session_cookie(browser) -> str:
    cookies = {c["name"]: c for c in browser.get_cookies()}
    c = cookies.get("cairn_session")
    assert c and c["httpOnly"] and c.get("sameSite") == "Lax", cookies
    return c["value"]


@pytest.mark.backends("sqlite", "postgres")
def test_password_sign_in_shows_private_repositories_until_sign_out(server, hub_py, tmp_path, browser):
    srv = server(env={"CAIRN_PEOPLE_REFRESH": "1"})
    password = "correct horse battery staple"
    WATCH.add_secret("alice's password", password)
    srv.cli("user", "create", "alice")
    assert srv.cli("user", "password", "alice", stdin="short\n", expect_ok=False).returncode == 2
    srv.cli("user", "password", "alice", stdin=password + "\n")
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    hub.run("api.create_repo('alice/secret', private=True)\n"
            "api.upload_file(path_or_fileobj=b'top secret', path_in_repo='s.txt', repo_id='alice/secret')")
    browser.delete_all_cookies()
    browser.get(srv.url + "/alice/secret")
    assert "404" in browser.title

    # A wrong password: refused, the same words as for an unknown user, nothing set.
    sign_in(browser, srv.url, "alice", "not the password")
    assert "wrong user name or password" in browser.find_element("css selector", ".error").text
    sign_in(browser, srv.url, "nobody", "not the password")
    assert "wrong user name or password" in browser.find_element("css selector", ".error").text
    screenshot(browser, "sign-in-refused")
    assert "cairn_session" not in {c["name"] for c in browser.get_cookies()}

    sign_in(browser, srv.url, "alice", password)
    cookie = session_cookie(browser)
    WATCH.add_secret("alice's session", cookie)
    text = page_text(browser, srv.url + "/alice/secret", "private-repository")
    assert "alice / secret" in text and "private" in text
    assert "alice/secret" in page_text(browser, srv.url + "/", "home-signed-in")
    assert "top secret" in page_text(browser, srv.url + "/alice/secret/blob/main/s.txt", "private-blob")

    # A forged post (another site's form, or ours without the token) changes nothing.
    forged = http("POST", srv.url + "/logout", body=b"csrf=" + b"0" * 64,
                  headers={"Cookie": f"cairn_session={cookie}", "Content-Type": "application/x-www-form-urlencoded"})
    assert forged.status == 403
    forged = http("POST", srv.url + "/logout", body=b"",
                  headers={"Cookie": f"cairn_session={cookie}", "Origin": "http://evil.example"})
    assert forged.status == 403
    assert http("GET", srv.url + "/alice/secret", headers={"Cookie": f"cairn_session={cookie}"}).status == 200

    # Signing out ends the session on the server: the cookie, replayed, opens nothing.
    sign_out(browser)
    browser.get(srv.url + "/alice/secret")
    assert "404" in browser.title
    assert http("GET", srv.url + "/alice/secret", headers={"Cookie": f"cairn_session={cookie}"}).status == 404

    # Disabling the user ends their sessions within the people refresh.
    sign_in(browser, srv.url, "alice", password)
    cookie = session_cookie(browser)
    WATCH.add_secret("alice's second session", cookie)
    assert http("GET", srv.url + "/alice/secret", headers={"Cookie": f"cairn_session={cookie}"}).status == 200
    srv.cli("user", "disable", "alice")
    deadline = time.monotonic() + 10
    while http("GET", srv.url + "/alice/secret", headers={"Cookie": f"cairn_session={cookie}"}).status != 404:
        assert time.monotonic() < deadline, "a disabled user's session still works"
        time.sleep(0.2)
    srv.cli("user", "enable", "alice")

    # A password change ends every session at once.
    sign_in(browser, srv.url, "alice", password)
    cookie = session_cookie(browser)
    WATCH.add_secret("alice's third session", cookie)
    srv.cli("user", "password", "alice", stdin=password + " changed\n")
    WATCH.add_secret("alice's new password", password + " changed")
    assert http("GET", srv.url + "/alice/secret", headers={"Cookie": f"cairn_session={cookie}"}).status == 404
    events = [json.loads(line)["action"] for line in srv.cli("audit", "--json").stdout.splitlines() if line.strip()]
    assert events.count("session.create") == 3 and "session.end" in events and "password.set" in events


@pytest.mark.backends("sqlite")
def test_failed_sign_ins_are_bounded_and_the_form_needs_its_token(server, browser):
    srv = server()
    srv.cli("user", "create", "bob")
    srv.cli("user", "password", "bob", stdin="bob's real password\n")
    WATCH.add_secret("bob's password", "bob's real password")
    browser.delete_all_cookies()
    for _ in range(5):
        sign_in(browser, srv.url, "bob", "guess guess guess")
    sign_in(browser, srv.url, "bob", "bob's real password")
    assert "too many failed sign-ins" in browser.find_element("css selector", ".error").text
    assert "cairn_session" not in {c["name"] for c in browser.get_cookies()}
    # Without the form cookie's token (another site posting the form), nothing is tried.
    r = http("POST", srv.url + "/login", body=b"username=bob&password=x&csrf=" + b"a" * 64,
             headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 403 and "set-cookie" not in r.headers


def start_login(hub: Hub) -> tuple[subprocess.Popen, str, str]:
    """`hf auth login` without a token or a terminal (its browser flow): the process, the URL and the code it
    printed."""
    hf = str(Path(hub.python).parent / "hf")
    proc = subprocess.Popen([hf, "auth", "login"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=hub.env(token=None), cwd=hub.workdir, stdin=subprocess.DEVNULL)
    url = code = None
    lines = []
    deadline = time.monotonic() + 60
    while (url is None or code is None) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if m := re.search(r"(http\S+/device\S*)", line):
            url = m.group(1)
        if m := re.search(r"enter the code: (\S+)", line):
            code = m.group(1)
    assert url and code, "".join(lines)
    return proc, url, code


@pytest.mark.backends("sqlite", "postgres")
def test_hf_auth_login_is_approved_in_the_browser_and_its_token_uploads(server, hub_py, tmp_path, browser):
    srv = server()
    password = "carol's long password"
    WATCH.add_secret("carol's password", password)
    srv.cli("user", "create", "carol")
    srv.cli("user", "password", "carol", stdin=password + "\n")
    hub = Hub(hub_py, tmp_path / "carol", srv, None)
    proc, url, code = start_login(hub)
    try:
        assert url == f"{srv.url}/device?user_code={code}"
        browser.delete_all_cookies()
        browser.get(url)  # not signed in: sent to sign in first, then back to the code
        assert "/login" in browser.current_url
        browser.find_element("id", "username").send_keys("carol")
        browser.find_element("id", "password").send_keys(password)
        browser.find_element("css selector", "form.stack button").click()
        wait_for(lambda: "/device" in browser.current_url and
                 bool(browser.find_elements("css selector", "button[value=approve]")))
        assert code in browser.find_element("tag name", "main").text
        screenshot(browser, "device-approve")
        browser.find_element("css selector", "button[value=approve]").click()
        wait_for(lambda: "Approved" in browser.find_element("tag name", "main").text)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
    finally:
        proc.kill()
    assert "carol" in hub.cli("auth", "whoami").stdout
    # The token it saved is one of carol's (listed, revocable), and writes.
    hub.cli("repos", "create", "carol/from-login")
    (tmp_path / "f.txt").write_text("written with the token hf auth login got\n")
    hub.cli("upload", "carol/from-login", str(tmp_path / "f.txt"), "f.txt")
    listed = srv.cli("token", "ls", "--user", "carol", "--json").stdout
    assert "hf auth login" in listed
    # The code works once: approving it again, or polling for it again, gets nothing.
    browser.get(url)
    assert "expired or was used" in browser.find_element("tag name", "main").text
    events = [json.loads(line)["action"] for line in srv.cli("audit", "--json").stdout.splitlines() if line.strip()]
    assert "device.approve" in events and "token.create" in events


def _form(url: str, fields: dict) -> tuple[int, dict]:
    r = http("POST", url, body=urllib.parse.urlencode(fields).encode(),
             headers={"Content-Type": "application/x-www-form-urlencoded"})
    return r.status, json.loads(r.body)


@pytest.mark.backends("sqlite")
def test_the_device_flow_answers_as_rfc_8628_and_refresh_tokens_work_once(server, browser):
    srv = server()
    srv.cli("user", "create", "dave")
    srv.cli("user", "password", "dave", stdin="dave's long password\n")
    WATCH.add_secret("dave's password", "dave's long password")
    client = "26be6b09-91c5-47da-9861-d2d2bb7a7e36"
    status, started = _form(srv.url + "/oauth/device", {"client_id": client})
    assert status == 200 and started["interval"] == 5 and started["expires_in"] == 900
    assert re.fullmatch(r"[B-Z]{4}-[B-Z]{4}", started["user_code"])
    WATCH.add_secret("a device code", started["device_code"])
    poll = {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": started["device_code"],
            "client_id": client}
    assert _form(srv.url + "/oauth/token", poll) == (400, {"error": "authorization_pending",
                                                           "error_description": "not approved yet"})
    assert _form(srv.url + "/oauth/token", poll)[1]["error"] == "slow_down"
    assert _form(srv.url + "/oauth/token", {**poll, "device_code": "0" * 64})[1]["error"] == "invalid_grant"
    assert _form(srv.url + "/oauth/device", {})[1]["error"] == "invalid_request"

    browser.delete_all_cookies()
    sign_in(browser, srv.url, "dave", "dave's long password")
    browser.get(srv.url + "/device")
    browser.find_element("id", "user_code").send_keys(started["user_code"].lower().replace("-", " "))
    browser.find_element("css selector", "form.stack button").click()
    # The click returns before the next page is there: wait for its button.
    wait_for(lambda: bool(browser.find_elements("css selector", "button[value=approve]")))
    browser.find_element("css selector", "button[value=approve]").click()
    wait_for(lambda: "Approved" in browser.find_element("tag name", "main").text)
    time.sleep(5)
    status, grant = _form(srv.url + "/oauth/token", poll)
    assert status == 200 and grant["token_type"] == "bearer", grant
    WATCH.add_secret("dave's access token", grant["access_token"])
    WATCH.add_secret("dave's refresh token", grant["refresh_token"])
    assert 0 < grant["expires_in"] <= 30 * 86400
    assert _form(srv.url + "/oauth/token", poll)[1]["error"] in ("invalid_grant", "slow_down")

    # A refresh replaces the refresh token: the old one works once.
    refresh = {"grant_type": "refresh_token", "refresh_token": grant["refresh_token"], "client_id": client}
    status, renewed = _form(srv.url + "/oauth/token", refresh)
    assert status == 200 and renewed["refresh_token"] != grant["refresh_token"], renewed
    WATCH.add_secret("dave's second access token", renewed["access_token"])
    WATCH.add_secret("dave's second refresh token", renewed["refresh_token"])
    assert _form(srv.url + "/oauth/token", refresh) == (400, {
        "error": "invalid_grant", "error_description": "the refresh token is unknown, used or expired"})
    who = http("GET", srv.url + "/api/whoami-v2", headers={"Authorization": "Bearer " + renewed["access_token"]})
    assert who.status == 200 and json.loads(who.body)["name"] == "dave"
    # A refresh token opens no page (it is no browser session), and a password change ends it.
    cookie = renewed["refresh_token"].removeprefix("cairn_refresh_")
    assert "Sign in" in http("GET", srv.url + "/", headers={"Cookie": f"cairn_session={cookie}"}).body.decode()
    srv.cli("user", "password", "dave", stdin="dave's new long password\n")
    WATCH.add_secret("dave's new password", "dave's new long password")
    refresh["refresh_token"] = renewed["refresh_token"]
    assert _form(srv.url + "/oauth/token", refresh)[1]["error"] == "invalid_grant"
    # Denied codes get access_denied.
    _, second = _form(srv.url + "/oauth/device", {"client_id": client})
    WATCH.add_secret("a second device code", second["device_code"])
    sign_in(browser, srv.url, "dave", "dave's new long password")
    # Another site's approval (no form token, or another origin) is refused and the code stays pending.
    session = session_cookie(browser)
    WATCH.add_secret("dave's session", session)
    for headers, body in (({}, {"user_code": second["user_code"], "decision": "approve"}),
                          ({"Origin": "http://evil.example"},
                           {"user_code": second["user_code"], "decision": "approve", "csrf": "0" * 64})):
        r = http("POST", srv.url + "/device", body=urllib.parse.urlencode(body).encode(),
                 headers={"Cookie": f"cairn_session={session}", "Content-Type": "application/x-www-form-urlencoded",
                          **headers})
        assert r.status == 403
    assert _form(srv.url + "/oauth/token", {**poll, "device_code": second["device_code"]})[1]["error"] in (
        "authorization_pending", "slow_down")
    browser.get(second["verification_uri_complete"])
    browser.find_element("css selector", "button[value=deny]").click()
    wait_for(lambda: "Denied" in browser.find_element("tag name", "main").text)
    assert _form(srv.url + "/oauth/token", {**poll, "device_code": second["device_code"]})[1]["error"] == \
        "access_denied"


@pytest.mark.backends("sqlite")
def test_a_token_made_on_the_page_works_and_one_revoked_there_stops(server, hub_py, tmp_path, browser):
    srv = server()
    srv.cli("user", "create", "erin")
    srv.cli("user", "password", "erin", stdin="erin's long password\n")
    WATCH.add_secret("erin's password", "erin's long password")
    browser.delete_all_cookies()
    browser.get(srv.url + "/settings/tokens")
    assert "/login" in browser.current_url  # sent to sign in first
    sign_in(browser, srv.url, "erin", "erin's long password")
    browser.get(srv.url + "/settings/tokens")
    browser.find_element("id", "name").send_keys("laptop <b>")
    browser.find_element("css selector", "#role option[value=write]").click()
    browser.find_element("css selector", "form.stack button").click()
    wait_for(lambda: browser.find_elements("id", "token-text"))
    text = browser.find_element("id", "token-text").get_attribute("value")
    WATCH.add_secret("erin's page token", text)
    assert text.startswith("cairn_")
    screenshot(browser, "tokens")
    # Shown once: the list has its id and name, never its text.
    browser.get(srv.url + "/settings/tokens")
    page = browser.page_source
    assert text not in page and "laptop &lt;b&gt;" in page and text[6:22] in page

    hub = Hub(hub_py, tmp_path / "erin", srv, text)
    assert "erin" in hub.cli("auth", "whoami").stdout
    hub.cli("repos", "create", "erin/notes")
    browser.find_element("css selector", "button[aria-label='Revoke laptop <b>']").click()
    wait_for(lambda: "Revoked token" in browser.find_element("tag name", "main").text)
    assert http("GET", srv.url + "/api/whoami-v2", headers={"Authorization": "Bearer " + text}).status == 401
    # Another person's token is not erin's to revoke, and a forged revocation changes nothing.
    srv.cli("user", "create", "finn")
    other = srv.cli("token", "create", "--user", "finn", "--name", "ci", "--role", "read", secret_output=True)
    other_text = other.stdout.strip()
    WATCH.add_secret("finn's token", other_text)
    cookie = session_cookie(browser)
    csrf = browser.find_element("css selector", "input[name=csrf]").get_attribute("value")
    r = http("POST", srv.url + "/settings/tokens/revoke",
             body=urllib.parse.urlencode({"csrf": csrf, "id": other_text[6:22]}).encode(),
             headers={"Cookie": f"cairn_session={cookie}", "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 404
    r = http("POST", srv.url + "/settings/tokens/revoke", body=b"id=" + other_text[6:22].encode(),
             headers={"Cookie": f"cairn_session={cookie}", "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 403
    # A forged creation makes no token.
    before = srv.cli("token", "ls", "--user", "erin", "--json").stdout.count("\n")
    r = http("POST", srv.url + "/settings/tokens", body=b"name=forged&role=write&days=30",
             headers={"Cookie": f"cairn_session={cookie}", "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 403
    assert srv.cli("token", "ls", "--user", "erin", "--json").stdout.count("\n") == before
    assert http("GET", srv.url + "/api/whoami-v2", headers={"Authorization": "Bearer " + other_text}).status == 200


@pytest.mark.backends("sqlite")
def test_the_operator_page_shows_dedup_health_and_events_to_operators_alone(server, hub_py, tmp_path, browser):
    srv = server()
    password = "the operator's long password"
    WATCH.add_secret("olga's password", password)
    srv.cli("user", "create", "olga", "--operator")
    srv.cli("user", "create", "dave")
    for user in ("olga", "dave"):
        srv.cli("user", "password", user, stdin=password + "\n")
    hub = Hub(hub_py, tmp_path / "olga", srv, srv.token("olga", write=True))
    # The same 4 MiB twice under two names: stored once.
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 16384)
    hub.run("api.create_repo('olga/twice')\n"
            f"api.upload_file(path_or_fileobj={str(tmp_path / 'a.bin')!r}, path_in_repo='a.bin', repo_id='olga/twice')\n"
            f"api.upload_file(path_or_fileobj={str(tmp_path / 'a.bin')!r}, path_in_repo='b.bin', repo_id='olga/twice')")
    browser.delete_all_cookies()
    sign_in(browser, srv.url, "dave", password)
    browser.get(srv.url + "/admin")
    assert "404" in browser.title and "Operator" not in browser.find_element("tag name", "nav").text
    sign_out(browser)
    sign_in(browser, srv.url, "olga", password)
    browser.find_element("link text", "Operator").click()
    text = page_text(browser, srv.url + "/admin", "operator")
    assert "Dedup ratio" in text and "index answers" in text and "store answers" in text
    assert "repo.create" in text and "olga/twice" in text


@pytest.mark.backends("sqlite")
def test_a_buckets_page_lists_its_folders_and_a_private_one_is_a_404(server, hub_py, tmp_path, browser):
    srv = server()
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("hello\n")
    (tmp_path / "sub" / "b.bin").write_bytes(bytes(range(256)) * 64)
    url = hub.run(f"""
        u = api.create_bucket("alice/files")
        api.create_bucket("alice/hidden", private=True)
        api.batch_bucket_files("alice/files", add=[({str(tmp_path / "a.txt")!r}, "a.txt"),
                                                   ({str(tmp_path / "sub" / "b.bin")!r}, "sub/b.bin")])
        result = u.url""")
    assert "alice/files" in page_text(browser, f"{srv.url}/alice", "namespace-with-bucket")
    assert "alice/hidden" not in browser.find_element("tag name", "main").text
    text = page_text(browser, url, "bucket")
    assert "alice / files" in text and "2 files" in text and "a.txt" in text and "sub/" in text
    browser.find_element("link text", "sub/").click()
    wait_for(lambda: "b.bin" in browser.find_element("tag name", "main").text)
    href = browser.find_element("link text", "b.bin").get_attribute("href")
    assert href == f"{srv.url}/buckets/alice/files/resolve/sub/b.bin"
    assert http("GET", href).body == bytes(range(256)) * 64
    browser.delete_all_cookies()
    browser.get(f"{srv.url}/buckets/alice/hidden")
    assert "404" in browser.title


def tiny_png() -> bytes:
    """A valid 1×1 PNG (one opaque red pixel)."""
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) +
            chunk(b"IEND", b""))


def status_and_location(url: str, headers: dict) -> tuple[int, str]:
    """One GET, its redirect not followed."""
    import http.client
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", parts.path + ("?" + parts.query if parts.query else ""), headers=headers)
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status, r.getheader("Location") or ""


@pytest.mark.backends("sqlite")
def test_with_a_content_origin_files_and_images_come_from_it(server, hub_py, tmp_path, browser):
    """content_url names another host for the same server (localhost beside 127.0.0.1): a private repository's
    README image shows and its file downloads from there through signed links, the session cookie never goes
    there, nothing but linked downloads answers there, and a browser sent to a download on cairn's origin is
    redirected there."""
    from common import free_port
    port = free_port()
    content = f"http://localhost:{port}"
    srv = server(port=port, args=("--content-url", content))
    password = "correct horse battery staple"
    WATCH.add_secret("alice's password", password)
    srv.cli("user", "create", "alice")
    srv.cli("user", "password", "alice", stdin=password + "\n")
    (tmp_path / "plot.png").write_bytes(tiny_png())
    hub = Hub(hub_py, tmp_path / "alice", srv, srv.token("alice", write=True))
    hub.run("api.create_repo('alice/secret', private=True)\n"
            "api.upload_file(path_or_fileobj=b'# Plots\\n\\n![plot](img/plot.png)\\n', path_in_repo='README.md',"
            " repo_id='alice/secret')\n"
            f"api.upload_file(path_or_fileobj={str(tmp_path / 'plot.png')!r}, path_in_repo='img/plot.png',"
            " repo_id='alice/secret')\n"
            "api.upload_file(path_or_fileobj=b'top secret', path_in_repo='s.txt', repo_id='alice/secret')\n"
            "api.create_repo('alice/pub')\n"
            "api.upload_file(path_or_fileobj=b'<script>alert(1)</script>', path_in_repo='x.html', repo_id='alice/pub')\n"
            "api.create_bucket('alice/box', private=True)\n"
            f"api.batch_bucket_files('alice/box', add=[({str(tmp_path / 'plot.png')!r}, 'p/plot.png')])")
    browser.delete_all_cookies()
    csp_violations(browser)
    sign_in(browser, srv.url, "alice", password)
    cookie = session_cookie(browser)
    WATCH.add_secret("alice's session", cookie)

    browser.get(srv.url + "/alice/secret")
    wait_for(lambda: browser.execute_script(
        "const i = document.querySelector('article img'); return i !== null && i.complete && i.naturalWidth === 1"))
    src = browser.find_element("css selector", "article img").get_attribute("src")
    assert src.startswith(content + "/alice/secret/resolve/") and "&s=" in src, src
    assert not csp_violations(browser)
    screenshot(browser, "content-origin-card")

    browser.get(srv.url + "/alice/secret/blob/main/s.txt")
    href = browser.find_element("link text", "Download").get_attribute("href")
    assert href.startswith(content + "/alice/secret/resolve/"), href
    got = http("GET", href)
    assert got.status == 200 and got.body == b"top secret"
    assert "sandbox" in got.headers["content-security-policy"]
    # The link is the whole grant: the session cookie is not for that host, and a changed link reads nothing.
    sent = browser.execute_cdp_cmd("Network.getCookies", {"urls": [href, srv.url + "/"]})["cookies"]
    assert [c["domain"] for c in sent if c["name"] == "cairn_session"] == ["127.0.0.1"], sent
    assert http("GET", href.replace("s.txt", "README.md")).status == 403
    for path in ("/", "/alice/secret", "/alice/pub", "/api/models/alice/pub", "/alice/pub/resolve/main/x.html",
                 "/login"):
        assert http("GET", content + path).status == 404, path

    # A private bucket's file likewise: a link to the stored file, on the content origin.
    browser.get(srv.url + "/buckets/alice/box/tree/p")
    wait_for(lambda: browser.find_elements("link text", "plot.png"))
    href = browser.find_element("link text", "plot.png").get_attribute("href")
    assert href.startswith(content + "/v1/files/"), href
    assert http("GET", href).body == tiny_png()

    # A browser sent to a download on cairn's origin goes to the content origin; a client is answered there.
    status, location = status_and_location(srv.url + "/alice/pub/resolve/main/x.html", {"Sec-Fetch-Dest": "document"})
    assert status == 302 and location.startswith(content + "/alice/pub/resolve/"), (status, location)
    assert http("GET", location).body == b"<script>alert(1)</script>"
    assert status_and_location(srv.url + "/alice/pub/resolve/main/x.html", {})[0] == 200
