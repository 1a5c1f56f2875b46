"""A local OpenAI-compatible chat server, for the real `ChatOpenAI` client in tests and benchmarks.

It answers `POST /v1/chat/completions` as the OpenAI API does: a JSON completion, or SSE chunks when the request
sets `stream` (ending with a usage chunk when `stream_options.include_usage` asks for one). What the scripted
reply holds is sent the way the request asked for it: as a tool call when the request forces a tool, as JSON
content for `response_format` json_schema / json_object, as text otherwise. Usage counts tokens with tiktoken.

    with OpenAIServer(lambda request: Reply.json({"score": 0.9})) as server:
        ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model")

Every request is recorded (body, authorization header, when it started and ended). `methods` lists the
structured-output methods the server accepts (others get HTTP 400, like a server without them); `latency` is a
fixed delay per call. Faults a reply can script: `Reply.never()` never answers (until the server stops),
`Reply.drip(...)` sends its response one byte a second, `Reply.fail(429, retry_after="1")` adds Retry-After;
any text (a 2 MB reply, 2,000 nested brackets) is `Reply.content(text)`.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from selfcrag.prompts.tokens import count_tokens

ALL_METHODS = ("json_schema", "function_calling", "json_mode")


@dataclass
class Request:
    body: dict[str, Any]
    started: float = 0.0
    ended: float = 0.0
    status: int = 0
    authorization: str = ""  # the Authorization header: which key reached this server

    @property
    def method(self) -> str:
        """How the request asks for structure: json_schema, function_calling, json_mode, or text."""
        if self.body.get("tools"):
            return "function_calling"
        kind = (self.body.get("response_format") or {}).get("type")
        return {"json_schema": "json_schema", "json_object": "json_mode"}.get(kind, "text")

    @property
    def schema(self) -> str:
        """The name of the requested schema or tool, "" for a plain request."""
        if self.body.get("tools"):
            return self.body["tools"][0]["function"]["name"]
        return ((self.body.get("response_format") or {}).get("json_schema") or {}).get("name", "")

    def _texts(self, role: str) -> list[str]:
        return [_content(m) for m in self.body.get("messages", []) if m.get("role") == role]

    @property
    def system(self) -> str:
        return "\n".join(self._texts("system"))

    @property
    def user(self) -> str:
        """The last user message: the one with this call's evidence and question."""
        return (self._texts("user") or [""])[-1]

    @property
    def prompt_tokens(self) -> int:
        messages = self.body.get("messages", [])
        schema = self.body.get("tools") or self.body.get("response_format") or ""
        return sum(count_tokens(_content(m)) + 4 for m in messages) + count_tokens(json.dumps(schema) if schema else "")


