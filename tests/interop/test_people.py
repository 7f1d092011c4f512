"""People on the command line (`cairn user`, `cairn org`, `cairn token create|ls|revoke`), on SQLite and on
PostgreSQL: accounts share one space of names, members have roles, a token's text is printed once and the
index keeps only the SHA-256 of its secret (read back from the database itself), listings never show it, and
bad input is refused with a clear message and changes nothing."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

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
