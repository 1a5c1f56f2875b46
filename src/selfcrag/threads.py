"""Conversations that persist: a question asked on a thread continues it, from any process, through the store's
checkpointer. A run that pauses for review is put in the review queue, and its output says so.

A turn on a named thread holds the thread's lease (leases.py), so turns on one thread run one at a time, whichever
process asks. Before its question runs, a turn settles what the last one left: a turn a crash cut short (pending
tasks, no review) is resumed as itself, once — its answer recorded as that turn's — and a turn that fails, is
stopped (Ctrl-C, SIGTERM) or crashes again while resumed is closed with a note as its answer. Either way the new
question is answered as itself, never as the unfinished one.

Each step has an async twin (`aask_in_thread`, `aturn`, `arecover`, `aclose`, `aresolve_review`) for async apps:
the same decisions, made by the same helpers, with the graph awaited (`ainvoke`, `aget_state`: the store's async
checkpointer) and the store's short statements (lease, review queue) in worker threads, off the event loop."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import Any

from langchain_core.messages import HumanMessage, convert_to_messages
from langgraph.constants import START
from langgraph.graph import END
from langgraph.types import Command

from selfcrag.chat import close_run
from selfcrag.errors import LeaseLostError, ReviewError
from selfcrag.errors import ThreadBusyError as ThreadBusyError  # where callers look for it
from selfcrag.graph import build_graph
from selfcrag.graph import graph as default_graph
from selfcrag.language import language_of
from selfcrag.state import OutputState
from selfcrag.store import leases, reviews
from selfcrag.store.checkpoint import checkpointer

OUTPUT = frozenset(OutputState.__annotations__)
LOG = logging.getLogger("selfcrag.store")
# The answer a closed turn keeps in the thread, in its question's language; {} is why it did not finish.
NOT_ANSWERED = {"en": "This question was not answered: its run did not finish ({}). Ask it again for an answer.",
                "zh": "这个问题没有得到回答：回答它的运行没有完成（{}）。请重新提问。"}  # fmt: skip
AGAIN = "it stopped again when resumed"
# What stops a turn rather than fails it: Ctrl-C, SIGTERM (SystemExit) and, in async code, a cancelled task.
STOPS = (KeyboardInterrupt, SystemExit, asyncio.CancelledError)


def new_thread_id() -> str:
    return uuid.uuid4().hex


def persistent(compiled_graph: Any = None, settings: Any = None) -> Any:
    """A graph whose threads live in the store: `compiled_graph` with the store's checkpointer unless it has its
    own, else `build_graph(settings=settings)` with it."""
    if compiled_graph is None and settings is None:
        compiled_graph = default_graph  # a copy gets the checkpointer
    if compiled_graph is not None:
        return compiled_graph if compiled_graph.checkpointer else compiled_graph.copy({"checkpointer": checkpointer()})
    return build_graph(settings=settings, checkpointer=checkpointer())


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def paused(graph: Any, thread_id: str) -> list[Any]:
    """The thread's pending interrupts (empty when it is not waiting for a person)."""
    return list(graph.get_state(config(thread_id)).interrupts)


async def apaused(graph: Any, thread_id: str) -> list[Any]:
    return list((await graph.aget_state(config(thread_id))).interrupts)


def unfinished(state: Any) -> bool:
    """A run a crash left: its last checkpoint still has tasks, and none awaits a person. Tasks, not `next`:
    `next` leaves out tasks whose writes were saved, and a kill between a node's saved writes and the checkpoint
    after it (checkpoints are written in the background) leaves exactly that — `next` empty, the run not over."""
    return bool(state.tasks) and not state.interrupts


def check_idle(graph: Any, thread_id: str) -> None:
    _refuse_if_paused(thread_id, paused(graph, thread_id))


def _refuse_if_paused(thread_id: str, interrupts: list[Any]) -> None:
    """Refuse a new question on a thread paused for review (it would drop the review), with the way out."""
    if interrupts:
        raise ThreadBusyError(f"thread {thread_id} has an answer awaiting review: `selfcrag review show {thread_id}`, "
                              "then approve, edit or reject it before asking on this thread again")


