"""A local OpenAI-compatible embeddings server, for the real `OpenAIEmbeddings` client in tests.

It answers `POST /v1/embeddings` as the OpenAI API does, with deterministic vectors: a hashed bag of the
text's keyword tokens (selfcrag's own tokenisation, so Chinese and English both work), L2-normalised. Texts
sharing words are similar, others orthogonal. Vectors go back as floats, or base64 when the request asks for
it (the openai client does by default).

    with EmbeddingsServer() as server:
        OpenAIEmbeddings(model="test-embed", base_url=server.base_url, api_key="test")

Every request body is recorded in `requests`; `model` is echoed back, and `dim` sets the vector size.
"""

from __future__ import annotations

import base64
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from selfcrag.text.text import keyword_tokens


def vector(text: str, dim: int) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    for token in keyword_tokens(text):
        v[zlib.crc32(token.encode()) % dim] += 1.0
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


class EmbeddingsServer:
    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append(body)
                if self.path.rstrip("/") != "/v1/embeddings":
                    return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                texts = body.get("input")
                texts = [texts] if isinstance(texts, str) else texts
                if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                    return self._send(400, {"error": {"message": "input must be text", "type": "invalid_request"}})
                data = []
                for index, text in enumerate(texts):
                    v = vector(text, server.dim)
                    encoded: Any = (base64.b64encode(v.astype("<f4").tobytes()).decode()
                                    if body.get("encoding_format") == "base64" else v.tolist())
                    data.append({"object": "embedding", "index": index, "embedding": encoded})
                tokens = sum(len(keyword_tokens(t)) for t in texts)
                self._send(200, {"object": "list", "data": data, "model": body.get("model", ""),
                                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def texts(self) -> list[str]:
        """Every text the server embedded, in order."""
        out: list[str] = []
        for body in self.requests:
            texts = body.get("input")
            out += [texts] if isinstance(texts, str) else list(texts or [])
        return out

    def __enter__(self) -> EmbeddingsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
