"""A key never reaches a run's trace, its output or a log line, even when the server echoes it: the real
`ChatOpenAI` client against the local OpenAI-compatible server answering 401 with a body that quotes the key it
was sent (as OpenAI's own "Incorrect API key provided: sk-..." does) and the Authorization header."""

from __future__ import annotations

import json
import logging

from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request
from support.shelf import Shelf

from selfcrag import build_graph
from selfcrag.backend import model_components
from selfcrag.text.redaction import redact

QUESTION = "How many days do I have to return an item?"
SHAPED_KEY = "sk-proj-Zq81mPx0aT5vLw2EoYb7Nc4U"  # what OpenAI's keys look like
PLAIN_KEY = "operator-secret-on-this-deployment"  # a key of no known shape: found because it is configured


def echo_the_key(request: Request) -> Reply:
    key = request.authorization.removeprefix("Bearer ")
    return Reply.fail(401, f"Incorrect API key provided: {key}. You sent header Authorization: "
                      f"{request.authorization}")  # fmt: skip


def everything_said(result: dict, caplog) -> str:  # noqa: ANN001
    return json.dumps(result, default=str) + "\n".join(r.getMessage() for r in caplog.records)


def test_a_key_echoed_by_the_server_is_redacted_from_the_trace_and_logs(caplog):
    caplog.set_level(logging.DEBUG)
    with OpenAIServer(echo_the_key) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key=SHAPED_KEY, model="test-model", max_retries=0)
        graph = build_graph(model_components(llm, retriever=Shelf()), settings={"max_retrieval_rounds": 1})
        result = graph.invoke({"question": QUESTION})
    assert server.requests and all(r.authorization == f"Bearer {SHAPED_KEY}" for r in server.requests)
    errors = [step["error"] for step in result["trace"] if step.get("error")]
    assert errors and any("AuthenticationError" in e and "Incorrect API key provided: [redacted]" in e for e in errors)
    said = everything_said(result, caplog)
    assert SHAPED_KEY not in said and SHAPED_KEY[:12] not in said


def test_a_configured_key_of_any_shape_is_redacted(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    with OpenAIServer(echo_the_key) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", PLAIN_KEY)
        components = model_components(retriever=Shelf())  # the model built from the operator's settings
        settings = {"backend": "model", "generator_model": "openai:test-model", "max_retrieval_rounds": 1}
        result = build_graph(components, settings=settings).invoke({"question": QUESTION})
    assert server.requests and {r.authorization for r in server.requests} == {f"Bearer {PLAIN_KEY}"}
    assert any("AuthenticationError" in step.get("error", "") for step in result["trace"])
    assert PLAIN_KEY not in everything_said(result, caplog)


def test_redact_keeps_ordinary_text_and_replaces_key_shapes(monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tv-configured-123456")
    text = ("Error code: 401 - invalid key sk-abcdef123456 for https://api.example.com/v1/chat/completions; "
            "header Bearer abc.def-123; token Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg== and tv-configured-123456; "
            "request 42 took 3 s")  # fmt: skip
    said = redact(text)
    for secret in ("sk-abcdef123456", "abc.def-123", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==",
                   "tv-configured-123456"):
        assert secret not in said
    assert "Error code: 401 - invalid key [redacted] for https://api.example.com/v1/chat/completions" in said
    assert said.endswith("request 42 took 3 s")
