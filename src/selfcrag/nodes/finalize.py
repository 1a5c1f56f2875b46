"""Scores the run (RAG triad), computes confidence and decides: answer, answer with a caveat, abstain
("I don't know", with what was missing), or hand the case to a person."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.components.backend import Components
from selfcrag.context import Context, settings_of
from selfcrag.prompts import messages
from selfcrag.quality.confidence import confidence, triad
from selfcrag.state import State


def missing_evidence(state: State) -> str:
    """What the evidence lacked, from the most specific signal available."""
    if state.get("missing"):
        return state["missing"]
    if state.get("feedback"):
        return state["feedback"]
    if state.get("unsupported_claims"):
        return "support for: " + "; ".join(state["unsupported_claims"][:2])
    if not state.get("knowledge"):
        return "no relevant passage was found for: " + state.get("question", "")
    return ""


def make(components: Components):  # noqa: ANN201
    def finalize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        scores = triad(state)
        value, weakest = confidence(scores)
        # An answer that failed the hallucination check after every regeneration is never shown as an answer.
        draft = (state.get("answer") or "") if state.get("grounded") else ""
        update: dict[str, Any] = {"scores": scores, "confidence": value}
        if draft and value >= settings.answer_confidence:
            decision, reason = "answer", f"confidence {value:.2f} >= {settings.answer_confidence}"
        elif draft and value >= settings.caveat_confidence:
            decision, reason = "answer_with_caveat", f"confidence {value:.2f}; weakest signal: {weakest}"
            update["answer"] = f"{draft}\n\n" + messages.caveat([f"{weakest} {scores[weakest]:.2f}"])  # type: ignore[literal-required]
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
            update |= {"answer": messages.abstain(missing), "citations": [], "missing": missing}
        update["decision"] = decision
        update["trace"] = [
            {"node": "finalize", "decision": decision, "reason": reason, "scores": dict(scores), "draft": draft}
        ]
        return update

    return finalize
