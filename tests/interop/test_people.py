"""People on the command line (`cairn user`, `cairn org`, `cairn token create|ls|revoke`), on SQLite and on
PostgreSQL: accounts share one space of names, members have roles, a token's text is printed once and the
index keeps only the SHA-256 of its secret (read back from the database itself), listings never show it, and
bad input is refused with a clear message and changes nothing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time

import pytest

from hub_util import Hub, hub_api as _api
from servers import WATCH

PEOPLE = pytest.mark.backends("sqlite", "postgres")


def _rows(srv, sql: str) -> list[list[str]]:
    """Rows of `sql` read from the server's index behind its back."""
    index = srv._env().get("CAIRN_INDEX")
    if index and index.startswith("postgres"):
        r = subprocess.run(["psql", index, "-AtqX", "-F", "\t", "-c", sql], capture_output=True, text=True,
                           timeout=30, check=True)
        return [line.split("\t") for line in r.stdout.splitlines()]
    import sqlite3

    path = index[len("sqlite:"):] if index and index.startswith("sqlite:") else str(srv.data_dir / "index.db")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return [[str(v) for v in row] for row in db.execute(sql)]


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@PEOPLE
def test_people_and_their_tokens_on_the_command_line(server):
    srv = server()
    srv.cli("user", "create", "alice", "--full-name", "Alice Ångström", "--operator")
    srv.cli("user", "create", "bob")
    srv.cli("org", "create", "acme")
    srv.cli("org", "add", "acme", "alice", "admin")
    srv.cli("org", "add", "acme", "bob", "read")
    srv.cli("org", "role", "acme", "bob", "write")
    members = _json_lines(srv.cli("org", "show", "acme", "--json").stdout)
    assert [(m["name"], m.get("role")) for m in members] == [("acme", None), ("alice", "admin"), ("bob", "write")]
    bob = _json_lines(srv.cli("user", "show", "bob", "--json").stdout)
    assert bob[0]["type"] == "user" and bob[1]["name"] == "acme" and bob[1]["role"] == "write"
    alice = _json_lines(srv.cli("user", "show", "alice", "--json").stdout)[0]
    assert alice["fullname"] == "Alice Ångström" and alice["operator"] is True

    made = srv.cli("token", "create", "--user", "alice", "--name", "laptop", "--role", "write", "--ttl", "30d",
                   secret_output=True)
    text = made.stdout.strip()
    WATCH.add_secret("alice's token", text)
    assert text.startswith("cairn_") and len(text) == 6 + 16 + 1 + 64
    token_id, secret = text[6:22], text[23:]
    assert token_id in made.stderr and secret not in made.stderr
    fine = srv.cli("token", "create", "--user", "bob", "--name", "ci", "--role", "fineGrained",
                   "--grant", "w bob/model", "--grant", "r acme", secret_output=True).stdout.strip()
    WATCH.add_secret("bob's token", fine)

    # The index holds the id and the SHA-256 of the secret, never the secret or the text.
    stored = _rows(srv, f"SELECT id, encode(secret_hash, 'hex') FROM tokens WHERE id = '{token_id}'"
                   if srv._env().get("CAIRN_INDEX", "").startswith("postgres")
                   else f"SELECT id, hex(secret_hash) FROM tokens WHERE id = '{token_id}'")
    assert [[i, h.lower()] for i, h in stored] == [[token_id, hashlib.sha256(secret.encode()).hexdigest()]]
    dump = "\n".join("\t".join(r) for r in _rows(srv, "SELECT * FROM tokens"))
    assert secret not in dump and text not in dump

    listed = _json_lines(srv.cli("token", "ls", "--json").stdout)
    assert {t["id"] for t in listed} == {token_id, fine[6:22]}
    assert all(t["state"] == "live" for t in listed)
    assert next(t for t in listed if t["owner"] == "bob")["grants"] == "w bob/model\nr acme"
    assert secret not in srv.cli("token", "ls").stdout

    assert "revoked" in srv.cli("token", "revoke", token_id).stdout
    assert "already revoked" in srv.cli("token", "revoke", token_id).stdout
    mine = _json_lines(srv.cli("token", "ls", "--user", "alice", "--json").stdout)
    assert [t["state"] for t in mine] == ["revoked"] and mine[0]["revoked_at"] > 0

    srv.cli("user", "disable", "bob")
    assert _json_lines(srv.cli("user", "show", "bob", "--json").stdout)[0]["disabled"] is True
    srv.cli("user", "enable", "bob")
    srv.cli("org", "remove", "acme", "bob")
    assert [m["name"] for m in _json_lines(srv.cli("org", "show", "acme", "--json").stdout)] == ["acme", "alice"]
    # The last admin stays, for the command line too.
    kept = srv.cli("org", "remove", "acme", "alice", expect_ok=False)
    assert kept.returncode != 0 and "keeps an admin" in kept.stderr, kept.stderr

    # The operator's flag comes and goes, each change in the audit log.
    srv.cli("user", "operator", "bob")
    assert _json_lines(srv.cli("user", "show", "bob", "--json").stdout)[0]["operator"] is True
    srv.cli("user", "operator", "bob", "--off")
    assert _json_lines(srv.cli("user", "show", "bob", "--json").stdout)[0]["operator"] is False
    flags = [e["detail"] for e in _json_lines(srv.cli("audit", "--json", "--repo", "user bob").stdout)
             if e["action"] == "user.operator"]
    assert flags == ["not operator", "operator"], flags