def _content(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return "".join(p.get("text", "") for p in content) if isinstance(content, list) else str(content)


@dataclass
class Reply:
    """What the scripted model says: `data` (sent as a tool call or JSON content, as the request asked), `text`
    (sent as content whatever was asked: how to script a malformed reply), or an HTTP error."""

    data: Any = None
    text: str | None = None
    status: int = 200
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    silent: bool = False  # never answer: hold the connection until the server stops
    byte_every: float = 0.0  # > 0: send the response one byte per this many seconds (a per-read timeout never fires)
    # The first token's top alternatives as (token, probability), sent as the choice's logprobs when the request
    # asked for them (a one-word grader reads P(yes) from them)
    first_token: list[tuple[str, float]] = field(default_factory=list)
    completion_tokens: int = field(default=0, init=False)

    @classmethod
    def json(cls, data: Any) -> Reply:
        return cls(data=data)

    @classmethod
    def content(cls, text: str) -> Reply:
        return cls(text=text)

    @classmethod
    def fail(cls, status: int, message: str = "scripted failure", retry_after: str | None = None) -> Reply:
        return cls(status=status, error=message, headers={"Retry-After": retry_after} if retry_after else {})

    @classmethod
    def never(cls) -> Reply:
        return cls(silent=True)

    @classmethod
    def drip(cls, reply: Reply, seconds: float = 1.0) -> Reply:
        """`reply`, sent one byte every `seconds`."""
        reply.byte_every = seconds
        return reply


Responder = Callable[[Request], Reply]


class OpenAIServer:
    def __init__(self, responder: Responder, latency: float = 0.0, methods: tuple[str, ...] = ALL_METHODS) -> None:
        self.responder = responder
        self.latency = latency
        self.methods = methods
        self.requests: list[Request] = []
        self.completion_tokens = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()  # ends silent and dripping replies when the server stops
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def asking(self, text: str) -> list[Request]:
        """The requests whose system prompt contains `text`."""
        return [r for r in self.requests if text in r.system]

    @property
    def tokens(self) -> int:
        """Prompt + completion tokens of the requests answered (a rejected request costs nothing)."""
        return sum(r.prompt_tokens for r in self.requests if r.status == 200) + self.completion_tokens

    def _answer(self, request: Request) -> tuple[int, dict[str, Any] | None, Reply]:
        """Status, the assistant message (None on an error) and the scripted reply."""
        if self.latency:
            time.sleep(self.latency)
        if request.method not in (*self.methods, "text"):
            return 400, None, Reply.fail(400, f"this server does not support {request.method}")
        try:
            reply = self.responder(request)
        except Exception as exc:  # a responder that breaks is a server error, as it would be for a real server
            return 500, None, Reply.fail(500, f"{type(exc).__name__}: {exc}")
        if reply.status != 200:
            return reply.status, None, reply
        if request.method == "function_calling" and reply.text is None:
            arguments = json.dumps(reply.data)
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": request.schema, "arguments": arguments}}]}
            reply.completion_tokens = count_tokens(arguments)
        else:
            text = reply.text if reply.text is not None else json.dumps(reply.data)
            message = {"role": "assistant", "content": text}
            # A megabyte reply is a fault test: an estimate keeps the server quick (tiktoken is slow on megabytes).
            reply.completion_tokens = count_tokens(text) if len(text) < 100_000 else len(text) // 4
        with self._lock:
            self.completion_tokens += reply.completion_tokens
        return 200, message, reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                self.reply = Reply()  # until the responder scripts one: no headers to add, no drip
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send_json(404, {"error": {"message": "not found"}})
                    return
                request = Request(body, started=time.monotonic(), authorization=self.headers.get("Authorization", ""))
                with server._lock:
                    server.requests.append(request)
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    status, message, reply = server._answer(request)
                    request.status = status
                    self.reply = reply
                    if reply.silent:
                        server._stop.wait()
                        self.close_connection = True
                        return
                    if message is None:
                        self._send_json(status, {"error": {"message": reply.error, "type": "invalid_request_error"
                                                           if status == 400 else "server_error"}})  # fmt: skip
                    elif body.get("stream"):
                        self._send_stream(body, message, request.prompt_tokens, reply.completion_tokens)
                    else:
                        usage = _usage(request.prompt_tokens, reply.completion_tokens)
                        finish = "tool_calls" if message.get("tool_calls") else "stop"
                        choice = {"index": 0, "message": message, "finish_reason": finish}
                        if reply.first_token and body.get("logprobs"):
                            choice["logprobs"] = _logprobs(reply.first_token, int(body.get("top_logprobs") or 1))
                        self._send_json(200, {**_envelope(body, "chat.completion"), "usage": usage,
                                              "choices": [choice]})  # fmt: skip
                except (BrokenPipeError, ConnectionResetError, _Stopped):  # the client gave up, or the server stops
                    self.close_connection = True
                finally:
                    request.ended = time.monotonic()
                    with server._lock:
                        server._in_flight -= 1

            def _send_json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in self.reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self._write(data)

            def end_headers(self) -> None:
                if self.reply.byte_every:  # the status line and headers drip too
                    buffered, self._headers_buffer = b"".join(getattr(self, "_headers_buffer", [])), []
                    self._write(buffered + b"\r\n")
                    return
                super().end_headers()

            def _write(self, data: bytes) -> None:
                if not self.reply.byte_every:
                    self.wfile.write(data)
                    return
                for i in range(len(data)):
                    if server._stop.wait(self.reply.byte_every):
                        raise _Stopped
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()

            def _send_stream(self, body: dict[str, Any], message: dict[str, Any], prompt: int, completion: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")  # no length: the stream ends when the connection does
                self.end_headers()
                self.close_connection = True
                head = _envelope(body, "chat.completion.chunk")

                def event(delta: dict[str, Any], finish: str | None = None) -> None:
                    chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                    self._write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()

                event({"role": "assistant", "content": ""})
                if message.get("tool_calls"):
                    call = message["tool_calls"][0]
                    event({"tool_calls": [{"index": 0, **call}]})
                    event({}, "tool_calls")
                else:
                    for piece in re.findall(r"\s*\S+", message["content"]) or [""]:  # one token per word
                        event({"content": piece})
                    event({}, "stop")
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage_chunk = {**head, "choices": [], "usage": _usage(prompt, completion)}
                    self._write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
                self._write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler


class _Stopped(Exception):
    """The server stopped while a reply was dripping."""


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {"id": "chatcmpl-test", "object": kind, "created": int(time.time()), "model": body.get("model", "")}


def _logprobs(first_token: list[tuple[str, float]], top: int) -> dict[str, Any]:
    """OpenAI's `logprobs` of a choice: the first token (the likeliest alternative) with its `top` alternatives."""
    options = [{"token": token, "logprob": math.log(p), "bytes": None} for token, p in first_token[:top]]
    return {"content": [{**options[0], "top_logprobs": options}]}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
