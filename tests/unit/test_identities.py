"""The operator's identity file and the door of selfcrag/auth.py, in process (the real server:
tests/integration/test_server_auth.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langgraph_sdk import Auth
from starlette.datastructures import QueryParams

from selfcrag import auth, setting_names
from selfcrag.errors import IdentityError
from selfcrag.identities import Identity, IdentityFile, add, hashed, main


def test_a_token_is_stored_only_as_its_hash_and_names_its_identity(tmp_path: Path) -> None:
    path = tmp_path / "ids.json"
    token = add(path, "alice", "asker")
    assert token not in path.read_text() and hashed(token) in path.read_text()
    assert path.stat().st_mode & 0o077 == 0  # the owner's alone
    assert IdentityFile(path).lookup(token) == Identity("alice", "asker")
    assert IdentityFile(path).lookup(token + "x") is None
    assert Identity("carol", "reviewer").permissions == ["asker", "reviewer"]


def test_the_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "ids.json"
    add(path, "alice", "asker")
    known = IdentityFile(path)
    later = add(path, "bob", "reviewer")
    assert known.lookup(later) == Identity("bob", "reviewer")


@pytest.mark.parametrize("text", ["not json", "[]", '{"tokens": [{"identity": "a", "role": "asker"}]}',
                                  '{"tokens": [{"sha256": "' + "0" * 64 + '", "identity": "a", "role": "admin"}]}'])
def test_a_bad_file_is_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "ids.json"
    path.write_text(text)
    with pytest.raises(IdentityError) as caught:
        IdentityFile(path).lookup("x")
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_the_command_prints_the_token_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ids.json"
    assert main(["add", "carol", "reviewer", "--file", str(path)]) == 0
    token = capsys.readouterr().out.strip()
    assert json.loads(path.read_text())["tokens"][0] == {"sha256": hashed(token), "identity": "carol",
                                                         "role": "reviewer"}  # fmt: skip
    assert main(["add", " ", "asker", "--file", str(path)]) == 2


def test_an_identity_may_carry_a_tenant_and_keeps_it_when_others_are_added(tmp_path: Path) -> None:
    path = tmp_path / "ids.json"
    assert main(["add", "alice", "asker", "--tenant", "acme", "--file", str(path)]) == 0
    add(path, "bob", "asker")  # the file is written again: alice's tenant stays
    (alice, bob) = json.loads(path.read_text())["tokens"]
    assert alice["tenant"] == "acme" and "tenant" not in bob
    token = add(path, "carol", "reviewer", tenant=" globex ")
    assert IdentityFile(path).lookup(token) == Identity("carol", "reviewer", "globex")
    path.write_text(json.dumps({"tokens": [{**alice, "tenant": 7}]}))
    with pytest.raises(IdentityError, match="tenant must be a string"):
        IdentityFile(path).lookup(token)


def test_list_revoke_and_rotate_from_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ids.json"
    file = ["--file", str(path)]
    alice, bob = add(path, "alice", "asker"), add(path, "bob", "reviewer")
    server = IdentityFile(path)
    assert main(["list", *file]) == 0
    assert capsys.readouterr().out.splitlines() == [f"alice\tasker\t{hashed(alice)[:12]}",
                                                    f"bob\treviewer\t{hashed(bob)[:12]}"]

    assert main(["rotate", "alice", *file]) == 0
    new = capsys.readouterr().out.strip()
    assert server.lookup(alice) is None and server.lookup(new) == Identity("alice", "asker")

    assert main(["revoke", "bob", *file]) == 0
    assert capsys.readouterr().err == "revoked 1 token of bob\n"
    assert server.lookup(bob) is None and server.lookup(new) == Identity("alice", "asker")

    assert main(["revoke", "bob", *file]) == 2
    assert capsys.readouterr().err == (f"error: {path}: no identity 'bob' (python -m selfcrag.identities list "
                                       "shows them)\n")
    add(path, "alice", "operator")
    assert main(["rotate", "alice", *file]) == 2
    assert "tokens of several roles or tenants" in capsys.readouterr().err
    assert main(["list", "--file", str(tmp_path / "none.json")]) == 2


def door(token: str = "", path: str = "/threads", length: int = 2, query: str = "") -> dict[str, object]:
    headers = {b"authorization": f"Bearer {token}".encode(), b"content-length": str(length).encode()}
    answer = auth.authenticate(headers=headers, path=path, method="POST", query_params=QueryParams(query))
    return asyncio.run(answer)  # type: ignore[no-any-return]


DEV = {"LANGSMITH_LANGGRAPH_API_VARIANT": "local_dev", "LANGGRAPH_RUNTIME_EDITION": "inmem"}


@pytest.mark.parametrize(("marks", "url", "developing"), [
    (DEV, "http://127.0.0.1:2024", True),
    (DEV, "http://localhost:8123", True),
    (DEV, "http://[::1]:2024", True),
    (DEV, "http://0.0.0.0:2024", False),  # `langgraph dev --host 0.0.0.0`: the network reaches it
    (DEV, "http://192.168.1.5:2024", False),
    (DEV, "https://wild-fox.trycloudflare.com", False),  # `langgraph dev --tunnel`
    ({**DEV, "LANGGRAPH_RUNTIME_EDITION": "postgres"}, "http://127.0.0.1:2024", False),
    ({"LANGGRAPH_RUNTIME_EDITION": "inmem"}, "http://127.0.0.1:2024", False),  # not run by `langgraph dev`
    ({}, "", False),
])  # fmt: skip
def test_only_langgraph_dev_on_loopback_runs_without_identities(
    monkeypatch: pytest.MonkeyPatch, marks: dict[str, str], url: str, developing: bool
) -> None:
    for name in ("SELFCRAG_AUTH_FILE", "LANGSMITH_LANGGRAPH_API_VARIANT", "LANGGRAPH_RUNTIME_EDITION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**marks, "LANGGRAPH_API_URL": url}.items():
        monkeypatch.setenv(name, value)
    if developing:
        assert door()["identity"] == "developer" and door("anything")["role"] == "operator"
        return
    with pytest.raises(Auth.exceptions.HTTPException) as caught:
        door("anything")
    assert caught.value.status_code == 401
    assert caught.value.detail == (
        "this server has no identities: set SELFCRAG_AUTH_FILE to an identity file (add a token: python -m "
        "selfcrag.identities add NAME ROLE); only `langgraph dev` on a loopback address runs without one")


def test_the_loopback_dev_server_says_once_that_everyone_is_the_developer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("SELFCRAG_AUTH_FILE", raising=False)
    for name, value in {**DEV, "LANGGRAPH_API_URL": "http://127.0.0.1:2024"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(setting_names, "_said", set())
    with caplog.at_level("WARNING", logger="selfcrag.settings"):
        door(), door(), door("x")
    assert [r.getMessage() for r in caplog.records] == [
        "no identity file (SELFCRAG_AUTH_FILE) on `langgraph dev` at http://127.0.0.1:2024: only this machine "
        "reaches it, so every request is the operator `developer`; a server others reach needs identities "
        "(docs/deployment.md)"]


def test_identities_are_used_on_a_loopback_dev_server_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {**DEV, "LANGGRAPH_API_URL": "http://127.0.0.1:2024"}.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "ids.json"
    token = add(path, "alice", "asker")
    monkeypatch.setenv("SELFCRAG_AUTH_FILE", str(path))  # identities win over the developer
    assert door(token)["identity"] == "alice"
    with pytest.raises(Auth.exceptions.HTTPException):
        door("")
    with pytest.raises(Auth.exceptions.HTTPException) as denied:
        door(token, path="/threads/x/history")
    assert denied.value.detail == "asker alice may not POST /threads/x/history"
    with pytest.raises(Auth.exceptions.HTTPException) as joining:  # a join serves a stopped run's values
        door(token, path="/threads/x/runs/y/join")
    assert joining.value.detail == "asker alice may not POST /threads/x/runs/y/join"
    reviewer = add(path, "carol", "reviewer")
    with pytest.raises(Auth.exceptions.HTTPException) as cancelling:  # a disconnect would stop the run halfway
        door(reviewer, path="/threads/x/runs/y/join", query="cancel_on_disconnect=true")
    assert cancelling.value.detail.startswith("only the operator cancels a run")
    with pytest.raises(Auth.exceptions.HTTPException) as big:
        door(token, length=1_000_001)
    assert big.value.detail == "the request body has 1,000,001 bytes; at most 1,000,000 (SELFCRAG_MAX_REQUEST_BYTES)"


class Assistants:
    def __init__(self, context: dict[str, object] | None) -> None:
        self.context = context

    async def get(self, assistant_id: str) -> dict[str, object]:
        if self.context is None:
            raise ConnectionError("the server cannot be reached")
        return {"assistant_id": assistant_id, "context": self.context}


class Client:
    def __init__(self, context: dict[str, object] | None) -> None:
        self.assistants = Assistants(context)


@pytest.mark.parametrize(("operator", "assistant", "required"), [
    ("", {}, False),
    ("1", {}, True),
    ("", {"human_review": True}, True),  # the operator turned review on for this assistant
    ("", None, True),  # its assistant cannot be read: as if review were on
])  # fmt: skip
def test_review_is_required_by_the_operators_environment_or_the_runs_assistant(
    monkeypatch: pytest.MonkeyPatch, operator: str, assistant: dict[str, object] | None, required: bool
) -> None:
    monkeypatch.setenv("SELFCRAG_HUMAN_REVIEW", operator)
    monkeypatch.setattr(auth, "get_client", lambda: Client(assistant))
    assert auth.review_required(asyncio.run(auth.assistant_context("a1"))) is required
