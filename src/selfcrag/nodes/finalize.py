"""Scores the run (RAG triad), computes confidence and decides: answer, answer with a caveat, abstain
("I don't know", with what was missing), or hand the case to a person."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.chat import close_run
from selfcrag.components.backend import Components
from selfcrag.components.offline_grading import coverage, join_pairs, question_terms
from selfcrag.context import Context, settings_of
from selfcrag.language import language_of
from selfcrag.prompts import messages
from selfcrag.quality.confidence import confidence, triad
from selfcrag.state import State


def missing_evidence(state: State) -> str:
    """What the evidence lacked, from the most specific signal available, in the question's language."""
    if state.get("missing"):
        return state["missing"]
    if state.get("feedback"):
        return state["feedback"]
    language = language_of(state.get("question", ""))
    if state.get("unsupported_claims"):
        return messages.phrase("unsupported", language, messages.separate(state["unsupported_claims"][:2], language))
    if not state.get("knowledge"):
        terms = question_terms(state.get("question", ""))
        passages = "\n".join(p["title"] + "\n" + p["text"] for p in state.get("documents") or [])
        _, absent = coverage(terms, passages)
        if passages and absent:
            return messages.phrase("not_retrieved", language, messages.listing(absent, language))
        asked = join_pairs(list(terms.values()))  # Chinese as asked (手机应用), not as pairs
        return messages.phrase("not_in_kb", language, messages.listing(asked, language))
    return ""


# An answer whose relevance falls short of the usefulness threshold by at most this much may still be given,
# with a caveat; further below it answers a different question (picked on the sample KB and SQuAD dev sample).
CAVEAT_BAND = 0.1


def make(components: Components):  # noqa: ANN201
    def finalize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        language = language_of(state.get("question", ""))
        scores = triad(state)
        value, weakest = confidence(scores)
        # An answer that failed the hallucination check after every regeneration is never shown as an answer.
        draft = (state.get("answer") or "") if state.get("grounded") else ""
        update: dict[str, Any] = {"scores": scores, "confidence": value}
        relevant = scores["answer_relevance"] >= settings.answer_relevance_threshold - CAVEAT_BAND
        if draft and state.get("answer_useful") and value >= settings.answer_confidence:
            decision, reason = "answer", f"confidence {value:.2f} >= {settings.answer_confidence}"
        elif draft and relevant and value >= settings.caveat_confidence:
            decision, reason = "answer_with_caveat", f"confidence {value:.2f}; weakest signal: {weakest}"
            reasons = [f"{messages.signal(weakest, language)} {scores[weakest]:.2f}"]  # type: ignore[literal-required]
            if state.get("feedback"):  # the answer grader's words: what the answer leaves out
                reasons.append(state["feedback"])
            update["answer"] = f"{draft}\n\n" + messages.caveat(reasons, language)
        elif state.get("answer") and settings.human_review:
            decision, reason = "human_review", f"confidence {value:.2f} below the caveat band or answer ungrounded"
        else:
            decision = "abstain"
            missing = missing_evidence(state)
            if not state.get("answer"):
                reason = f"no answer the evidence supports; missing: {missing}"
            elif not draft:
                reason = f"the answer stayed ungrounded after {state.get('generations', 0)} generation(s)"
            else:
                reason = f"confidence {value:.2f} < {settings.caveat_confidence}; weakest signal: {weakest}"
            update |= {"answer": messages.abstain(missing, language), "citations": [], "missing": missing}
        update["decision"] = decision
        update["trace"] = [
            {"node": "finalize", "decision": decision, "reason": reason, "scores": dict(scores), "draft": draft}
        ]
        # A case for human review ends in human_review, once a person has decided.
        return update if decision == "human_review" else close_run(state, update)

    return finalize
