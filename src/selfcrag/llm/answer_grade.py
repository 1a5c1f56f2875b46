"""Self-RAG's usefulness check on a model: a score, a reason, and what the answer leaves out (which feeds the
query rewrite). It fails open: an answer it cannot grade is judged on groundedness and confidence alone.

`answer_grading="yes_no"` asks the same question for one word instead, and scores the answer P(yes) from the first
token's probabilities: a 1.5B model's JSON score called a right answer half useful and named the question's own
subject as what it left out (SQuAD tuning questions), while a one-word reply's probabilities keep how sure it was.
What is missing then comes from the rule checks alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from selfcrag.contract import AnswerGrade
from selfcrag.language import language_of
from selfcrag.llm.structured import Score, ask
from selfcrag.llm.verifier import grader_yes_no
from selfcrag.offline.offline_grading import constraint_violations
from selfcrag.prompts import grading as prompts
from selfcrag.prompts import messages
from selfcrag.prompts.system import version
from selfcrag.text.terms import coverage, question_terms, strip_citations
from selfcrag.text.text import repeated_share

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

_NOTHING = {"", "none", "nothing", "n/a", "na", "-", "nothing is missing", "null"}
# A `missing` made mostly of the prompt's own wording is the instructions read back, not a reading of this answer:
# a 0.5B model wrote "The question asks about a different one, the answer is about a different one" and scored a
# right answer 0.0, as the instructions' example of a wrong one says to. Its verdict is then not taken.
ECHO_SHARE = 0.5  # of the reply's three-word runs found in the instructions


# Bounds the schema states, so a grammar-constrained server stops a rambling field there: a 0.5B model otherwise ran
# to the role's token cap, and the cut JSON could not be read (2 of 34 grades on SQuAD tuning questions).
MISSING_CHARS, REASON_CHARS = 200, 100


# (score, or None when no verdict was taken; what is missing; reason; usage; why no verdict was taken)
Graded = tuple[float | None, str, str, dict[str, Any], str]


class AnswerVerdict(BaseModel):
    """How well the answer addresses the question, and what it leaves out."""

    score: Score
    missing: str = Field("", json_schema_extra={"maxLength": MISSING_CHARS})
    reason: str = Field("", json_schema_extra={"maxLength": REASON_CHARS})


class LLMAnswerGrader:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def grade(self, question: str, answer: str, settings: Context) -> AnswerGrade:
        text = strip_citations(answer)
        if not text:
            return AnswerGrade(score=0.0, useful=False, missing="no answer", reason="empty answer")
        # The offline constraint check runs on the model's answer too, as a rule finding: both backends share it,
        # and it holds when the model misses the swap or fails.
        swapped = constraint_violations(question, text)
        signals: dict[str, Any] = {"violations": len(swapped),
                                   "term_coverage": round(coverage(question_terms(question), text)[0], 4)}
        found = "".join(f"; rule: {v.describe()}" for v in swapped)
        language = language_of(question)
        rule_missing = [messages.conflict(v.kind, v.asked, v.stated, language) for v in swapped]
        asked = self._yes_no if settings.answer_grading == "yes_no" else self._scored
        score, missing, reason, usage, error = asked(question, answer, settings)
        if score is None:
            useful = not swapped  # fails open, except on what the rule found
            return AnswerGrade(score=settings.thresholds().answer_relevance * (1.0 if useful else 0.5), useful=useful,
                               error=error, missing=messages.separate(rule_missing, language),
                               reason=f"answer grader failed: {error}; taken as useful (fails open){found}",
                               **usage, **signals)
        useful = score >= settings.thresholds().answer_relevance and not swapped
        return AnswerGrade(score=round(score * (0.5 if swapped else 1.0), 4), useful=useful,
                           missing=messages.separate([*rule_missing, *([missing] if missing else [])], language),
                           reason=reason + found, **usage, **signals)

    def _scored(self, question: str, answer: str, settings: Context) -> Graded:
        """The JSON verdict: its score, what it says is missing, its reason."""
        prompt = prompts.answer_grade(question, answer, settings)
        reply = ask(self.models, self.models.grader(settings), AnswerVerdict, prompt, settings, "answer_grade")
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens,
                                 "prompt": version(settings, "grade_answer")}
        verdict, error = reply.value, reply.error
        if verdict is not None and repeated_share(verdict.missing, str(prompt[0].content)) >= ECHO_SHARE:
            error = "verdict not taken: its 'missing' repeats the grader's instructions"
        if verdict is None or error:
            return None, "", "", usage, error
        missing = "" if verdict.missing.strip().lower().rstrip(".") in _NOTHING else verdict.missing.strip()
        return verdict.score, missing, verdict.reason, usage, ""

    def _yes_no(self, question: str, answer: str, settings: Context) -> Graded:
        """P(yes) for "does this answer address the question?"; nothing is said to be missing."""
        asked = prompts.answer_grade_yes_no(question, answer, settings)
        p_yes, calls, tokens, error = grader_yes_no(self.models, asked, settings)
        usage: dict[str, Any] = {"llm_calls": calls, "tokens": tokens,
                                 "prompt": version(settings, "grade_answer_yes_no")}
        if p_yes is None:
            return None, "", "", usage, error
        return p_yes, "", f"P(yes) {p_yes:.2f}", usage, ""
