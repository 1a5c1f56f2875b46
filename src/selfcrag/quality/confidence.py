"""The run's scores (RAG triad) and its confidence: the probability that the answer it shows is right.

The triad asks three separate questions (is the evidence relevant, is the answer supported by it, does the answer
address the question); the graders' loops act on them, and the output reports them. Confidence is what the decision
acts on: the calibrator (`quality/calibration.py`) maps the run's features to a probability, and the explanation
names the features that pulled it down most (weight x standardised value, on the log-odds).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from selfcrag.errors import CalibrationError
from selfcrag.quality.calibration import Calibrator, features, for_settings, load, shipped, sigmoid, unmeasured
from selfcrag.state import Scores, State

if TYPE_CHECKING:
    from selfcrag.context import Context

DOWN = 2  # features named as pulling confidence down


def used_strips(state: State) -> list[Any]:
    """The knowledge the answer cites, or all knowledge when it cites none."""
    strips = state.get("knowledge") or []
    cited = {c["doc_id"] for c in state.get("citations") or []}
    return [s for s in strips if s["doc_id"] in cited] or list(strips)


def context_relevance(state: State) -> float:
    used = [s["score"] for s in used_strips(state)]
    return round(max(used), 4) if used else 0.0


def triad(state: State) -> Scores:
    """Context relevance of the evidence the answer used, groundedness, answer relevance; all in [0, 1]."""
    answered = bool(state.get("answer"))
    return Scores(
        context_relevance=context_relevance(state),
        groundedness=round(float(state.get("groundedness", 0.0)), 4) if answered else 0.0,
        answer_relevance=round(float(state.get("answer_relevance", 0.0)), 4) if answered else 0.0,
    )


def calibrator(settings: Context) -> tuple[Calibrator, str]:
    """The run's calibrator, and the fault that made it fall back to the shipped one ("" when none). The setting
    was checked when the settings were made; a file that went bad since degrades the run, never ends it."""
    try:
        return for_settings(settings), ""
    except CalibrationError as exc:
        return load(shipped("offline")), str(exc)


def confidence(state: State, draft: str, contradicted: bool, settings: Context,
               measured: tuple[dict[str, float], frozenset[str]] | None = None) -> dict[str, Any]:
    """The probability that `draft` (the answer the run would show) is right, and why: every candidate feature,
    the push of each feature the calibrator uses, and the ones that pulled it down most. No draft: nothing shown
    can be right, so 0. `measured`: the features and the unmeasured ones as `judge` read them for this draft
    (`finalize` scores every candidate again with what it read where the draft was written), else read from
    `state` now."""
    model, fault = calibrator(settings)
    values, missing = measured or (features(state, draft, contradicted), unmeasured(state, draft))
    pushes = model.contributions(values, missing)  # a failed grader's placeholder pushes nothing
    value = round(sigmoid(model.bias + sum(pushes.values())), 4) if draft else 0.0
    down = [name for name, push in sorted(pushes.items(), key=lambda item: item[1]) if push < 0][:DOWN]
    summary = f"confidence {value:.2f} (probability the answer is right)"
    if not draft:
        summary += "; no answer to show"
    elif down:
        summary += "; pulled down most by " + ", ".join(f"{n} {values[n]:.2f}" for n in down)
    explained = {"value": value, "signals": {n: values[n] for n in model.features}, "contributions": pushes,
                 "weakest": down[0] if down and draft else "", "features": values, "summary": summary,
                 "calibration": Path(model.source).name}  # fmt: skip
    if fault:
        explained["calibration_error"] = fault
    return explained
