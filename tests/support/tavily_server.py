"""A local stand-in for Tavily's search API, for the real `tavily-python` client (`api_base_url=`).

It answers `POST /search` the way Tavily does — `{"query", "results": [{"url", "title", "content", "score"}],
"response_time"}` — checks the bearer key, records every request, and can be scripted to fail: an HTTP error
status, a reply that is not JSON, a reply slower than the client's timeout, or no reply at all.

    with TavilyTestServer(results=[...]) as server:
        TavilyWebSearch(api_key=server.api_key, api_base_url=server.url)
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TavilyTestServer:
    api_key = "test"

    def __init__(self, results: list[dict[str, Any]] | None = None) -> None:
        self.results = list(results or [])
        self.fail_status: int | None = None  # reply with this HTTP status instead of results
        self.not_json = False  # reply 200 with a body that is not JSON
        self.delay = 0.0  # seconds to wait before replying (longer than the client's timeout = a timeout)
        self.never_answers = False  # hold every request, unanswered, until the server stops
        self.requests: list[dict[str, Any]] = []  # each request's JSON body, plus its "authorization" header
        self.received: list[float] = []  # time.monotonic() when each request arrived
        self._stop = threading.Event()  # ends a delayed reply early when the server stops
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> TavilyTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _reply(self, body: dict[str, Any], authorization: str) -> tuple[int, bytes]:
        """Status and body for one search request."""
        if self.never_answers:
            self._stop.wait()
        if self.delay:
            self._stop.wait(self.delay)
        if authorization != f"Bearer {self.api_key}":
            return 401, json.dumps({"detail": {"error": "Unauthorized: missing or invalid API key."}}).encode()
        if self.fail_status is not None:
            return self.fail_status, json.dumps({"detail": {"error": f"scripted error {self.fail_status}"}}).encode()
        if self.not_json:
            return 200, b"<html>bad gateway</html>"
        results = self.results[: int(body.get("max_results") or 5)]
        return 200, json.dumps({"query": body.get("query", ""), "results": results, "response_time": 0.01}).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                if self.path.rstrip("/") != "/search":
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                authorization = self.headers.get("Authorization", "")
                server.requests.append({**body, "authorization": authorization})
                server.received.append(time.monotonic())
                status, payload = server._reply(body, authorization)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures, not traffic
                pass

        return Handler
