"""Domain presets: how good the evidence and the answer must be before the agent answers.

A help center can live with a less certain answer than a medical or legal assistant, so each domain sets the
minimum context relevance, groundedness and answer relevance (the graders' loops: below them the evidence is
corrected, the answer regenerated or the query rewritten) and the minimum confidence for a plain answer, a
probability that the answer is right (`quality/calibration.py`). `risk` moves all four together, and any one can
be overridden on its own in `Context`. The presets live in `data/presets.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib import resources
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
    overall: float  # the minimum confidence (probability the answer is right) for a plain answer

    def shifted(self, delta: float) -> Thresholds:
        def move(x: float) -> float:
            return round(min(1.0, max(0.0, x + delta)), 4)

        return Thresholds(move(self.context_relevance), move(self.groundedness), move(self.answer_relevance),
                          move(self.overall))


def _presets() -> tuple[dict[str, Thresholds], dict[str, float]]:
    data = json.loads((resources.files("selfcrag") / "data" / "presets.json").read_text(encoding="utf-8"))
    domains = {name: Thresholds(**{k: float(v) for k, v in values.items()}) for name, values in data["domains"].items()}
    return domains, {name: float(v) for name, v in data["risk_shift"].items()}


PRESETS, RISK_SHIFT = _presets()

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