def turn_input(question: str) -> dict[str, Any]:
    """The question as the thread's next user message: the history keeps both sides, so the generator sees the
    earlier turns and the consistency check compares with earlier answers."""
    return {"messages": [HumanMessage(question)]}


def finish(graph: Any, thread_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """The run's output with `thread_id` and `turn` (1 for the thread's first question); a paused run is queued
    for review and gets `review: {"id", "status": "pending"}`."""
    return _queued(thread_id, _output(thread_id, result), paused(graph, thread_id))


async def afinish(graph: Any, thread_id: str, result: dict[str, Any]) -> dict[str, Any]:
    interrupts = await apaused(graph, thread_id)
    return await asyncio.to_thread(_queued, thread_id, _output(thread_id, result), interrupts)


def _output(thread_id: str, result: dict[str, Any]) -> dict[str, Any]:
    output = {k: v for k, v in result.items() if k in OUTPUT}  # a streamed run's last values hold working keys
    return output | {"thread_id": thread_id, "turn": sum(_is_user(m) for m in output.get("messages") or [])}


def _queued(thread_id: str, output: dict[str, Any], interrupts: list[Any]) -> dict[str, Any]:
    if interrupts:
        reviews.enqueue(thread_id, interrupts[0].value)
        output["review"] = {"id": thread_id, "status": "pending"}
    return output


@contextmanager
def turn(graph: Any, thread_id: str, context: Any = None, new: bool = False) -> Iterator[dict[str, Any]]:
    """The block runs the thread's next turn: it holds the thread's lease, after settling a turn a crash left
    unfinished and refusing a thread that awaits review. Yields what to add to the turn's output (`recovered`: the
    unfinished turn's number, question, answer and whether it was answered or closed). A block that fails or is
    stopped closes its turn with a note. `new`: a thread id nobody else knows yet, so nothing to wait for."""
    with nullcontext() if new else leases.held(thread_id):
        extra = {} if new else recover(graph, thread_id, context)
        check_idle(graph, thread_id)
        try:
            yield extra
        except LeaseLostError:
            raise  # the thread is another holder's now: this one writes nothing more, not even a closing note
        except BaseException as exc:
            _close_quietly(graph, thread_id, _why_unfinished(exc))
            raise


@asynccontextmanager
async def aturn(graph: Any, thread_id: str, context: Any = None, new: bool = False) -> AsyncIterator[dict[str, Any]]:
    """`turn` for async code: a cancelled task is a stopped turn."""
    async with nullcontext() if new else leases.aheld(thread_id):
        extra = {} if new else await arecover(graph, thread_id, context)
        _refuse_if_paused(thread_id, await apaused(graph, thread_id))
        try:
            yield extra
        except LeaseLostError:
            raise  # as in turn
        except BaseException as exc:
            await _aclose_quietly(graph, thread_id, _why_unfinished(exc))
            raise


def _why_unfinished(exc: BaseException) -> str:
    return "it was stopped" if isinstance(exc, STOPS) else f"it failed: {_first_line(exc)}"


def recover(graph: Any, thread_id: str, context: Any = None) -> dict[str, Any]:
    """Settle the thread's last turn when a crash left it unfinished (tasks pending, no review awaited): resume it
    as itself, once; if that fails, or it was resumed before and crashed again, close it with a note. Returns
    `{"recovered": {...}}` for the output of the turn that found it, or {} when the last turn had finished."""
    state = graph.get_state(config(thread_id))
    found = _cut_short(state, _pending_input(graph, thread_id, state))
    if found is None:
        return {}
    asked, turn_id, number = found
    if leases.resumed(thread_id) == turn_id:
        outcome, answer = "closed", close(graph, thread_id, AGAIN)
    else:
        leases.mark_resumed(thread_id, turn_id)
        try:
            result = finish(graph, thread_id, dict(graph.invoke(None, config(thread_id), context=context)))
            outcome, answer = "answered", str(result.get("answer", ""))
        except Exception as exc:  # noqa: BLE001 - the unfinished turn fails again: closed, and the new one runs
            outcome, answer = "closed", close(graph, thread_id, f"it failed when resumed: {_first_line(exc)}")
    return _recovered(thread_id, number, asked, outcome, answer)


async def arecover(graph: Any, thread_id: str, context: Any = None) -> dict[str, Any]:
    state = await graph.aget_state(config(thread_id))
    found = _cut_short(state, await asyncio.to_thread(_pending_input, graph, thread_id, state))
    if found is None:
        return {}
    asked, turn_id, number = found
    if await asyncio.to_thread(leases.resumed, thread_id) == turn_id:
        outcome, answer = "closed", await aclose(graph, thread_id, AGAIN)
    else:
        await asyncio.to_thread(leases.mark_resumed, thread_id, turn_id)
        try:
            result = await afinish(graph, thread_id, dict(await graph.ainvoke(None, config(thread_id),
                                                                              context=context)))  # fmt: skip
            outcome, answer = "answered", str(result.get("answer", ""))
        except Exception as exc:  # noqa: BLE001 - as in recover
            outcome, answer = "closed", await aclose(graph, thread_id, f"it failed when resumed: {_first_line(exc)}")
    return _recovered(thread_id, number, asked, outcome, answer)


def _cut_short(state: Any, pending: list[Any]) -> tuple[str, str, int] | None:
    """(question, its message id, turn number) of the turn a crash left unfinished, whose input `pending` may still
    hold (`_pending_input`); None when none was."""
    if not unfinished(state):
        return None
    said = [*(state.values.get("messages") or []), *pending]
    asked, turn_id = _last_question({**state.values, "messages": said})
    return asked, turn_id, sum(_is_user(m) for m in said)


def _recovered(thread_id: str, number: int, asked: str, outcome: str, answer: str) -> dict[str, Any]:
    LOG.warning("thread %s: turn %d (%r) was cut short by a crash; %s before this question", thread_id, number,
                asked[:80], "answered it as itself" if outcome == "answered" else "closed it with a note")
    return {"recovered": {"turn": number, "question": asked, "answer": answer, "outcome": outcome}}


def close(graph: Any, thread_id: str, why: str) -> str:
    """End the thread's unfinished turn without running it: its pending tasks are dropped and a note saying it was
    not answered (and why) becomes its answer, so the history keeps question and answer paired. Returns the note;
    "" when there was nothing to close (finished, or awaiting review: the queue holds that one)."""
    cfg = config(thread_id)
    state = graph.get_state(cfg)
    closing = _closing(state, why, _pending_input(graph, thread_id, state))
    if closing is None:
        return ""
    values, note = closing
    # Written as `prepare` (a node without a route, which update_state could not take), then every task pending —
    # the unfinished run's and the one after prepare — dropped: LangGraph's update with no values as END.
    graph.update_state(cfg, values, as_node="prepare")
    graph.update_state(cfg, None, as_node=END)
    return note


async def aclose(graph: Any, thread_id: str, why: str) -> str:
    cfg = config(thread_id)
    state = await graph.aget_state(cfg)
    closing = _closing(state, why, await asyncio.to_thread(_pending_input, graph, thread_id, state))
    if closing is None:
        return ""
    values, note = closing
    await graph.aupdate_state(cfg, values, as_node="prepare")  # as in close
    await graph.aupdate_state(cfg, None, as_node=END)
    return note


def _closing(state: Any, why: str, pending: list[Any]) -> tuple[dict[str, Any], str] | None:
    """The values that close the unfinished turn in `state` (whose input `pending` may still hold) with its note,
    and the note; None if none is."""
    if not unfinished(state):
        return None
    asked, _ = _last_question({**state.values, "messages": [*(state.values.get("messages") or []), *pending]})
    note = NOT_ANSWERED["zh" if language_of(asked) == "zh" else "en"].format(why)
    ending = {"answer": note, "citations": [], "decision": "abstain", "confidence": 0.0, "missing": why}
    values = close_run(state.values, ending)
    values["messages"] = [*pending, *values["messages"]]  # a question the crash kept from the state: kept with it
    return values, note


def _close_quietly(graph: Any, thread_id: str, why: str) -> None:
    try:
        close(graph, thread_id, why)
    except Exception as exc:  # noqa: BLE001 - the turn's own error is what the caller reports; the next turn retries
        _not_closed(thread_id, exc)


async def _aclose_quietly(graph: Any, thread_id: str, why: str) -> None:
    try:
        # Shielded: a task cancelled again while its turn is closed still closes it.
        await asyncio.shield(aclose(graph, thread_id, why))
    except Exception as exc:  # noqa: BLE001 - as in _close_quietly
        _not_closed(thread_id, exc)


def _not_closed(thread_id: str, exc: Exception) -> None:
    LOG.info("thread %s: the unfinished turn was not closed (the next turn settles it): %s", thread_id,
             _first_line(exc))  # fmt: skip


def ask_in_thread(question: str, thread_id: str | None = None, context: Any = None, compiled_graph: Any = None,
                  settings: Any = None) -> dict[str, Any]:  # fmt: skip
    """Ask on `thread_id` (a new thread when None) as one `turn`; see `finish` for what the output adds."""
    graph = persistent(compiled_graph, settings)
    new = thread_id is None
    thread_id = thread_id or new_thread_id()
    with turn(graph, thread_id, context, new=new) as extra:
        result = graph.invoke(turn_input(question), config(thread_id), context=context)
        return finish(graph, thread_id, dict(result)) | extra


async def aask_in_thread(question: str, thread_id: str | None = None, context: Any = None, compiled_graph: Any = None,
                         settings: Any = None) -> dict[str, Any]:  # fmt: skip
    """`ask_in_thread` for async code."""
    graph = await asyncio.to_thread(persistent, compiled_graph, settings)  # the first one opens the database
    new = thread_id is None
    thread_id = thread_id or new_thread_id()
    async with aturn(graph, thread_id, context, new=new) as extra:
        result = await graph.ainvoke(turn_input(question), config(thread_id), context=context)
        return await afinish(graph, thread_id, dict(result)) | extra


def _pending_input(graph: Any, thread_id: str, state: Any) -> list[Any]:
    """The user messages of a turn cut short at its first checkpoint: its input waits in the `__start__` task,
    not yet in the thread's values, so counting those would name the turn before it. (Once the task's writes are
    saved, the values hold them.)"""
    if not any(task.name == START and task.result is None for task in state.tasks):
        return []
    saved = graph.checkpointer.get_tuple(config(thread_id))
    given = (saved.checkpoint["channel_values"].get(START) if saved else None) or {}
    if not isinstance(given, dict):
        return []
    if given.get("messages"):
        try:
            return [m for m in convert_to_messages(given["messages"]) if _is_user(m)]
        except (TypeError, ValueError, NotImplementedError):  # a client's malformed input: the run itself fails on it
            return []
    return [HumanMessage(str(given["question"]))] if given.get("question") else []


def _last_question(values: dict[str, Any]) -> tuple[str, str]:
    """The text and message id of the thread's last user message: the unfinished turn's question."""
    for message in reversed(values.get("messages") or []):
        if _is_user(message):
            text = message.content if isinstance(message.content, str) else str(message.content)
            return text, str(message.id or text)
    return str(values.get("question") or ""), str(values.get("question") or "")


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _is_user(message: Any) -> bool:
    kind = message.get("type") or message.get("role") if isinstance(message, dict) else message.type
    return kind in ("human", "user")


def resolve_review(review_id: str, action: str, answer: str = "", note: str = "", graph: Any = None) -> dict[str, Any]:
    """Approve, edit (with `answer`) or reject (with an optional `note`) the review, resuming its thread. Returns
    the thread's final output (the reviewed answer). Under the review's claim (a lease), fenced: a reviewer that
    stalled past it writes nothing and gets LeaseLostError, one line. The record is set from what the thread holds,
    so the two agree; ReviewError, one line, when the review or its thread has gone or was decided meanwhile."""
    _check_decision(review_id, action, answer)
    graph = persistent(graph)
    with leases.held(review_id, purpose="review"):  # the claim: released when this ends, or expires if it dies
        _check_open(graph, review_id, paused(graph, review_id))
        resume: Command[Any] = Command(resume=_reply(action, answer, note))
        result = finish(graph, review_id, dict(graph.invoke(resume, config(review_id))))
        _record(graph, review_id, action, result, note, paused(graph, review_id))
    return result


async def aresolve_review(review_id: str, action: str, answer: str = "", note: str = "",
                          graph: Any = None) -> dict[str, Any]:  # fmt: skip
    """`resolve_review` for async code."""
    await asyncio.to_thread(_check_decision, review_id, action, answer)
    graph = await asyncio.to_thread(persistent, graph)
    async with leases.aheld(review_id, purpose="review"):
        await asyncio.to_thread(_check_open, graph, review_id, await apaused(graph, review_id))
        resume: Command[Any] = Command(resume=_reply(action, answer, note))
        result = await afinish(graph, review_id, dict(await graph.ainvoke(resume, config(review_id))))
        again = await apaused(graph, review_id)
        await asyncio.to_thread(_record, graph, review_id, action, result, note, again)
    return result


def _check_decision(review_id: str, action: str, answer: str) -> None:
    if action not in reviews.ACTIONS:
        raise ReviewError(f"action must be one of {', '.join(reviews.ACTIONS)}, got {action!r}")
    if action == "edit" and not answer.strip():
        raise ReviewError("edit needs the reviewed answer: --answer TEXT")
    reviews.get(review_id)  # raises for an unknown id


def _check_open(graph: Any, review_id: str, interrupts: list[Any]) -> None:
    """Under the claim: the review is still undecided and its thread still paused (else `_settle` says why)."""
    status = reviews.get(review_id)["status"]
    if status not in reviews.OPEN:
        raise ReviewError(f"review {review_id} is {status}, not pending")
    if not interrupts:
        raise _settle(graph, review_id)


def _reply(action: str, answer: str, note: str) -> dict[str, str]:
    reply = {"action": action} | ({"answer": answer.strip()} if action == "edit" else {})
    return reply | ({"note": note} if note else {})


def _record(graph: Any, review_id: str, action: str, result: dict[str, Any], note: str, again: list[Any]) -> None:
    """Record the decision as the thread holds it; `again` is the thread's interrupts after the resume."""
    if again:  # the node refused the reply (its error says why): nothing decided
        why = (again[0].value or {}).get("error") or "the thread awaits review again"
        raise ReviewError(f"review {review_id} was not decided: {why}")
    decided = _decision(graph, review_id) or action
    reviews.set_status(review_id, reviews.DONE[decided], answer=result.get("answer", ""), note=note)


def _decision(graph: Any, thread_id: str) -> str:
    """The action a reviewer's decision left in the thread's last run ("" if its last run was not decided so)."""
    review = graph.get_state(config(thread_id)).values.get("review") or {}
    return str(review.get("action") or "") if isinstance(review, dict) else ""


def _settle(graph: Any, review_id: str) -> ReviewError:
    """A pending review whose thread no longer waits: a decision the thread holds (a reviewer stopped between
    publishing it and recording it) is recorded as the thread has it; anything else (the thread deleted, or moved
    on) marks the review stale. Returns the one-line error to raise."""
    state = graph.get_state(config(review_id))
    if decided := _decision(graph, review_id):
        answer = str(state.values.get("answer") or "")
        reviews.set_status(review_id, reviews.DONE[decided], answer=answer,
                           note="recorded from the thread: its decider stopped before recording it")  # fmt: skip
        return ReviewError(f"review {review_id} was already decided ({reviews.DONE[decided]}) by a reviewer who "
                           "stopped before recording it; recorded now as the thread holds it")
    gone = not state.values and not state.next
    reviews.set_status(review_id, "stale", note="the thread is gone" if gone else "the thread is no longer paused")
    if gone:
        return ReviewError(f"review {review_id}: its thread is gone (deleted); nothing to decide (marked stale)")
    return ReviewError(f"review {review_id}: its thread is no longer paused (marked stale)")
