"""Routing on a model: one call decides whether a question is conversation (`direct`), outside the knowledge base
(`web_search`, offered only when web search is configured) or one to retrieve for. Any fault, a reply that does
not parse, or a web route without web search falls back to `retrieve`: a knowledge question is never lost to a
failed call, nor to a direct reply while it names a word the knowledge base holds. So a question naming such a word,
without web search, is retrieved without asking: the call could not change the route."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from selfcrag.contract import Route, RouteName
from selfcrag.language import language_of
from selfcrag.llm.structured import ask, normalised
from selfcrag.offline.router import indexed_content, topics
from selfcrag.prompts import routing as prompts
from selfcrag.prompts.system import version

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

TITLES_SHOWN = 20  # the model reads the knowledge base's coverage from its titles; more only costs tokens
_SYNONYMS = {"web": "web_search", "search": "web_search", "websearch": "web_search", "vectorstore": "retrieve",
             "knowledge base": "retrieve", "retrieval": "retrieve", "answer": "direct", "reply": "direct"}


class QuestionRoute(BaseModel):
    """Where the message goes, and why in a few words."""

    route: Annotated[RouteName, BeforeValidator(normalised(_SYNONYMS))]
    reason: str = Field("", json_schema_extra={"maxLength": 100})


class LLMRouter:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def route(self, question: str, index: Any, web: bool, settings: Context) -> Route:
        known = indexed_content(question, index)
        if known and not web:  # the model could only say retrieve: a direct reply would be overruled (below)
            return Route("retrieve", f"the knowledge base has: {', '.join(known)}; web search unavailable; "
                                     "no model call needed")  # fmt: skip
        titles = topics(index, language_of(question), TITLES_SHOWN)
        reply = ask(self.models, self.models.grader(settings), QuestionRoute,
                    prompts.route(question, titles, web, settings), settings, "route")  # fmt: skip
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens,
                                 "prompt": version(settings, "route_question")}
        if reply.value is None:
            return Route("retrieve", f"router failed: {reply.error}; retrieving", error=reply.error, **usage)
        chosen, why = reply.value.route, " ".join(reply.value.reason.split())[:100] or "the model's choice"
        if chosen == "web_search" and not web:
            return Route("retrieve", f"the model chose web search, which is unavailable; retrieving ({why})", **usage)
        if chosen == "direct" and known:
            return Route("retrieve", f"the model chose a direct reply, but the knowledge base has: "
                                     f"{', '.join(known)}; retrieving ({why})", **usage)  # fmt: skip
        return Route(chosen, why, **usage)
