"""An async web app (FastAPI) on selfcrag's threads, review queue and run records, in the store like the CLI's:

    pip install fastapi uvicorn            # both come with selfcrag's dev extra
    uvicorn examples.async_app:app --port 8000
    curl -X POST localhost:8000/threads/support-42/ask -H 'content-type: application/json' \\
         -d '{"question": "How many days do I have to return an item?"}'

Every request runs on the event loop: `aask` awaits the graph (`ainvoke` on the store's async checkpointer), so
questions on different threads run at the same time, while questions on one thread take turns (the thread's lease,
the same one `selfcrag ask --thread` holds: the app and the CLI may share a thread). Set `SELFCRAG_DATABASE_URL`
for PostgreSQL; several app processes may share it.

    POST /ask                          {"question": ..., "review": false}   a new thread
    POST /threads/{id}/ask             {"question": ..., "review": false}   the thread's next turn
    GET  /threads/{id}                 the thread's messages
    GET  /reviews                      answers awaiting review
    GET  /reviews/{id}
    POST /reviews/{id}/approve|edit|reject   {"answer": ..., "note": ...}
    GET  /monitor?since=24h            the run records' summary (pass rate, scores, decisions, latency)

A client chooses its question and whether a doubtful answer waits for review (`review`), nothing else: every other
setting is the operator's (environment, or `create_app(graph=build_graph(settings=...))`). Errors are one line in
`detail`: 409 for a thread that is busy or awaits review, 404 for an unknown review, 422 for a question refused,
503 when the store's database cannot be reached.
This sample has no authentication: put it behind yours before anyone but you can reach it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path
from pydantic import BaseModel, Field

from selfcrag import aask
from selfcrag.errors import ReviewError, SelfcragError, StoreError, ThreadBusyError
from selfcrag.store import monitor, reviews, runs
from selfcrag.threads import aresolve_review, config, persistent

ThreadId = Annotated[str, Path(min_length=1, max_length=200)]  # a client's, so bounded like every other input


class Question(BaseModel):
    question: str = Field(max_length=20_000)  # the graph's own limit (max_question_chars) gives the one-line reason
    review: bool = False  # hold a doubtful answer for a person instead of showing it


class Decision(BaseModel):
    answer: str = Field(default="", max_length=20_000)  # edit: the reviewed answer
    note: str = Field(default="", max_length=2_000)  # reject: why


def create_app(graph: Any = None) -> FastAPI:
    """The app on `graph` (default: selfcrag's, models or offline as the environment says)."""
    app = FastAPI(title="selfcrag")

    async def answer(question: Question, thread_id: str | None) -> dict[str, Any]:
        context = {"human_review": True} if question.review else None
        with _one_line():
            result = await aask(question.question, context, graph, thread_id=thread_id)
        return _public(result)

    @app.post("/ask")
    async def ask_new(question: Question) -> dict[str, Any]:
        return await answer(question, None)

    @app.post("/threads/{thread_id}/ask")
    async def ask_on(thread_id: ThreadId, question: Question) -> dict[str, Any]:
        return await answer(question, thread_id)

    @app.get("/threads/{thread_id}")
    async def thread(thread_id: ThreadId) -> dict[str, Any]:
        with _one_line():
            state = await (await asyncio.to_thread(persistent, graph)).aget_state(config(thread_id))
        return {"thread_id": thread_id, "messages": [{"type": m.type, "content": m.content}
                                                     for m in state.values.get("messages") or []]}  # fmt: skip

    @app.get("/reviews")
    async def pending() -> list[dict[str, Any]]:
        with _one_line():
            return await asyncio.to_thread(reviews.pending)

    @app.get("/reviews/{review_id}")
    async def review(review_id: ThreadId) -> dict[str, Any]:
        with _one_line():
            return await asyncio.to_thread(reviews.get, review_id)

    @app.post("/reviews/{review_id}/{action}")
    async def decide(review_id: ThreadId, action: str, decision: Decision) -> dict[str, Any]:
        with _one_line():
            result = await aresolve_review(review_id, action, answer=decision.answer, note=decision.note, graph=graph)
        return _public(result)

    @app.get("/monitor")
    async def summary(since: str = "24h") -> dict[str, Any]:
        with _one_line():
            until = time.time()
            start = until - monitor.parse_duration(since)
            return monitor.summarize(await asyncio.to_thread(runs.recent, start, until), start, until)

    return app


@contextmanager
def _one_line() -> Iterator[None]:
    """selfcrag's errors as HTTP errors with their one line: the client learns why, and nothing is lost."""
    try:
        yield
    except (SelfcragError, ValueError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        status = 409 if isinstance(exc, ThreadBusyError) else 503 if isinstance(exc, StoreError) else 422
        if isinstance(exc, ReviewError):
            status = 404 if first.startswith("no review") else 409
        raise HTTPException(status_code=status, detail=first) from None


def _public(result: dict[str, Any]) -> dict[str, Any]:
    """What a client sees of a run: the answer and how it was reached, not the message objects."""
    keep = ("answer", "citations", "decision", "confidence", "scores", "thread_id", "turn", "review", "recovered")
    return {key: result[key] for key in keep if key in result}


app = create_app()
