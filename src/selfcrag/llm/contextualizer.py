"""Follow-up questions on a model: one call rewrites a question that leans on the conversation into one that
stands alone. A failed call, or a reply that is no question, falls back to carrying the earlier turns' subject
terms (offline/contextualize.py), so the run still retrieves about the right thing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from selfcrag.contract import Rewrite, Turn
from selfcrag.llm.structured import ask
from selfcrag.offline.contextualize import carry_subject
from selfcrag.prompts import contextualize as prompts
from selfcrag.prompts.system import version
from selfcrag.text.sanitize import clean_text

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels


class StandaloneQuestion(BaseModel):
    """The question rewritten to stand alone."""

    question: str


class LLMContextualizer:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def contextualize(self, question: str, history: list[Turn], settings: Context) -> Rewrite:
        # The turns the generator would see, at least the last exchange: the follow-up leans on it.
        turns = history[-2 * max(1, settings.history_turns) :]
        reply = ask(self.models, self.models.grader(settings), StandaloneQuestion,
                    prompts.contextualize(question, turns, settings), settings, "rewrite")  # fmt: skip
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens,
                                 "prompt": version(settings, "contextualize")}
        text = clean_text(reply.value.question) if reply.value else ""
        # A model that answers instead of asking writes paragraphs; a question stays near its own length.
        error = reply.error or ("the model returned no question" if not text else
                                "the model returned more than a question" if len(text) > settings.max_question_chars
                                else "")  # fmt: skip
        if error:
            fallback = carry_subject(question, history)
            return Rewrite(query=fallback.query, reason=f"contextualizer failed: {error}; {fallback.reason}",
                           error=error, **usage)  # fmt: skip
        return Rewrite(query=text, reason="rewritten by the model to stand alone", **usage)
