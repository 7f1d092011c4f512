"""Trusted publishers with a real OpenID Connect provider (Ory Hydra, oidc_provider.py) and the stock client:
an organization's admin trusts a CI job's id tokens for one repository, huggingface_hub exchanges one at
POST /oauth/token (HF_OIDC_RESOURCE, HF_OIDC_ID_TOKEN) and uploads with what it gets, and nothing more; a
token whose claims do not match, a forged one, one for another repository are refused with the OAuth error;
a revoked policy's tokens stop; the audit log holds each exchange and refusal, and no log holds a token."""

from __future__ import annotations

import base64
import json
import time

import pytest

from hub_util import Hub, hub_api as _api
from oidc_provider import OidcProvider
from servers import WATCH

BACKENDS = pytest.mark.backends("sqlite", "postgres")
CI = {"repository": "acme/ci", "ref": "refs/heads/main"}
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"


@pytest.fixture(scope="module")
def oidc(tmp_path_factory):
    provider = OidcProvider(tmp_path_factory.mktemp("hydra"))
    yield provider
    provider.stop()


def _token(srv, user: str) -> str:
    text = srv.cli("token", "create", "--user", user, "--name", f"{user}-write", "--role", "write",
                   secret_output=True).stdout.strip()
    WATCH.add_secret(f"{user}'s token", text)
    return text


def _id_token(oidc: OidcProvider, claims: dict) -> str:
    token = oidc.id_token(claims)
    WATCH.add_secret("an id token", token)
    return token


def _exchange(srv, subject_token: str, resource: str):
    return _api(srv, "POST", "/oauth/token", None, {"grant_type": EXCHANGE, "subject_token_type": ID_TOKEN,
                                                    "subject_token": subject_token, "resource": resource})


def _claims_of(jwt: str) -> dict:
    payload = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@BACKENDS
