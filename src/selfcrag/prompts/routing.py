"""The prompt that routes a question before retrieval (Adaptive RAG's `route_question`): a short direct reply to
conversation, web search for what the knowledge base cannot cover, retrieval for the rest. The question is the
user's text and is shown as data; the knowledge base is described by its documents' titles."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from selfcrag.prompts.system import PROMPTS, system_text

if TYPE_CHECKING:
    from selfcrag.context import Context

ROUTE = PROMPTS["route_question"].version
WEB_ROUTE = ("- web_search: a question about a topic the knowledge base clearly does not cover (none of its documents "
             "could be about it).\n")
WEB_EXCEPTION = " or is plainly off the knowledge base's topics"


def route(question: str, titles: list[str], web: bool, settings: Context) -> list[BaseMessage]:
    """The web route and its exception are offered only when web search is available."""
    system = system_text(settings, "route_question", documents="; ".join(titles) if titles else "(titles unknown)",
                         web_route=WEB_ROUTE if web else "", web_exception=WEB_EXCEPTION if web else "")
    return [SystemMessage(system), HumanMessage(f"Message: {question.strip()}")]
