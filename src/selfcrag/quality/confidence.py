"""The run's scores (RAG triad) and the confidence that picks the decision."""

from __future__ import annotations

from selfcrag.state import Scores, State

# Weights of the triad in the confidence; groundedness and answer relevance matter most because an
# answer can be well supported by relevant evidence and still not answer the question.
WEIGHTS = {"context_relevance": 0.3, "groundedness": 0.35, "answer_relevance": 0.35}


def triad(state: State) -> Scores:
    """Context relevance of the evidence the answer used, groundedness, answer relevance; all in [0, 1]."""
    if not state.get("answer"):
        return Scores(context_relevance=_context_relevance(state), groundedness=0.0, answer_relevance=0.0)
    return Scores(
        context_relevance=_context_relevance(state),
        groundedness=round(float(state.get("groundedness", 0.0)), 4),
        answer_relevance=round(float(state.get("answer_relevance", 0.0)), 4),
    )


def _context_relevance(state: State) -> float:
    strips = state.get("knowledge") or []
    cited = {c["doc_id"] for c in state.get("citations") or []}
    used = [s["score"] for s in strips if s["doc_id"] in cited] or [s["score"] for s in strips]
    return round(max(used), 4) if used else 0.0


def confidence(scores: Scores) -> tuple[float, str]:
    """Weighted confidence and the signal that pulled it down the most."""
    value = sum(WEIGHTS[name] * scores[name] for name in WEIGHTS)  # type: ignore[literal-required]
    weakest = min(WEIGHTS, key=lambda name: scores[name])  # type: ignore[literal-required]
    return round(value, 4), weakest
