"""The local verifier's step (optional, off by default): asks the `verifier` model whether the document the draft
to show cites, with the best other document the run kept, answers the question with it. Routing sends a run here
on its way to `finalize` only when the setting names a model and the run kept a draft, so Studio shows the step
exactly when it ran. Its score goes into the trace, where the calibration feature `verifier` reads it for that
draft; `finalize` decides as usual."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.finalize import most_confident
from selfcrag.quality.confidence import used_strips
from selfcrag.state import NodeFunction, State
from selfcrag.text.terms import strip_citations
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def verify(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        shown, _, _ = most_confident(state, settings)  # the draft finalize would show without the verifier
        # The cited documents' strips first, then the rest the run kept: the verifier reads the best of those too.
        cited = used_strips(shown)
        draft = shown.get("answer") or ""
        strips = cited + [s for s in shown.get("knowledge") or [] if s not in cited]
        verdict = components.verifier.verify(state["question"], draft, strips, settings)
        if verdict.score is None:
            reason = f"verifier unmeasured ({verdict.error}); the run decides as without it"
        else:
            reason = f"P(the cited passage answers the question with this draft) = {verdict.score:.2f}"
        step = {"node": "verify", "decision": "unmeasured" if verdict.score is None else "measured",
                "reason": reason, "score": verdict.score, "verified": strip_citations(draft),
                "passages": list(dict.fromkeys(s["id"] for s in strips)), "reply": verdict.reply,
                **model_notes(verdict)}  # fmt: skip
        return {**spent(verdict), "trace": [step]}

    return verify
