"""The CRAG retrieval evaluator on a model: every passage correct / ambiguous / incorrect, with a confidence and
a reason. All k passages go in one batched call (`grading="batch"`) or in k concurrent calls ("parallel"), never
in k sequential calls. A passage the model gives no verdict on fails open: kept as ambiguous."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, BeforeValidator

from selfcrag.components.base import Grade, Grading, Label, Passage
from selfcrag.components.llm.structured import Score, ask_many, normalised
from selfcrag.prompts import grading as prompts

if TYPE_CHECKING:
    from selfcrag.components.llm.models import ChatModels
    from selfcrag.context import Context

_SYNONYMS = {"relevant": "correct", "yes": "correct", "irrelevant": "incorrect", "not relevant": "incorrect",
             "no": "incorrect", "partially relevant": "ambiguous", "partial": "ambiguous", "unsure": "ambiguous"}


class PassageVerdict(BaseModel):
    """The evaluator's verdict on one passage."""

    id: str = ""
    label: Annotated[Label, BeforeValidator(normalised(_SYNONYMS))]
    confidence: Score = 0.5
    reason: str = ""


class PassageGrades(BaseModel):
    """Verdicts on every passage, one per passage id."""

    grades: list[PassageVerdict]


def relevance_score(label: Label, confidence: float, settings: Context) -> float:
    """A relevance score inside the label's band of the offline thresholds, so scores mean the same in both
    backends: correct is above `upper_threshold`, incorrect below `lower_threshold`, ambiguous between."""
    if label == "correct":
        return settings.upper_threshold + (1 - settings.upper_threshold) * confidence
    if label == "incorrect":
        return settings.lower_threshold * (1 - confidence)
    return (settings.upper_threshold + settings.lower_threshold) / 2


class LLMRelevanceGrader:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def grade(self, question: str, passages: list[Passage], settings: Context) -> Grading:
        if not passages:
            return Grading(grades=[])
        model = self.models.grader(settings)
        if settings.grading == "parallel":
            conversations = [prompts.relevance_single(question, p) for p in passages]
            replies = ask_many(self.models, model, PassageVerdict, conversations, settings, "relevance")
            verdicts = [r.value for r in replies]
            errors = [r.error for r in replies]
            calls, tokens = sum(r.calls for r in replies), sum(r.tokens for r in replies)
        else:
            reply = ask_many(self.models, model, PassageGrades, [prompts.relevance_batch(question, passages)], settings,
                             "relevance", items=len(passages))[0]
            verdicts = _by_position(reply.value, len(passages))
            errors = [reply.error or ("" if v else "no verdict for this passage") for v in verdicts]
            calls, tokens = reply.calls, reply.tokens
        grades = []
        for passage, verdict, error in zip(passages, verdicts, errors, strict=True):
            if verdict is None:  # fails open: a passage the grader could not judge stays in play
                mid = relevance_score("ambiguous", 0.0, settings)
                grades.append(Grade(id=passage["id"], label="ambiguous", score=round(mid, 4),
                                    reason=f"grader failed: {error}; kept as ambiguous (fails open)"))
                continue
            score = relevance_score(verdict.label, verdict.confidence, settings)
            grades.append(Grade(id=passage["id"], label=verdict.label, score=round(score, 4),
                                reason=f"{verdict.reason or verdict.label} (confidence {verdict.confidence:.2f})"))
        prompt = prompts.RELEVANCE + (" (parallel)" if settings.grading == "parallel" else " (batch)")
        return Grading(grades=grades, llm_calls=calls, tokens=tokens, prompt=prompt,
                       error=next((e for e in errors if e), ""))


def _by_position(value: PassageGrades | None, n: int) -> list[PassageVerdict | None]:
    """Verdicts for p1..pn. Ids are matched leniently ("p2", "P2", "2"); a reply without usable ids but with
    exactly one verdict per passage is taken in order."""
    if value is None:
        return [None] * n
    by_id = {v.id.strip().lower().lstrip("p#[").rstrip("]"): v for v in value.grades if v.id}
    found = [by_id.get(str(i)) for i in range(1, n + 1)]
    if not any(found) and len(value.grades) == n:
        return list(value.grades)
    return found
