"""The run's scores (RAG triad) and the confidence that picks the decision, with what pulled it down.

The triad asks three separate questions (is the evidence relevant, is the answer supported by it, does the
answer address the question); confidence folds four signals into one number for the decision:
retrieval quality, coverage of the question by the evidence, faithfulness (groundedness) and coherence
(the answer addresses the question and agrees with what the assistant said earlier in the thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selfcrag.components.offline_grading import coverage, question_terms
from selfcrag.state import Scores, State

if TYPE_CHECKING:
    from selfcrag.context import Context

SIGNALS = ("retrieval", "coverage", "faithfulness", "coherence")
# One source may be enough, but two agreeing sources are better evidence: diversity is a small bonus.
DIVERSITY_SHARE = 0.15
# An answer that contradicts an earlier answer in the thread keeps this share of its coherence.
CONTRADICTION_FACTOR = 0.3


def _used_strips(state: State) -> list[Any]:
    """The knowledge the answer cites, or all knowledge when it cites none."""
    strips = state.get("knowledge") or []
    cited = {c["doc_id"] for c in state.get("citations") or []}
    return [s for s in strips if s["doc_id"] in cited] or list(strips)


def context_relevance(state: State) -> float:
    used = [s["score"] for s in _used_strips(state)]
    return round(max(used), 4) if used else 0.0


def triad(state: State) -> Scores:
    """Context relevance of the evidence the answer used, groundedness, answer relevance; all in [0, 1]."""
    answered = bool(state.get("answer"))
    return Scores(
        context_relevance=context_relevance(state),
        groundedness=round(float(state.get("groundedness", 0.0)), 4) if answered else 0.0,
        answer_relevance=round(float(state.get("answer_relevance", 0.0)), 4) if answered else 0.0,
    )


def signals(state: State, scores: Scores, contradicted: bool) -> dict[str, float]:
    strips = _used_strips(state)
    distinct_sources = len({s["doc_id"] for s in state.get("knowledge") or []})
    diversity = min(1.0, max(0, distinct_sources - 1) / 2)
    covered, _ = coverage(question_terms(state.get("question", "")), "\n".join(s["text"] for s in strips))
    coherence = scores["answer_relevance"] * (CONTRADICTION_FACTOR if contradicted else 1.0)
    return {
        "retrieval": round(scores["context_relevance"] * (1 - DIVERSITY_SHARE + DIVERSITY_SHARE * diversity), 4),
        "coverage": round(covered if strips else 0.0, 4),
        "faithfulness": scores["groundedness"],
        "coherence": round(coherence, 4),
    }


def confidence(values: dict[str, float], settings: Context) -> dict[str, Any]:
    """Weighted confidence, and the signal whose shortfall cost it the most (the explanation)."""
    weights = {
        "retrieval": settings.weight_retrieval,
        "coverage": settings.weight_coverage,
        "faithfulness": settings.weight_faithfulness,
        "coherence": settings.weight_coherence,
    }
    total = sum(weights.values())
    value = round(sum(weights[n] * values[n] for n in SIGNALS) / total, 4)
    weakest = max(SIGNALS, key=lambda n: weights[n] * (1 - values[n]))
    listed = ", ".join(f"{n} {values[n]:.2f}" for n in SIGNALS)
    summary = f"confidence {value:.2f} from {listed}"
    if value < 1:
        summary += f"; pulled down most by {weakest}"
    return {"value": value, "signals": values, "weights": weights, "weakest": weakest, "summary": summary}
