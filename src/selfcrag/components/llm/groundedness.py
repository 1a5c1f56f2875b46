"""Self-RAG's hallucination check on a model, statement by statement (grounded / inferred / unsupported),
merged with the offline rule checks (numbers, names, identifiers, absolute words absent from the evidence),
which catch the small edits a model reader may wave through. It fails closed: an answer it cannot check is
not grounded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator

from selfcrag.components.base import GroundednessCheck, Strip
from selfcrag.components.groundedness import FLAG_PENALTY
from selfcrag.components.llm.structured import ask, normalised
from selfcrag.components.offline_grading import strip_citations
from selfcrag.components.text import split_sentences
from selfcrag.prompts import grading as prompts
from selfcrag.quality.rules import rule_flags

if TYPE_CHECKING:
    from selfcrag.components.llm.models import ChatModels
    from selfcrag.context import Context

Verdict = Literal["grounded", "inferred", "unsupported"]
_SYNONYMS = {"supported": "grounded", "fully supported": "grounded", "yes": "grounded", "partially supported":
             "inferred", "partial": "inferred", "not supported": "unsupported", "no": "unsupported",
             "contradicted": "unsupported", "hallucinated": "unsupported"}  # fmt: skip
INFERRED_WEIGHT = 0.5  # a statement the evidence implies but does not state counts half


class StatementVerdict(BaseModel):
    text: str
    verdict: Annotated[Verdict, BeforeValidator(normalised(_SYNONYMS))]
    reason: str = ""


class StatementCheck(BaseModel):
    """Every factual statement of the answer, with its verdict against the evidence."""

    statements: list[StatementVerdict]


class LLMGroundednessChecker:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def check(self, answer: str, strips: list[Strip], settings: Context) -> GroundednessCheck:
        evidence = "\n".join(s["text"] for s in strips)
        plain = strip_citations(answer)
        flags = rule_flags(plain, evidence)
        flagged = [s for s in split_sentences(plain) if rule_flags(s, evidence)]
        reply = ask(self.models, self.models.grader(settings), StatementCheck,
                    prompts.groundedness(answer, evidence), settings, "groundedness")  # fmt: skip
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens, "prompt": prompts.GROUNDEDNESS}
        statements = reply.value.statements if reply.value else []
        if not statements:  # fails closed: an answer nobody could check is not shown as grounded
            error = reply.error or "the checker returned no statements"
            return GroundednessCheck(score=0.0, grounded=False, unsupported=flagged,
                                     flags=[*flags, f"groundedness check failed: {error}; not grounded (fails closed)"],
                                     error=error, **usage)
        verdicts = [s.verdict for s in statements]
        supported = verdicts.count("grounded") + INFERRED_WEIGHT * verdicts.count("inferred")
        score = min(1.0, max(0.0, supported / len(statements) - FLAG_PENALTY * len(flags)))
        unsupported = list(dict.fromkeys([s.text for s in statements if s.verdict == "unsupported"] + flagged))
        return GroundednessCheck(score=round(score, 4), grounded=score >= settings.thresholds().groundedness,
                                 unsupported=unsupported, flags=flags, **usage)
