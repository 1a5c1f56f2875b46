"""Where the two concurrent checks of a draft meet (the hallucination check and the answer grade), and where the
draft becomes a candidate. LangGraph runs it once both checks have finished.

Every draft is kept, with what `finalize` needs to score it again (its evidence, citations and both checks'
verdicts), its calibrated probability and the features it was read from: which round wrote it, after how many
regenerations, whether it is plain's single-pass draft. The checks are features of that probability, not gates;
only exact findings make a draft unshowable (quality/drafts.py). `routing.after_judge` then ends the run when the
best candidate reaches the floor, or corrects (grading, a regeneration, a rewrite) while it does not."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.quality.calibration import unmeasured
from selfcrag.quality.confidence import confidence
from selfcrag.quality.drafts import showable, snapshot
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of

DRAFTING_NODES = ("first_draft", "generate")


def plain_draft(state: State) -> bool:
    """Whether the draft being judged is plain's single pass: the last step that wrote a draft is `first_draft`."""
    nodes = [s.get("node") for s in state.get("trace") or [] if s.get("node") in DRAFTING_NODES]
    return bool(nodes) and nodes[-1] == "first_draft"


def make(components: Components) -> NodeFunction:
    def judge(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        answer = state.get("answer") or ""
        if not answer:
            return {}  # nothing was drafted: no candidate
        plain, may_show = plain_draft(state), showable(state, settings)
        explained = confidence(state, answer, False, settings)
        candidate = {**snapshot(state, plain), "showable": may_show,
                     "confidence": explained["value"] if may_show else 0.0,
                     "features": explained["features"], "unmeasured": sorted(unmeasured(state, answer))}  # fmt: skip
        kind = "plain's draft" if plain else f"round {candidate['round']}, generation {candidate['generation']}"
        why = f"confidence {candidate['confidence']:.2f}" if may_show else "may not be shown (an exact finding)"
        number = len(state.get("candidates") or []) + 1
        step = {"node": "judge", "decision": "candidate", "reason": f"candidate {number} ({kind}): {why}",
                "confidence": candidate["confidence"]}
        return {"candidates": [*(state.get("candidates") or []), candidate], "trace": [step]}

    return judge
