"""The CRAG retrieval evaluator on a model: every passage correct / ambiguous / incorrect, with a confidence and
a reason. All k passages go in one batched call (`grading="batch"`) or in k concurrent calls ("parallel"), never
in k sequential calls. A passage the model gives no verdict on fails open: kept as ambiguous.

`grading="yes_no"` asks k concurrent one-word questions instead: does this passage answer the question, or part
of it? The score is P(yes) from the first token's probabilities (a label read from JSON throws away how sure the
model was; a small model's labels were all-or-nothing), and the label comes from the score and the same
thresholds the offline evaluator uses. Only that first word is read: whatever else a passage made the model
write decides nothing."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, create_model, model_validator

from selfcrag.contract import Grade, Grading, Label, Passage
from selfcrag.llm.calls import call_all
from selfcrag.llm.declines import with_probabilities
from selfcrag.llm.structured import NOT_STREAMED, Score, ask_many, normalised, usage_tokens
from selfcrag.llm.verifier import REPLY_TOKENS, yes_probability
from selfcrag.prompts import grading as prompts
from selfcrag.prompts.system import version

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

_SYNONYMS = {"relevant": "correct", "yes": "correct", "irrelevant": "incorrect", "not relevant": "incorrect",
             "no": "incorrect", "partially relevant": "ambiguous", "partial": "ambiguous", "unsure": "ambiguous"}


REASON_CHARS = 100  # a reason "in a few words"; the schema says so, so a grammar-constrained server stops there


class Verdict(BaseModel):
    """The evaluator's verdict on a passage (in a keyed batch, the key is the passage id)."""

    label: Annotated[Label, BeforeValidator(normalised(_SYNONYMS))]
    confidence: Score = 0.5
    reason: str = Field("", json_schema_extra={"maxLength": REASON_CHARS})


class PassageVerdict(Verdict):
    """The evaluator's verdict on one passage."""

    id: str = ""


class PassageGrades(BaseModel):
    """Verdicts on every passage, one per passage id."""

    grades: list[PassageVerdict]


class _Keyed(BaseModel):
    """A batch reply keyed by passage id. A schema-constrained server (json_schema -> grammar) must then give a
    verdict for every passage: with a list, a small model was free to return `{"grades": []}` (seen with a 0.5B
    model). Servers that only read the schema as text may still answer with the list: accepted too."""

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("grades"), list):
            data = data["grades"]
        if not isinstance(data, list):
            return data
        verdicts = [v for v in data if isinstance(v, dict)]
        ids = [_passage_number(str(v.get("id", ""))) for v in verdicts]
        if all(ids) and len(set(ids)) == len(ids):
            return {f"p{n}": v for n, v in zip(ids, verdicts, strict=True)}
        return {f"p{i}": v for i, v in enumerate(verdicts, 1)}  # no usable ids: taken in order


@lru_cache(maxsize=32)
def keyed_grades(n: int) -> type[_Keyed]:
    """The batch schema for n passages: one required verdict per id p1..pn."""
    fields: dict[str, Any] = {f"p{i}": (Verdict, ...) for i in range(1, n + 1)}
    model: type[_Keyed] = create_model("PassageGrades", __base__=_Keyed, __doc__=PassageGrades.__doc__, **fields)
    return model


def _passage_number(ident: str) -> int:
    digits = ident.strip().lower().lstrip("p#[").rstrip("]")
    return int(digits) if digits.isdigit() else 0


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
        if settings.grading == "yes_no":
            return self._grade_yes_no(question, passages, settings, model)
        if settings.grading == "parallel":
            conversations = [prompts.relevance_single(question, p, settings) for p in passages]
            replies = ask_many(self.models, model, PassageVerdict, conversations, settings, "relevance")
            verdicts: list[Verdict | None] = [r.value for r in replies]
            errors = [r.error for r in replies]
            calls, tokens = sum(r.calls for r in replies), sum(r.tokens for r in replies)
        else:
            reply = ask_many(self.models, model, keyed_grades(len(passages)), [prompts.relevance_batch(question,
                             passages, settings)], settings, "relevance", items=len(passages))[0]  # fmt: skip
            verdicts = _by_key(reply.value, len(passages))
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
        prompt = f"{version(settings, 'grade_documents')} ({'parallel' if settings.grading == 'parallel' else 'batch'})"
        return Grading(grades=grades, llm_calls=calls, tokens=tokens, prompt=prompt,
                       error=next((e for e in errors if e), ""))


    def _grade_yes_no(self, question: str, passages: list[Passage], settings: Context, model: Any) -> Grading:
        asking = with_probabilities(self.models.capped(model, REPLY_TOKENS))
        conversations = [prompts.relevance_yes_no(question, p, settings) for p in passages]
        outcomes = call_all(asking, conversations, settings, NOT_STREAMED)
        grades, errors = [], []
        for passage, outcome in zip(passages, outcomes, strict=True):
            score = yes_probability(outcome.output) if outcome.error is None else None
            if score is None:  # fails open, as a passage without a verdict does in the other modes
                error = outcome.reason or "no Yes or No in the reply"
                errors.append(error)
                mid = relevance_score("ambiguous", 0.0, settings)
                grades.append(Grade(id=passage["id"], label="ambiguous", score=round(mid, 4),
                                    reason=f"grader failed: {error}; kept as ambiguous (fails open)"))
                continue
            label: Label = ("correct" if score >= settings.upper_threshold else
                            "incorrect" if score < settings.lower_threshold else "ambiguous")  # fmt: skip
            grades.append(Grade(id=passage["id"], label=label, score=round(score, 4), reason=f"P(yes) {score:.2f}"))
        tokens = sum(usage_tokens(o.output, sent) for o, sent in zip(outcomes, conversations, strict=True)
                     if o.error is None)  # fmt: skip
        return Grading(grades=grades, llm_calls=sum(o.calls for o in outcomes), tokens=tokens,
                       prompt=version(settings, "grade_documents_yes_no"), error=next(iter(errors), ""))


def _by_key(value: _Keyed | None, n: int) -> list[Verdict | None]:
    return [getattr(value, f"p{i}", None) if value is not None else None for i in range(1, n + 1)]
