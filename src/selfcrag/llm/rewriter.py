"""Query rewriting on a model: a better knowledge-base query from the answer grader's feedback and the best
evidence so far, or a short keyword query for web search. A failed call falls back to the offline keyword
rewrite, so a rewrite always happens. `contextualize` makes a follow-up standalone (llm/contextualizer.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from selfcrag.contract import Rewrite, Strip, Turn
from selfcrag.llm.contextualizer import LLMContextualizer
from selfcrag.llm.structured import ask
from selfcrag.offline.rewrite import WEB_MAX_WORDS, KeywordRewriter
from selfcrag.prompts import grading as prompts
from selfcrag.prompts.system import version

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

EVIDENCE_STRIPS = 2  # the best strips show the model the documents' wording; more only costs tokens


QUERY_CHARS = 160  # one line; the schema says so, so a grammar-constrained server cannot run on


class SearchQuery(BaseModel):
    """A search query and why it should find more."""

    query: str = Field(json_schema_extra={"maxLength": QUERY_CHARS})
    reason: str = Field("", json_schema_extra={"maxLength": 100})


class LLMRewriter:
    def __init__(self, models: ChatModels) -> None:
        self.models = models
        self.keywords = KeywordRewriter()

    def rewrite(self, question: str, query: str, evidence: list[Strip], feedback: str, for_web: bool,
                settings: Context) -> Rewrite:  # fmt: skip
        best = sorted(evidence, key=lambda s: -s["score"])[:EVIDENCE_STRIPS]
        messages = (prompts.rewrite_web(question, settings) if for_web else
                    prompts.rewrite(question, query, best, feedback, settings))  # fmt: skip
        reply = ask(self.models, self.models.grader(settings), SearchQuery, messages, settings, "rewrite")
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens,
                 "prompt": version(settings, "rewrite_query_web" if for_web else "rewrite_query")}  # fmt: skip
        text = " ".join(reply.value.query.strip().strip("\"'").split()) if reply.value else ""
        if for_web:
            text = " ".join(text.split()[:WEB_MAX_WORDS])
        if _same(text, query) and not for_web:  # small models often hand the last query back: no rewrite at all
            text, reply.error = "", reply.error or "the model returned the last query unchanged"
        if not text:
            fallback = self.keywords.rewrite(question, query, evidence, feedback, for_web, settings)
            error = reply.error or "the model returned an empty query"
            return Rewrite(query=fallback.query, reason=f"rewriter failed: {error}; {fallback.reason}", error=error,
                           **usage)
        return Rewrite(query=text, reason=reply.value.reason if reply.value and reply.value.reason else "rewritten",
                       **usage)

    def contextualize(self, question: str, history: list[Turn], settings: Context) -> Rewrite:
        """A follow-up made standalone by one model call (llm/contextualizer.py)."""
        return LLMContextualizer(self.models).contextualize(question, history, settings)


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().strip(" ?.!").split()) == " ".join(b.lower().strip(" ?.!").split())
