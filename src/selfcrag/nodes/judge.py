"""Where the two concurrent checks of a draft meet (the hallucination check and the answer grade). LangGraph runs
it once both have finished; `routing.after_checks` then reads both verdicts to regenerate, rewrite the query, or
finalize.

It keeps every draft of the run that may be shown (a grounded one; with a calibration that scores ungrounded drafts,
any the check did not veto: `quality/drafts.py`), with what `finalize` needs to score it (its evidence, citations
and both checks' verdicts): a later round's draft, or its failure to draft, must not replace a better earlier one.
`finalize` shows the kept draft with the highest confidence."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.quality.drafts import showable, snapshot
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def judge(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        if not showable(state, settings_of(runtime.context)):
            return {}  # a draft that may not be shown: nothing to keep
        return {"drafts": [*(state.get("drafts") or []), snapshot(state)]}

    return judge
