"""The LangGraph server's own endpoints, closed to callers without a token (langgraph.json `http.app`).

LangGraph's custom auth (selfcrag/auth.py) guards threads, runs, assistants and the store, but never sees the
server's meta routes: `/info` (versions and flags), `/metrics` (request and queue counts), `/docs` and
`/openapi.json` (the API and its schemas) answer anyone, and `langgraph dev`'s in-memory runtime adds `/internal/...`
(one route empties every thread, another reads a thread raw, held drafts included) and `/deploy`. A middleware of
the app langgraph.json names wraps every route, so it closes them here:

- `/ok` and `/` (health checks) answer without a token, always;
- `/info`, `/metrics`, `/docs`, `/openapi.json` need any identity's token, unless the operator opens them:
  `SELFCRAG_OPEN_PATHS=/metrics` (comma-separated, for a scraper or a load balancer that sends no token);
- `/internal/...` and `/deploy` are the operator's and are never opened.
"""

from __future__ import annotations

import json
import os
from typing import Any

from langgraph_sdk import Auth
from starlette.applications import Starlette
from starlette.middleware import Middleware

from selfcrag.auth import caller, refuse

TOKEN_PATHS = frozenset({"/info", "/metrics", "/docs", "/openapi.json"})
OPERATOR_PATHS = ("/internal/", "/deploy")  # prefixes (and `/deploy` itself)
OPEN_VARIABLE = "SELFCRAG_OPEN_PATHS"


def open_paths() -> frozenset[str]:
    """The endpoints the operator opened, of those that may be opened."""
    named = {p.strip().rstrip("/") or "/" for p in os.environ.get(OPEN_VARIABLE, "").split(",") if p.strip()}
    return frozenset(named & TOKEN_PATHS)


def check(path: str, headers: dict[bytes, bytes]) -> None:
    """Refuse (Auth.exceptions.HTTPException) a request for a guarded endpoint without the token it needs."""
    if path in TOKEN_PATHS:
        if path not in open_paths():
            caller(headers)
    elif path == "/deploy" or path.startswith(OPERATOR_PATHS):
        who = caller(headers)
        if who.role != "operator":
            raise refuse(403, f"{who.role} {who.name} may not open {path}: the server's internal routes are the "
                              "operator's")  # fmt: skip


class ServerPaths:
    """ASGI middleware: a guarded endpoint without its token gets LangGraph's JSON error, `{"detail": ...}`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("method") != "OPTIONS":  # a browser's CORS preflight has no token
            try:
                check(scope.get("path", ""), dict(scope.get("headers") or []))
            except Auth.exceptions.HTTPException as exc:
                body = json.dumps({"detail": exc.detail}).encode()
                await send({"type": "http.response.start", "status": exc.status_code,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


app = Starlette(middleware=[Middleware(ServerPaths)])
