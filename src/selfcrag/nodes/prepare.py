"""Opens a run: resolves the question (from `question` or the last user message), checks and cleans it, and
resets the working state, so a thread that keeps state between runs starts each run clean.

A question that is not text, or longer than `max_question_chars`, fails the run with one line saying so; the
question is cleaned of escape sequences and invisible characters (`text/sanitize.py`) before anything
reads it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.contract import Turn
from selfcrag.errors import EmptyQuestionError, QuestionError
from selfcrag.ledger import open_run
from selfcrag.state import NodeFunction, State
from selfcrag.text.sanitize import clean_text
from selfcrag.trust_boundary import settings_of


def raw_question(state: State) -> str:
    """The question as sent: `question`, else the last user message. Anything but text is refused here,
    before a string method meets it."""
    question = state.get("question")
    if question is not None and not isinstance(question, str):
        raise QuestionError(f"`question` must be a string, got {type(question).__name__}")
    if question and question.strip():
        return question
    for message in reversed(state.get("messages") or []):
        if _is_user_message(message):
            return _text_of(message)
    return ""


def question_from(state: State) -> str:
    """The question, cleaned (`clean_text`)."""
    return clean_text(raw_question(state))


def recent_messages(state: State, settings: Context) -> Iterator[tuple[AnyMessage | dict[str, Any], str]]:
    """The chat messages a run reads, newest first, each with its text as sent: cut to `max_turn_chars` (marked
    with an ellipsis), and none past `max_history_chars` in all. A client writes `messages`, so their size is
    bounded here, before any cleaning or prompt sees them: a 20 MB earlier message became a 20-million-character
    prompt."""
    budget = settings.max_history_chars
    for message in reversed(state.get("messages") or []):
        if budget <= 0:
            return
        if not (_is_user_message(message) or _is_ai_message(message)):
            continue
        text = _text_of(message)
        kept = text[: min(settings.max_turn_chars, budget)]
        budget -= len(kept)
        yield message, kept + (" …" if len(kept) < len(text) else "")


def history_from(state: State, settings: Context) -> list[Turn]:
    """The conversation before the question, oldest first: user and assistant messages within the history's
    bounds (`recent_messages`), without the question's own message."""
    turns: list[Turn] = []
    asked, newest = (question_from(state), state.get("asked")), True
    for message, text in recent_messages(state, settings):
        text = clean_text(text)  # the same cleaning as the question, so the two compare equal
        if not text:
            continue
        user = _is_user_message(message)
        # The question's own message: as sent, or as `contextualize` found it before making it stand alone (`asked`).
        if newest and user and text in asked:
            newest = False
            continue
        newest = False
        turns.append(Turn(role="user" if user else "assistant", content=text))
    return turns[::-1]


def _question_message(state: State, question: str) -> dict[str, Any]:
    """A question sent as `question` enters the chat history as the user's message, before the answer
    finalize appends: a thread (Studio's chat view, the next turn's history) shows who asked what. A turn that
    came as `messages` holds it already, and so does one that sent both: nothing is added. It is written as a
    message dict, which the `messages` reducer makes a HumanMessage in state: `stream_mode="messages"` passes on
    only message objects a node returns, so the stream carries model output, never an echo of the question."""
    messages = state.get("messages") or []
    if not (state.get("question") or "").strip():  # the question is the last user message
        return {}
    if messages and _is_user_message(messages[-1]) and clean_text(_text_of(messages[-1])) == question:
        return {}
    return {"messages": [{"role": "user", "content": question}]}


def _is_ai_message(message: AnyMessage | dict[str, Any]) -> bool:
    if isinstance(message, dict):
        return message.get("role") in ("assistant", "ai") or message.get("type") == "ai"
    return isinstance(message, AIMessage)


def _is_user_message(message: AnyMessage | dict[str, Any]) -> bool:
    if isinstance(message, dict):
        return message.get("role") in ("user", "human") or message.get("type") == "human"
    return isinstance(message, HumanMessage)


def _text_of(message: AnyMessage | dict[str, Any]) -> str:
    content = message.get("content", "") if isinstance(message, dict) else message.content
    if isinstance(content, list):  # multimodal content blocks: keep the text parts
        parts = (b.get("text") if isinstance(b, dict) else b for b in content)
        return " ".join(p for p in parts if isinstance(p, str))
    return content if isinstance(content, str) else ""  # no text in it: as if the message said nothing


def make(components: Components) -> NodeFunction:
    def prepare(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        raw = raw_question(state)
        if len(raw) > settings.max_question_chars:  # measured before cleaning: a huge input costs nothing
            raise QuestionError(f"the question has {len(raw):,} characters; at most {settings.max_question_chars:,} "
                                "are accepted (max_question_chars)")
        question = clean_text(raw)
        if not question:
            raise EmptyQuestionError("the question has no visible text (only control codes, invisible characters "
                                     "or bytes that are not UTF-8)" if raw.strip() else
                                     "the question is empty: pass `question` or a user message in `messages`")
        web = settings.web_search and components.web.available
        return {
            **_question_message(state, question),
            "question": question,
            "asked": "",
            "route": "",
            "query": question,
            "web_query": "",
            "documents": [],
            "grades": [],
            "knowledge": [],
            "evidence": [],  # evidence accumulates over the rounds of one run, never across runs of a thread
            "sources": [],
            "set_aside": [],
            "bridges": [],
            "candidates": [],
            "seen": [],
            "queries": [],
            "answer": "",
            "citations": [],
            # No decision until finalize makes one: a turn that stops halfway is known by it (selfcrag/auth.py)
            "decision": "",
            "missing": "",
            "unsupported_claims": [],
            "feedback": "",
            "web_available": web,
            "web_searched": False,
            "retrieval_rounds": 0,
            "generations": 0,
            "llm_calls": Overwrite(0),  # the counters keep the larger total: a new run starts them at 0
            "tokens": Overwrite(0),
            "review": {},
            "run_ledger": open_run(runtime),  # the run's counts and deadline, kept in this process (ledger.py)
            "trace": [
                {
                    "node": "prepare",
                    "decision": "start",
                    "reason": "web search " + ("available" if web else "unavailable: retrieval only"),
                    "question": question,
                    "started": time.time(),  # the quality monitor's latency counts from here
                }
            ],
        }

    return prepare