@PEOPLE
def test_bad_input_is_refused_and_changes_nothing(server):
    srv = server()
    srv.cli("user", "create", "alice")
    srv.cli("org", "create", "acme")
    before = _rows(srv, "SELECT count(*) FROM accounts") + _rows(srv, "SELECT count(*) FROM tokens")
    refusals = [
        (("user", "create", "ALICE"), 1, "taken"),            # one space of names, case aside
        (("org", "create", "Alice"), 1, "taken"),
        (("user", "create", "settings"), 2, "not a name"),   # the site's own pages
        (("user", "create", "a--b"), 2, "not a name"),
        (("user", "create", "bob", "--full-name", "x\x1b[2Jy"), 2, "full name"),
        (("org", "add", "acme", "nobody", "read"), 1, "nobody"),
        (("org", "add", "alice", "alice", "read"), 1, "no organization"),
        (("org", "add", "acme", "alice", "owner"), 2, "--role owner"),
        (("token", "create", "--user", "acme", "--name", "x", "--role", "read"), 1, "no user acme"),
        (("token", "create", "--user", "alice", "--name", "x", "--role", "read", "--ttl", "400d"), 2, "at most"),
        (("token", "create", "--user", "alice", "--name", "x", "--role", "fineGrained"), 2, "needs grants"),
        (("token", "create", "--user", "alice", "--name", "x", "--role", "fineGrained", "--grant", "w a/b/c"), 2,
         "grant"),
        (("token", "create", "--user", "alice", "--name", "", "--role", "read"), 2, "token's name"),
        (("token", "revoke", "0123456789abcdef"), 1, "not in the index"),
    ]
    for args, code, words in refusals:
        r = srv.cli(*args, expect_ok=False)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert words in r.stderr, (args, r.stderr)
        assert "\x1b" not in r.stderr
    after = _rows(srv, "SELECT count(*) FROM accounts") + _rows(srv, "SELECT count(*) FROM tokens")
    assert after == before


def _token(srv, user: str, role: str, *extra: str) -> str:
    text = srv.cli("token", "create", "--user", user, "--name", f"{user}-{role}", "--role", role, *extra,
                   secret_output=True).stdout.strip()
    WATCH.add_secret(f"{user}'s {role} token", text)
    return text


