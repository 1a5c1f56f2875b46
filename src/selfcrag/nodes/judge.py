"""Where the two concurrent checks of a draft meet (the hallucination check and the answer grade). LangGraph runs
it once both have finished; `routing.after_checks` then reads both verdicts to regenerate, rewrite the query, or
finalize.

It keeps every grounded draft of the run, with what `finalize` needs to score it (its evidence, citations and
both checks' verdicts): a later round's draft, or its failure to draft, must not replace a better earlier one.
`finalize` shows the kept draft with the highest confidence (`quality/drafts.py`)."""

from __future__ import annotations

from typing import Any

from selfcrag.backend import Components
from selfcrag.quality.drafts import snapshot
from selfcrag.state import NodeFunction, State


def make(components: Components) -> NodeFunction:
    def judge(state: State) -> dict[str, Any]:
        if not (state.get("answer") and state.get("grounded")):
            return {}  # an ungrounded draft is never shown: nothing to keep
        return {"drafts": [*(state.get("drafts") or []), snapshot(state)]}

    return judge
