"""Opens a run: resolves the question (from `question` or the last user message) and resets the working
state, so a thread that keeps state between runs starts each run clean."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from selfcrag.components.backend import Components
from selfcrag.components.base import Turn
from selfcrag.context import Context, settings_of
from selfcrag.state import State


class EmptyQuestionError(ValueError):
    """The run has no question: neither `question` nor a user message."""


def question_from(state: State) -> str:
    question = (state.get("question") or "").strip()
    if question:
        return question
    for message in reversed(state.get("messages") or []):
        if _is_user_message(message):
            return _text_of(message).strip()
    return ""


def history_from(state: State) -> list[Turn]:
    """The conversation before the question: user and assistant messages, without the question's own message."""
    turns: list[Turn] = []
    for message in state.get("messages") or []:
        text = _text_of(message).strip()
        if text and _is_user_message(message):
            turns.append(Turn(role="user", content=text))
        elif text and _is_ai_message(message):
            turns.append(Turn(role="assistant", content=text))
    if turns and turns[-1]["role"] == "user" and turns[-1]["content"] == question_from(state):
        turns.pop()
    return turns


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
        return " ".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def make(components: Components):  # noqa: ANN201 - the node signature is LangGraph's
    def prepare(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        question = question_from(state)
        if not question:
            raise EmptyQuestionError("the question is empty: pass `question` or a user message in `messages`")
        web = settings.web_search and components.web.available
        return {
            "question": question,
            "query": question,
            "web_query": "",
            "documents": [],
            "grades": [],
            "knowledge": [],
            "answer": "",
            "citations": [],
            "missing": "",
            "unsupported_claims": [],
            "feedback": "",
            "web_available": web,
            "web_searched": False,
            "retrieval_rounds": 0,
            "generations": 0,
            "llm_calls": Overwrite(0),  # the counters sum node updates: a new run starts them at 0
            "tokens": Overwrite(0),
            "review": {},
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