def test_a_ci_job_uploads_with_an_exchanged_id_token_and_nothing_more(server, hub_py, tmp_path, oidc, backend):
    srv = server(env={"CAIRN_PEOPLE_REFRESH": "1"})
    # On PostgreSQL a second node shares the index: a policy made through one is trusted by both.
    other = server(env={"CAIRN_PEOPLE_REFRESH": "1"}, data_dir=srv.data_dir) if backend == "postgres" else srv
    for user in ("alice", "bob"):
        srv.cli("user", "create", user)
    srv.cli("org", "create", "acme")
    srv.cli("org", "add", "acme", "alice", "admin")
    srv.cli("org", "add", "acme", "bob", "write")
    alice = Hub(hub_py, tmp_path / "alice", srv, _token(srv, "alice"))
    bob_token = _token(srv, "bob")
    alice.run('api.create_repo("acme/model", private=True); api.create_repo("acme/other", private=True)')

    # Only the namespace's admin registers a policy; the writer is told there is nothing to manage.
    policy = {"repo": "acme/model", "issuer": oidc.issuer, "audience": oidc.client_id, "claims": CI,
              "role": "write"}
    assert _api(srv, "POST", "/api/publishers/acme", bob_token, policy).status == 404
    made = _api(srv, "POST", "/api/publishers/acme", alice.token, policy)
    assert made.status == 200, made.body
    policy_id = made.json()["id"]
    listed = _api(srv, "GET", "/api/publishers/acme", alice.token).json()
    assert [(p["id"], p["repo"], p["claims"], p["role"]) for p in listed] == [(policy_id, "acme/model", CI, "write")]
    assert policy_id in srv.cli("publisher", "ls", "acme").stdout

    # The CI job: huggingface_hub exchanges the provider's id token and uploads, on either node.
    ci_env = lambda token: {"HF_OIDC_RESOURCE": "acme/model", "HF_OIDC_ID_TOKEN": token}  # noqa: E731
    ci = Hub(hub_py, tmp_path / "ci", other, None)
    good = _id_token(oidc, CI)
    ci.run('api.upload_file(path_or_fileobj=b"weights", path_in_repo="w.bin", repo_id="acme/model")',
           env=ci_env(good))
    assert alice.run('result = api.list_repo_files("acme/model")') == [".gitattributes", "w.bin"]
    assert alice.run('result = api.list_repo_commits("acme/model")[0].authors') == [f"publisher:{policy_id}"]

    # What it gets: a bearer token no longer-lived than the id token (nor an hour), for that repository only.
    answer = _exchange(srv, good, "acme/model")
    assert answer.status == 200 and answer.headers.get("cache-control") == "no-store"
    granted = answer.json()
    WATCH.add_secret("an exchanged token", granted["access_token"])
    assert granted["token_type"] == "bearer"
    assert 0 < granted["expires_in"] <= min(3600, _claims_of(good)["exp"] - int(time.time()) + 2)
    ci_token = granted["access_token"]
    scoped = Hub(hub_py, tmp_path / "scoped", other, ci_token)
    assert scoped.fails('api.upload_file(path_or_fileobj=b"x", path_in_repo="x", repo_id="acme/other")'
                        ).kind == "RepositoryNotFoundError"
    assert scoped.fails('api.update_repo_settings("acme/model", private=False)').status == 403
    assert scoped.fails('api.delete_repo("acme/model")').status == 403
    assert scoped.fails('api.create_repo("acme/new")').status == 403
    who = other.get("/api/whoami-v2", token=ci_token).json()
    assert who["name"] == f"publisher:{policy_id}"
    assert who["auth"]["accessToken"]["fineGrained"]["scoped"] == [
        {"entity": {"type": "model", "name": "acme/model"}, "permissions": ["repo.content.read", "repo.write"]}]
    assert _api(srv, "GET", "/api/publishers/acme", ci_token).status == 404
    assert _api(srv, "GET", "/api/settings/tokens", ci_token).status in (401, 403)
    assert srv.get("/v1/files", token=ci_token).status == 401, "the CAS routes take no fine-grained token"

    # Refusals, each the OAuth error the RFC names, and nothing written.
    fork = _id_token(oidc, {**CI, "ref": "refs/heads/fork"})
    refused = ci.fails('api.upload_file(path_or_fileobj=b"y", path_in_repo="y.bin", repo_id="acme/model")',
                       env=ci_env(fork))
    assert refused.status == 400, refused
    assert _exchange(srv, fork, "acme/model").json()["error"] == "invalid_target"
    assert _exchange(srv, good, "acme/other").json()["error"] == "invalid_target"
    header, payload, signature = good.split(".")
    forged_claims = {**_claims_of(good), "repository": "acme/ci"}
    forged_claims["sub"] = "someone-else"
    forged = ".".join([header, base64.urlsafe_b64encode(json.dumps(forged_claims).encode()).decode().rstrip("="),
                       signature])
    assert _exchange(srv, forged, "acme/model").json()["error"] == "invalid_request"
    assert _exchange(srv, "not-a-jwt", "acme/model").json()["error"] == "invalid_request"
    wrong_grant = _api(srv, "POST", "/oauth/token", None, {"grant_type": "password", "subject_token_type": ID_TOKEN,
                                                           "subject_token": good, "resource": "acme/model"})
    assert wrong_grant.status == 400 and wrong_grant.json()["error"] == "unsupported_grant_type"
    assert alice.run('result = api.list_repo_files("acme/model")') == [".gitattributes", "w.bin"]

    # The audit log: the policy, each exchange, the commit, the refusal of a genuine token, with who and what.
    events = _json_lines(srv.cli("audit", "--json", "--limit", "1000").stdout)
    seen = {(e["actor"], e["action"], e["target"]) for e in events}
    holder = f"publisher:{policy_id}"
    for want in [("alice", "publisher.create", f"trust policy {policy_id}"),
                 (holder, "token.exchange", "acme/model"), (holder, "commit", "acme/model"),
                 (f"oidc:{oidc.issuer}#ci-job", "token.exchange.refused", "acme/model")]:
        assert want in seen, (want, sorted(seen))

    # Revoked: no more exchanges, and the tokens already exchanged stop on every node within the refresh.
    assert _api(srv, "DELETE", f"/api/publishers/acme/{policy_id}", bob_token).status == 404
    assert _api(srv, "DELETE", f"/api/publishers/acme/{policy_id}", alice.token).json()["revoked"] is True
    assert _exchange(srv, good, "acme/model").json()["error"] == "invalid_target"
    for node in (srv, other):
        deadline = time.monotonic() + 5
        while node.get("/api/models/acme/model", token=ci_token).status != 401:
            assert time.monotonic() < deadline, "an exchanged token outlived its policy"
            time.sleep(0.1)
    assert ("alice", "publisher.revoke") in {(e["actor"], e["action"]) for e in
                                             _json_lines(srv.cli("audit", "--json").stdout)}


@pytest.mark.backends("sqlite")
def test_policies_are_checked_where_they_enter(server):
    srv = server()
    srv.cli("org", "create", "acme")
    base = ("publisher", "create", "acme", "--issuer", "https://token.actions.githubusercontent.com",
            "--audience", "https://hub.example")
    refusals = [
        ((*base,), 106, "--claim"),  # CLI11: a required option missing
        ((*base, "--claim", "novalue"), 2, "NAME=VALUE"),
        ((*base, "--claim", "repository=acme/ci", "--repo", "other/model"), 2, "namespace's"),
        (("publisher", "create", "acme", "--issuer", "http://ci.example", "--audience", "a", "--claim", "a=b"), 2,
         "https"),
        ((*base, "--claim", "repository=acme/ci", "--role", "admin"), 2, "--role admin"),
        (("publisher", "create", "nobody", "--issuer", "https://i.example", "--audience", "a", "--claim", "a=b"), 1,
         "nobody"),
        (("publisher", "revoke", "tp_0000000000000000"), 1, "not in the index"),
    ]
    for args, code, words in refusals:
        r = srv.cli(*args, expect_ok=False)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert words in r.stderr, (args, r.stderr)
    assert srv.cli("publisher", "ls").stdout.strip() == ""
    made = srv.cli(*base, "--claim", "repository=acme/ci", "--claim", "ref=refs/heads/main").stdout
    assert made.startswith("tp_") and "acme/*" in made and "repository=acme/ci ref=refs/heads/main" in made
