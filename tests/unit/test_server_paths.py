"""The server's own endpoints behind a token (selfcrag/server_paths.py), in process: the middleware around a stand-in
app that answers every path 200 (the real server: tests/integration/test_server_doors.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from selfcrag.identities import add
from selfcrag.server_paths import ServerPaths


def answered(path: str, token: str = "", method: str = "GET") -> tuple[int, str]:
    inner = Starlette(routes=[Route("/{rest:path}", lambda request: PlainTextResponse("inner"),
                                    methods=["GET", "POST", "OPTIONS"])])  # fmt: skip
    transport = httpx.ASGITransport(app=ServerPaths(inner))
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://server") as client:
            return await client.request(method, path, headers=headers)

    response = asyncio.run(call())
    return response.status_code, response.text


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "ids.json"
    found = {role: add(path, name, role) for name, role in [("alice", "asker"), ("olga", "operator")]}
    monkeypatch.setenv("SELFCRAG_AUTH_FILE", str(path))
    monkeypatch.delenv("SELFCRAG_OPEN_PATHS", raising=False)
    return found


@pytest.mark.parametrize("path", ["/info", "/metrics", "/docs", "/openapi.json"])
def test_the_servers_own_endpoints_need_a_token(tokens: dict[str, str], path: str) -> None:
    status, body = answered(path)
    assert status == 401 and "no valid token: send Authorization: Bearer <token>" in body
    assert answered(path, "forged")[0] == 401
    assert answered(path, tokens["asker"]) == (200, "inner")
    assert answered(path, method="OPTIONS") == (200, "inner")  # a browser's CORS preflight carries no token


def test_health_checks_and_langgraphs_guarded_routes_pass_through(tokens: dict[str, str]) -> None:
    for path in ("/ok", "/", "/threads", "/assistants/search", "/information"):
        assert answered(path) == (200, "inner"), path  # LangGraph's auth judges the API's own routes


@pytest.mark.parametrize("path", ["/internal/truncate", "/internal/debug/thread/x", "/deploy", "/deploy/x/stream"])
def test_the_dev_servers_internal_routes_are_the_operators(tokens: dict[str, str], path: str) -> None:
    assert answered(path, method="POST")[0] == 401
    status, body = answered(path, tokens["asker"], method="POST")
    assert status == 403 and f"asker alice may not open {path}" in body
    assert answered(path, tokens["operator"], method="POST") == (200, "inner")


def test_the_operator_opens_an_endpoint_for_a_scraper(tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELFCRAG_OPEN_PATHS", "/metrics, /internal/truncate")
    assert answered("/metrics") == (200, "inner")
    assert answered("/info")[0] == 401
    assert answered("/internal/truncate", method="POST")[0] == 401  # never opened
