"""Self-RAG's usefulness check on a model: a score, a reason, and what the answer leaves out (which feeds the
query rewrite). It fails open: an answer it cannot grade is judged on groundedness and confidence alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from selfcrag.components.base import AnswerGrade
from selfcrag.components.llm.structured import Score, ask
from selfcrag.components.offline_grading import strip_citations
from selfcrag.prompts import grading as prompts

if TYPE_CHECKING:
    from selfcrag.components.llm.models import ChatModels
    from selfcrag.context import Context

_NOTHING = {"", "none", "nothing", "n/a", "na", "-", "nothing is missing", "null"}


class AnswerVerdict(BaseModel):
    """How well the answer addresses the question, and what it leaves out."""

    score: Score
    missing: str = ""
    reason: str = ""


class LLMAnswerGrader:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def grade(self, question: str, answer: str, settings: Context) -> AnswerGrade:
        if not strip_citations(answer):
            return AnswerGrade(score=0.0, useful=False, missing="no answer", reason="empty answer")
        reply = ask(self.models, self.models.grader(settings), AnswerVerdict,
                    prompts.answer_grade(question, answer), settings, "answer_grade")  # fmt: skip
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens, "prompt": prompts.ANSWER}
        if reply.value is None:
            return AnswerGrade(score=settings.thresholds().answer_relevance, useful=True, error=reply.error,
                               reason=f"answer grader failed: {reply.error}; taken as useful (fails open)",
                               **usage)
        verdict = reply.value
        missing = "" if verdict.missing.strip().lower().rstrip(".") in _NOTHING else verdict.missing.strip()
        useful = verdict.score >= settings.thresholds().answer_relevance
        return AnswerGrade(score=round(verdict.score, 4), useful=useful, missing=missing, reason=verdict.reason,
                           **usage)
