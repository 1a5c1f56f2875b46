"""Domain presets: how good the evidence and the answer must be before the agent answers.

A help center can live with a less certain answer than a medical or legal assistant, so each domain sets the
minimum context relevance, groundedness and answer relevance (the graders' loops: below them the evidence is
corrected, the answer regenerated or the query rewritten) and the cost of a wrong answer shown, counted in right
answers. The cost decides when to answer: with confidence p, the probability that the answer is right
(`quality/calibration.py`), showing it earns p - cost * (1 - p) in effective reliability and abstaining earns 0, so
the agent shows an answer only when p >= cost / (1 + cost) (cost 1: p >= 0.5; cost 3: p >= 0.75). No floor is
fitted: what a floor can learn from tuning data is a calibration error, and it does not carry to other questions.
Within `caveat_band` above that floor the answer is shown with a caveat; the plain-answer minimum (`overall`) is the
floor plus the band. `risk` moves all four minimums together, and any one (or the cost) can be overridden on its
own in `Context`. The presets live in `data/presets.json`.
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


@dataclass(frozen=True)
class Preset:
    context_relevance: float
    groundedness: float
    answer_relevance: float
    cost: float  # of a wrong answer shown, in right answers


def show_floor(cost: float) -> float:
    """The lowest probability of being right at which showing an answer pays: p - cost * (1 - p) >= 0."""
    return round(cost / (1 + cost), 4)


def _presets() -> tuple[dict[str, Preset], dict[str, float]]:
    data = json.loads((resources.files("selfcrag") / "data" / "presets.json").read_text(encoding="utf-8"))
    domains = {name: Preset(**{k: float(v) for k, v in values.items()}) for name, values in data["domains"].items()}
    return domains, {name: float(v) for name, v in data["risk_shift"].items()}


PRESETS, RISK_SHIFT = _presets()

# The override fields of Context, by the threshold they replace; a negative value means "from the preset".
OVERRIDES = {
    "context_relevance": "min_context_relevance",
    "groundedness": "min_groundedness",
    "answer_relevance": "min_answer_relevance",
    "overall": "min_confidence",
}


def cost_for(settings: Context) -> float:
    """The run's cost of a wrong answer: the `wrong_answer_cost` setting, else the domain preset's."""
    return settings.wrong_answer_cost if settings.wrong_answer_cost >= 0 else PRESETS[settings.domain].cost


def thresholds_for(settings: Context) -> Thresholds:
    """The run's active thresholds: the domain preset (its cost's floor plus the caveat band for a plain answer),
    moved by the risk level, then the explicit overrides."""
    preset = PRESETS[settings.domain]
    active = Thresholds(preset.context_relevance, preset.groundedness, preset.answer_relevance,
                        show_floor(cost_for(settings)) + settings.caveat_band).shifted(RISK_SHIFT[settings.risk])
    chosen = {name: getattr(settings, field) for name, field in OVERRIDES.items() if getattr(settings, field) >= 0}
    return replace(active, **chosen)
