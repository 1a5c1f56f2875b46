"""Self-RAG's usefulness check on a model: a score, and what the answer leaves out (which feeds the query rewrite).
It fails open: an answer it cannot grade is judged on groundedness and confidence alone.

The model replies in plain text, a verdict word first (Yes, Partly or No) and what is missing after a colon. The
score is read from the first token's probabilities where the server returns them (P(yes) + P(partly) / 2, over the
three words), else from the word itself: no JSON to get wrong, and a score measured before the model writes the
rest. A reply that starts with none of the three words is a parse failure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selfcrag.contract import AnswerGrade
from selfcrag.language import language_of
from selfcrag.llm.calls import MAX_TOKENS, call
from selfcrag.llm.declines import first_token_options, with_probabilities
from selfcrag.llm.structured import NOT_STREAMED, text_of, usage_tokens
from selfcrag.offline.offline_grading import constraint_violations
from selfcrag.prompts import grading as prompts
from selfcrag.prompts import messages
from selfcrag.text.terms import coverage, question_terms, strip_citations
from selfcrag.text.text import repeated_share

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

VERDICTS = {"yes": 1.0, "partly": 0.5, "no": 0.0}
_NOTHING = {"", "none", "nothing", "n/a", "na", "-", "nothing is missing", "null"}
# A `missing` made mostly of the prompt's own wording is the instructions read back, not a reading of this answer
# (a 0.5B model wrote "The question asks about a different one, the answer is about a different one"): it is not
# passed on to the query rewrite. The score, read before the model wrote it, stands.
ECHO_SHARE = 0.5  # of the reply's three-word runs found in the instructions
MISSING_CHARS = 200  # a few words are asked for; a longer reply is cut here before it reaches the rewrite


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
        prompt = prompts.answer_grade(question, answer)
        model = with_probabilities(self.models.capped(self.models.grader(settings), MAX_TOKENS["answer_grade"]))
        outcome = call(model, prompt, settings, NOT_STREAMED)
        found = "".join(f"; rule: {v.describe()}" for v in swapped)
        language = language_of(question)
        rule_missing = [messages.conflict(v.kind, v.asked, v.stated, language) for v in swapped]
        reply = text_of(outcome.output) if outcome.error is None else ""
        usage: dict[str, Any] = {"llm_calls": outcome.calls, "prompt": prompts.ANSWER,
                                 "tokens": usage_tokens(outcome.output, prompt) if outcome.error is None else 0}
        score = verdict_score(outcome.output) if outcome.error is None else None
        if score is None:
            error = outcome.reason if outcome.error is not None else \
                f"no verdict: the reply starts with none of Yes, Partly, No ({' '.join(reply.split()[:3])[:40]!r})"
            useful = not swapped  # fails open, except on what the rule found
            return AnswerGrade(score=settings.thresholds().answer_relevance * (1.0 if useful else 0.5), useful=useful,
                               error=error, missing=messages.separate(rule_missing, language),
                               reason=f"answer grader failed: {error}; taken as useful (fails open){found}",
                               **usage, **signals)
        missing = said_missing(reply) if score < 1.0 else ""
        note = ""
        if missing and repeated_share(missing, str(prompt[0].content)) >= ECHO_SHARE:
            missing, note = "", "; its 'missing' repeats the grader's instructions: not passed on"
        useful = score >= settings.thresholds().answer_relevance and not swapped
        return AnswerGrade(score=round(score * (0.5 if swapped else 1.0), 4), useful=useful,
                           missing=messages.separate([*rule_missing, *([missing] if missing else [])], language),
                           reason=f"P(addresses the question) {score:.2f}{note}{found}", **usage, **signals)


def _verdict(token: str) -> str | None:
    word = token.strip().strip("*.,:;!\"'").lower()
    if word in ("yes", "no"):
        return word
    return "partly" if len(word) >= 4 and ("partly".startswith(word) or "partially".startswith(word)) else None


def verdict_score(message: Any) -> float | None:
    """P(yes) + P(partly) / 2 over the three verdict words among the first token's top alternatives, when the server
    reported them; else the score of the reply's first word; None when it is none of the three."""
    shares = dict.fromkeys(VERDICTS, 0.0)
    for token, probability, _ in first_token_options(message):
        if (word := _verdict(token)) is not None:
            shares[word] += probability
    if (total := sum(shares.values())) > 0:
        return sum(VERDICTS[word] * share for word, share in shares.items()) / total
    words = text_of(message).split()
    word = _verdict(words[0]) if words else None
    return VERDICTS[word] if word is not None else None


def said_missing(reply: str) -> str:
    """What the reply says is missing: the text after its verdict word, or "" when that says nothing is."""
    rest = reply.strip().split(maxsplit=1)
    missing = rest[1].strip(" :-–—\n") if len(rest) == 2 else ""
    missing = " ".join(missing.split())[:MISSING_CHARS]
    return "" if missing.lower().rstrip(".") in _NOTHING else missing