def _refused_within(check, seconds: float) -> float:
    """Polls `check()` (True once the token is refused) and returns how long it took; fails past `seconds`."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > seconds:
            pytest.fail(f"still accepted after {seconds} s")
        time.sleep(0.1)
    return time.monotonic() - start


def _whoami_status(srv, token: str) -> int:
    return srv.get("/api/whoami-v2", token=token).status


@PEOPLE
def test_a_persons_token_speaks_for_them_through_the_stock_client(server, hub_py, tmp_path):
    srv = server(env={"CAIRN_PEOPLE_REFRESH": "1"})
    srv.cli("user", "create", "alice", "--full-name", "Alice A.")
    srv.cli("org", "create", "acme", "--full-name", "ACME Inc.")
    srv.cli("org", "add", "acme", "alice", "admin")
    write = _token(srv, "alice", "write")
    hub = Hub(hub_py, tmp_path / "alice", srv, write)

    who = hub.cli("auth", "whoami").stdout
    assert "alice" in who and "acme" in who, who
    info = hub.run("result = api.whoami()")
    assert info["name"] == "alice" and info["fullname"] == "Alice A."
    assert [(o["name"], o["roleInOrg"], o["fullname"]) for o in info["orgs"]] == [("acme", "admin", "ACME Inc.")]
    assert info["auth"]["accessToken"]["role"] == "write"

    # The token writes the user's namespace, and what it made private stays a 404 to anyone else.
    hub.run('api.create_repo("alice/secret", private=True)')
    hub.run('api.upload_file(path_or_fileobj=b"hello", path_in_repo="a.txt", repo_id="alice/secret")')
    assert hub.run('result = api.list_repo_files("alice/secret")') == [".gitattributes", "a.txt"]
    anonymous = Hub(hub_py, tmp_path / "anon", srv, None)
    assert anonymous.fails('api.list_repo_files("alice/secret")').kind == "RepositoryNotFoundError"

    read = _token(srv, "alice", "read")
    reader = Hub(hub_py, tmp_path / "reader", srv, read)
    assert reader.run('result = api.list_repo_files("alice/secret")') == [".gitattributes", "a.txt"]
    assert reader.fails('api.create_repo("alice/other")').status == 403

    fine = _token(srv, "alice", "fineGrained", "--grant", "w alice/secret")
    scoped = srv.get("/api/whoami-v2", token=fine).json()["auth"]["accessToken"]
    assert scoped["role"] == "fineGrained"
    assert scoped["fineGrained"]["scoped"] == [{"entity": {"type": "model", "name": "alice/secret"},
                                                "permissions": ["repo.content.read", "repo.write"]}]
    # A fine-grained token is not taken by the CAS routes, which serve one scope and read no grants.
    assert srv.get("/v1/files", token=fine).status == 401

    # Revoked, and the owner disabled: refused within the refresh interval, and enabled again, accepted.
    srv.cli("token", "revoke", write[6:22])
    took = _refused_within(lambda: _whoami_status(srv, write) == 401, 5)
    assert took < 5
    assert _whoami_status(srv, read) == 200
    srv.cli("user", "disable", "alice")
    _refused_within(lambda: _whoami_status(srv, read) == 401, 5)
    # Write attempts with either are refused and recorded as alice's, with the token's id.
    assert _api(srv, "POST", "/api/repos/create", write, {"name": "again", "type": "model"}).status == 401
    assert _api(srv, "POST", "/api/repos/create", read, {"name": "again", "type": "model"}).status == 401
    srv.cli("user", "enable", "alice")
    _refused_within(lambda: _whoami_status(srv, read) == 200, 5)
    refused = {(e["actor"], e["token_id"], e["target"]) for e in _json_lines(srv.cli("audit", "--json").stdout)
               if e["action"] == "access.refused"}
    assert {("alice", write[6:22], "/api/repos/create"), ("alice", read[6:22], "/api/repos/create")} <= refused


@pytest.mark.backends("postgres")
def test_a_revocation_reaches_every_node_within_the_refresh(server):
    """Two nodes on one PostgreSQL index: a token made with one is accepted by both at once, and revoked,
    refused by both within the refresh interval (1 s here) plus a refresh."""
    first = server(env={"CAIRN_PEOPLE_REFRESH": "1"})
    second = server(env={"CAIRN_PEOPLE_REFRESH": "1"}, data_dir=first.data_dir)
    first.cli("user", "create", "bob")
    token = _token(first, "bob", "write")
    assert _whoami_status(first, token) == 200 and _whoami_status(second, token) == 200
    first.cli("token", "revoke", token[6:22])
    for node in (first, second):
        assert _refused_within(lambda node=node: _whoami_status(node, token) == 401, 5) < 5


@PEOPLE
def test_an_organizations_members_act_by_their_roles(server, hub_py, tmp_path):
    """acme's admin, writer and reader, and a stranger, with huggingface_hub and hf: each does what their role
    allows and nothing more; a private repository is a 404 to the stranger on every route asked."""
    srv = server()
    for user in ("alice", "bob", "carol", "dave"):
        srv.cli("user", "create", user)
    srv.cli("org", "create", "acme")
    for user, role in (("alice", "admin"), ("bob", "write"), ("carol", "read")):
        srv.cli("org", "add", "acme", user, role)
    hubs = {u: Hub(hub_py, tmp_path / u, srv, _token(srv, u, "write")) for u in ("alice", "bob", "carol", "dave")}
    alice, bob, carol, dave = (hubs[u] for u in ("alice", "bob", "carol", "dave"))

    # create_repo("acme/...") means "as a member of acme": the writer and the admin may, the reader may not.
    alice.run('api.create_repo("acme/model", private=True)')
    bob.run('api.create_repo("acme/bobs", private=True)')
    assert carol.fails('api.create_repo("acme/carols")').status == 403
    assert dave.fails('api.create_repo("acme/daves")').status == 403

    # The writer commits; the reader reads and cannot commit; the stranger finds nothing.
    bob.run('api.upload_file(path_or_fileobj=b"weights", path_in_repo="w.txt", repo_id="acme/model")')
    assert carol.run('result = api.list_repo_files("acme/model")') == [".gitattributes", "w.txt"]
    assert carol.fails('api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="acme/model")'
                       ).status == 403
    assert dave.fails('api.list_repo_files("acme/model")').kind == "RepositoryNotFoundError"
    assert dave.fails('api.model_info("acme/model")').kind == "RepositoryNotFoundError"
    assert srv.get("/acme/model/resolve/main/w.txt", token=dave.token).status == 404

    # Settings, moves and deletion are the admin's: the writer is refused and nothing changes.
    assert bob.fails('api.update_repo_settings("acme/model", private=False)').status == 403
    assert bob.fails('api.delete_repo("acme/model")').status == 403
    assert bob.fails('api.move_repo("acme/model", "acme/renamed")').status == 403
    assert dave.fails('api.model_info("acme/model")').kind == "RepositoryNotFoundError"
    alice.run('api.update_repo_settings("acme/model", private=False)')
    assert dave.run('result = api.list_repo_files("acme/model")') == [".gitattributes", "w.txt"]
    alice.run('api.update_repo_settings("acme/model", private=True)')
    alice.run('api.move_repo("acme/bobs", "acme/moved")')
    alice.run('api.delete_repo("acme/moved")')

    # list_models(author=) shows the private repository exactly to those who may read it.
    listing = 'result = [m.id for m in api.list_models(author="acme")]'
    assert carol.run(listing) == ["acme/model"]
    assert dave.run(listing) == []

    # hf repos ls: the caller's own namespace, and --namespace acme for its members only.
    bob.run('api.create_repo("bob/own")')
    assert "bob/own" in bob.cli("repos", "ls").stdout
    mine = carol.run('result = [(r.id, r.type, r.visibility) for r in api.list_user_repos(namespace="acme")]')
    assert mine == [["acme/model", "model", "private"]]
    assert dave.fails('list(api.list_user_repos(namespace="acme"))').status == 403
    assert "acme/model" in carol.cli("repos", "ls", "--namespace", "acme").stdout

    # The admin changes membership through the API; the writer may not. A member demoted to read writes no
    # more, and a removed one loses the organization's private repositories (at once on this node).
    members = "/api/organizations/acme/members"
    assert _api(srv, "PUT", f"{members}/carol", bob.token, {"role": "admin"}).status == 403
    assert _api(srv, "PUT", f"{members}/bob", alice.token, {"role": "read"}).status == 200
    assert bob.fails('api.upload_file(path_or_fileobj=b"y", path_in_repo="y.txt", repo_id="acme/model")'
                     ).status == 403
    assert [(o["name"], o["roleInOrg"]) for o in bob.run("result = api.whoami()")["orgs"]] == [("acme", "read")]
    assert _api(srv, "DELETE", f"{members}/carol", alice.token).status == 200
    assert srv.get("/api/models/acme/model", token=carol.token).status == 404
    assert sorted(m["user"] for m in _api(srv, "GET", members, alice.token).json()) == ["alice", "bob"]
    assert _api(srv, "PUT", f"{members}/bob", alice.token, {"role": "write"}).status == 200

    # The audit log holds each change with who made it, with which token and from where; `cairn audit` filters
    # it (and its output, like every log, holds no token's text: the watch checks it).
    events = _json_lines(srv.cli("audit", "--json", "--limit", "1000").stdout)
    seen = {(e["actor"], e["action"], e["target"]) for e in events}
    for want in [("alice", "repo.create", "acme/model"), ("bob", "commit", "acme/model"),
                 ("alice", "repo.settings", "acme/model"), ("alice", "repo.move", "acme/bobs"),
                 ("alice", "repo.delete", "acme/moved"), ("alice", "member.set", "member bob"),
                 ("alice", "member.remove", "member carol")]:
        assert want in seen, (want, sorted(seen))
    assert all(e["client"] and len(e["token_id"]) == 16 for e in events if not e["actor"].startswith("cli:"))
    assert ("alice", "repo.create", "acme/model") not in {
        (e["actor"], e["action"], e["target"]) for e in _json_lines(srv.cli("audit", "--json", "--user", "bob").stdout)}
    assert "org.create" in srv.cli("audit", "--ns", "acme").stdout
    # So are the write attempts refused: the reader's upload, a stranger's create, the writer's membership change.
    refused = {(e["actor"], e["target"]) for e in events if e["action"] == "access.refused"}
    assert ("bob", f"{members}/carol") in refused and ("dave", "/api/repos/create") in refused, refused
    assert any(a == "carol" and t.startswith("/api/models/acme/model/") for a, t in refused), refused
    # fsck reads the people too: five accounts, the two members left, the tokens; nothing damaged.
    checked = json.loads(srv.cli("fsck", "--json").stdout.strip().splitlines()[-1])
    assert not checked["damaged"] and checked["people"]["findings"] == [], checked["people"]
    assert (checked["people"]["accounts"], checked["people"]["members"]) == (5, 2), checked["people"]

    # Git reads by the same rules: the reader clones, the stranger is told nothing is there.
    url = srv.url.replace("http://", "http://user:{}@") + "/acme/model"
    ok = subprocess.run(["git", "clone", "-q", url.format(bob.token), str(tmp_path / "clone")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run(["git", "clone", "-q", url.format(dave.token), str(tmp_path / "no")],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "not found" in refused.stderr.lower()


@PEOPLE
def test_a_fine_grained_token_acts_only_where_it_reaches(server, hub_py, tmp_path):
    srv = server()
    srv.cli("user", "create", "bob")
    srv.cli("org", "create", "acme")
    srv.cli("org", "add", "acme", "bob", "write")
    owner = Hub(hub_py, tmp_path / "owner", srv, _token(srv, "bob", "write"))
    owner.run('api.create_repo("acme/model", private=True); api.create_repo("acme/other", private=True)')
    owner.run('api.create_repo("bob/mine", private=True)')
    fine = Hub(hub_py, tmp_path / "fine", srv,
               _token(srv, "bob", "fineGrained", "--grant", "w acme/model", "--grant", "r bob/mine"))
    fine.run('api.upload_file(path_or_fileobj=b"one", path_in_repo="a.txt", repo_id="acme/model")')
    assert fine.run('result = api.list_repo_files("bob/mine")') == [".gitattributes"]
    assert fine.fails('api.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id="bob/mine")').status == 403
    assert fine.fails('api.list_repo_files("acme/other")').kind == "RepositoryNotFoundError"
    assert fine.fails('api.create_repo("bob/new")').status == 403
    assert fine.fails('api.create_repo("acme/new")').status == 403
    assert fine.fails('api.delete_repo("acme/other")').kind == "RepositoryNotFoundError"
    # Never beyond the user's rights: a grant on an organization bob only reads writes nothing there.
    srv.cli("org", "role", "acme", "bob", "read")
    _refused_within(lambda: _api(srv, "POST", "/api/models/acme/model/commit/main", fine.token,
                                 {}).status == 403, 10)


@PEOPLE
def test_a_person_manages_their_own_tokens_through_the_api(server):
    srv = server()
    srv.cli("user", "create", "bob")
    srv.cli("user", "create", "eve")
    write = _token(srv, "bob", "write")
    read = _token(srv, "bob", "read")
    eves = _token(srv, "eve", "write")

    made = _api(srv, "POST", "/api/settings/tokens", write, {"name": "script", "role": "read", "expiresIn": 3600})
    assert made.status == 200, made.body
    new = made.json()
    WATCH.add_secret("bob's token made through the API", new["token"])
    assert new["token"].startswith("cairn_" + new["id"]) and new["role"] == "read" and new["lastUsedAt"] is None
    assert _whoami_status(srv, new["token"]) == 200
    listed = _api(srv, "GET", "/api/settings/tokens", write).json()
    assert {t["name"] for t in listed} == {"bob-write", "bob-read", "script"}
    assert all("token" not in t for t in listed) and new["token"][23:] not in json.dumps(listed)
    fine = _api(srv, "POST", "/api/settings/tokens", write,
                {"name": "ci", "role": "fineGrained", "scoped": [{"scope": "bob/model", "permission": "write"}]})
    assert fine.status == 200 and fine.json()["scoped"] == [{"scope": "bob/model", "permission": "write"}]
    WATCH.add_secret("bob's fine-grained token made through the API", fine.json()["token"])

    refusals = [
        (read, {"name": "x", "role": "write"}, 403),                    # a read token makes only readers
        (read, {"name": "x", "role": "fineGrained", "scoped": [{"scope": "bob", "permission": "write"}]}, 403),
        (write, {"name": "x", "role": "read", "expiresIn": 400 * 86400}, 400),  # never outlives its maker
        (write, {"name": "x", "role": "read", "expiresIn": 0}, 400),
        (write, {"name": "x\u001b[2J", "role": "read"}, 400),
        (write, {"name": "x", "role": "owner"}, 400),
        (write, {"name": "x", "role": "fineGrained", "scoped": [{"scope": "a/b/c", "permission": "write"}]}, 400),
        (fine.json()["token"], {"name": "x", "role": "read"}, 403),  # a fine-grained token manages none
        (srv.token("bob", write=True), {"name": "x", "role": "read"}, 403),  # a scope token is nobody's
        (None, {"name": "x", "role": "read"}, 401),
    ]
    before = len(_api(srv, "GET", "/api/settings/tokens", write).json())
    for token, body, status in refusals:
        r = _api(srv, "POST", "/api/settings/tokens", token, body)
        assert r.status == status, (body, r.status, r.body)
    assert len(_api(srv, "GET", "/api/settings/tokens", write).json()) == before

    # Another person's token is not found; one's own is revoked, and this node refuses it at once.
    assert _api(srv, "DELETE", f"/api/settings/tokens/{eves[6:22]}", write).status == 404
    assert _whoami_status(srv, eves) == 200
    gone = _api(srv, "DELETE", f"/api/settings/tokens/{new['id']}", write)
    assert gone.status == 200 and gone.json() == {"id": new["id"], "revoked": True}
    assert _whoami_status(srv, new["token"]) == 401
    assert next(t for t in _api(srv, "GET", "/api/settings/tokens", write).json()
                if t["id"] == new["id"])["revokedAt"] is not None
