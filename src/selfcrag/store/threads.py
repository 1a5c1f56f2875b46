"""Conversations that persist: a question asked on a thread continues it, from any process, through the store's
checkpointer. A run that pauses for review is put in the review queue, and its output says so."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage

from selfcrag.state import OutputState
from selfcrag.store import reviews
from selfcrag.store.checkpoint import checkpointer

OUTPUT = frozenset(OutputState.__annotations__)


class ThreadBusyError(ValueError):
    """The thread holds an answer awaiting review: a new question would discard it."""


def new_thread_id() -> str:
    return uuid.uuid4().hex


def persistent(compiled_graph: Any = None, settings: Any = None) -> Any:
    """A graph whose threads live in the store: `compiled_graph` with the store's checkpointer unless it has its
    own, else `build_graph(settings=settings)` with it."""
    if compiled_graph is None and settings is None:
        from selfcrag.graph import graph as compiled_graph  # the default graph; a copy gets the checkpointer
    if compiled_graph is not None:
        return compiled_graph if compiled_graph.checkpointer else compiled_graph.copy({"checkpointer": checkpointer()})
    from selfcrag.graph import build_graph

    return build_graph(settings=settings, checkpointer=checkpointer())


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def paused(graph: Any, thread_id: str) -> list[Any]:
    """The thread's pending interrupts (empty when it is not waiting for a person)."""
    return list(graph.get_state(config(thread_id)).interrupts)


def check_idle(graph: Any, thread_id: str) -> None:
    """Refuse a new question on a thread paused for review (it would drop the review), with the way out."""
    if paused(graph, thread_id):
        raise ThreadBusyError(f"thread {thread_id} has an answer awaiting review: `selfcrag review show {thread_id}`, "
                              "then approve, edit or reject it before asking on this thread again")


def turn_input(question: str) -> dict[str, Any]:
    """The question as the thread's next user message: the history keeps both sides, so the generator sees the
    earlier turns and the consistency check compares with earlier answers."""
    return {"messages": [HumanMessage(question)]}


def finish(graph: Any, thread_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """The run's output with `thread_id` and `turn` (1 for the thread's first question); a paused run is queued
    for review and gets `review: {"id", "status": "pending"}`."""
    output = {k: v for k, v in result.items() if k in OUTPUT}  # a streamed run's last values hold working keys
    output |= {"thread_id": thread_id, "turn": sum(_is_user(m) for m in output.get("messages") or [])}
    if interrupts := paused(graph, thread_id):
        reviews.enqueue(thread_id, interrupts[0].value)
        output["review"] = {"id": thread_id, "status": "pending"}
    return output


def ask_in_thread(question: str, thread_id: str | None = None, context: Any = None, compiled_graph: Any = None,
                  settings: Any = None) -> dict[str, Any]:  # fmt: skip
    """Ask on `thread_id` (a new thread when None); see `finish` for what the output adds."""
    graph = persistent(compiled_graph, settings)
    thread_id = thread_id or new_thread_id()
    check_idle(graph, thread_id)
    result = graph.invoke(turn_input(question), config(thread_id), context=context)
    return finish(graph, thread_id, dict(result))


def _is_user(message: Any) -> bool:
    kind = message.get("type") or message.get("role") if isinstance(message, dict) else message.type
    return kind in ("human", "user")
