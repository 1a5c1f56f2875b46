"""Domain presets: how good the evidence and the answer must be before the agent answers.

A help center can live with a slightly weaker answer than a medical or legal assistant, so each domain sets
the minimum context relevance, groundedness, answer relevance and overall confidence; `risk` moves all four
together, and any one can be overridden on its own in `Context`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from selfcrag.context import Context

Domain = Literal["general", "customer_service", "financial", "medical", "legal"]
Risk = Literal["low", "normal", "critical"]


@dataclass(frozen=True)
class Thresholds:
    context_relevance: float
    groundedness: float
    answer_relevance: float
    overall: float  # the minimum confidence for a plain answer

    def shifted(self, delta: float) -> Thresholds:
        def move(x: float) -> float:
            return round(min(1.0, max(0.0, x + delta)), 4)

        return Thresholds(move(self.context_relevance), move(self.groundedness), move(self.answer_relevance),
                          move(self.overall))


PRESETS: dict[str, Thresholds] = {
    "general": Thresholds(0.70, 0.75, 0.70, 0.72),
    "customer_service": Thresholds(0.75, 0.80, 0.75, 0.77),
    "financial": Thresholds(0.85, 0.85, 0.80, 0.83),
    "medical": Thresholds(0.90, 0.90, 0.85, 0.88),
    "legal": Thresholds(0.90, 0.90, 0.85, 0.88),
}
RISK_SHIFT: dict[str, float] = {"low": -0.05, "normal": 0.0, "critical": 0.05}

# The override fields of Context, by the threshold they replace; a negative value means "from the preset".
OVERRIDES = {
    "context_relevance": "min_context_relevance",
    "groundedness": "min_groundedness",
    "answer_relevance": "min_answer_relevance",
    "overall": "min_confidence",
}


def thresholds_for(settings: Context) -> Thresholds:
    """The run's active thresholds: the domain preset, moved by the risk level, then the explicit overrides."""
    active = PRESETS[settings.domain].shifted(RISK_SHIFT[settings.risk])
    chosen = {name: getattr(settings, field) for name, field in OVERRIDES.items() if getattr(settings, field) >= 0}
    return replace(active, **chosen)
