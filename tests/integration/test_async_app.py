"""The async web app in examples/async_app.py, on SQLite and on a real PostgreSQL: threads, the review queue and
the run records over HTTP, served by uvicorn as its docstring says; and, through the real ChatOpenAI client
against a slow model server, questions on one thread taking turns while a question on another runs meanwhile."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI
from support.langgraph_server import ROOT, free_port
from support.openai_server import OpenAIServer, Request
from support.replies import Plausible, question_in
from test_review_queue import AWAITS, DRAFT, WHO

from selfcrag import build_graph, model_components

sys.path.insert(0, str(ROOT))
from examples.async_app import create_app  # noqa: E402 - the example, imported as uvicorn imports it

pytestmark = pytest.mark.system  # an async app served by uvicorn, on both stores

GIFT = "Can I use a gift card to pay for shipping?"
RETURNS = "How many days do I have to return an item?"
REFUNDS = "How long does a refund take to reach my account?"


@pytest.fixture
def served(store_url: str) -> Iterator[str]:
    """`uvicorn examples.async_app:app` on a free port, on this test's store; its URL once it answers."""
    port = free_port()
    env = {**os.environ, "SELFCRAG_DATABASE_URL": store_url, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "examples.async_app:app", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(f"{url}/reviews", timeout=5)
            break
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"the app did not start: {proc.communicate()[0][-2000:]}")
            time.sleep(0.2)
    try:
        yield url
        proc.send_signal(signal.SIGTERM)  # uvicorn's graceful stop: the loop ends, the store's async savers close
        out, _ = proc.communicate(timeout=30)
        # Ended within the timeout, cleanly (uvicorn re-raises the signal once it has shut down).
        assert proc.returncode in (0, -signal.SIGTERM) and "Finished server process" in out, out[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_the_app_runs_threads_reviews_and_records_over_http(served):
    with httpx.Client(base_url=served, timeout=300) as client:
        one = client.post("/threads/support-42/ask", json={"question": RETURNS}).json()
        two = client.post("/threads/support-42/ask", json={"question": REFUNDS}).json()
        assert (one["thread_id"], one["turn"], two["turn"]) == ("support-42", 1, 2) and "30 days" in one["answer"]
        messages = client.get("/threads/support-42").json()["messages"]
        assert [(m["type"], m["content"]) for m in messages] == [("human", RETURNS), ("ai", one["answer"]),
                                                                 ("human", REFUNDS), ("ai", two["answer"])]

        held = client.post("/ask", json={"question": WHO, "review": True}).json()
        assert held["decision"] == "human_review" and held["answer"].startswith(AWAITS)
        review = held["review"]["id"]
        assert held["review"] == {"id": held["thread_id"], "status": "pending"}
        (item,) = client.get("/reviews").json()
        assert (item["id"], item["question"], item["draft"]) == (review, WHO, DRAFT)
        assert client.get(f"/reviews/{review}").json()["status"] == "pending"
        busy = client.post(f"/threads/{review}/ask", json={"question": RETURNS})
        assert busy.status_code == 409 and "awaiting review" in busy.json()["detail"]
        approved = client.post(f"/reviews/{review}/approve", json={}).json()
        assert (approved["answer"], approved["decision"]) == (DRAFT, "answer") and client.get("/reviews").json() == []

        again = client.post(f"/reviews/{review}/approve", json={})
        assert again.status_code == 409 and again.json()["detail"] == f"review {review} is approved, not pending"
        unknown = client.post("/reviews/nope/approve", json={})
        assert unknown.status_code == 404 and unknown.json()["detail"].startswith("no review 'nope'")
        long = client.post("/threads/support-42/ask", json={"question": "x" * 5000})
        assert long.status_code == 422 and "at most 4,000 are accepted" in long.json()["detail"]
        assert "\n" not in long.json()["detail"]
        assert client.post(f"/threads/{'t' * 300}/ask", json={"question": RETURNS}).status_code == 422

        summary = client.get("/monitor", params={"since": "1h"}).json()
        # Three runs: the refused question never ran; the reviewed one is recorded with the reviewer's decision.
        assert summary["runs"] == 3 and sum(summary["decisions"].values()) == 3 and "human_review" not in summary[
            "decisions"]  # fmt: skip
        assert client.get("/monitor", params={"since": "soon"}).status_code == 422


def turn_of(server: OpenAIServer, question: str) -> list[Request]:
    """The model calls of the run that answered `question`."""
    calls = [r for r in server.requests if question_in(r.user) == question]
    assert calls, f"no model call for {question!r}"
    return calls


async def test_one_threads_questions_take_turns_while_another_threads_run_meanwhile(store_url):
    with OpenAIServer(Plausible().responder(), latency=0.3) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, timeout=60)
        app = create_app(build_graph(model_components(llm)))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                     timeout=300) as client:  # fmt: skip

            async def ask(thread: str, question: str) -> dict[str, Any]:
                reply = await client.post(f"/threads/{thread}/ask", json={"question": question})
                assert reply.status_code == 200, reply.text
                return dict(reply.json())

            a1, a2, b = await asyncio.gather(ask("A", RETURNS), ask("A", REFUNDS), ask("B", GIFT))
        assert sorted((a1["turn"], a2["turn"])) == [1, 2] and b["turn"] == 1
        first, second = (RETURNS, REFUNDS) if a1["turn"] == 1 else (REFUNDS, RETURNS)
        # Thread A: the second turn's first model call starts after the first turn's last one ended.
        assert max(r.ended for r in turn_of(server, first)) <= min(r.started for r in turn_of(server, second))
        # Thread B ran meanwhile: its calls overlap A's first turn (on a blocked loop they would not).
        a_calls, b_calls = turn_of(server, first), turn_of(server, GIFT)
        assert min(r.started for r in b_calls) < max(r.ended for r in a_calls)
        assert min(r.started for r in a_calls) < max(r.ended for r in b_calls)
        assert server.max_in_flight >= 2
