"""Web search (CRAG's corrective step): results are graded like retrieved passages and refined into strips,
which join the run's evidence like any round's (`offline/refine.py accumulate`): `ambiguous` adds them to
what this round kept, `incorrect` to what earlier rounds found (this round's passages were all rejected, so
they add nothing). Failures degrade to retrieval only.
Sentences of a result that address the assistant (prompt injection) are removed before grading."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.errors import WebSearchError
from selfcrag.ledger import ledger_of
from selfcrag.nodes import model_notes, spent
from selfcrag.offline.refine import accumulate
from selfcrag.progress import emit
from selfcrag.quality import injection
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def web_search(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        query = state.get("web_query") or state["question"]
        ledger_of(state, runtime, settings).new_evidence()
        update: dict[str, Any] = {"web_searched": True, "generations": 0}
        try:
            results, removed = injection.clean_passages(components.web.search(query, settings))
            screening = components.screen.screen(results, settings)  # by meaning, on the model backend
            results, also = injection.drop(results, screening.removed)
            removed += also
        except WebSearchError as exc:
            emit("web_search", f"{exc}; continuing with the knowledge base only", failed=True)
            update["web_available"] = False  # the knowledge stays what the rounds so far found
            update["trace"] = [{"node": "web_search", "decision": "unavailable", "reason": str(exc)}]
            return update
        grading = refinement = None
        kept = []
        if results:
            grading = components.relevance.grade(state["question"], results, settings)
            relevant = {g["id"] for g in grading.grades if g["label"] != "incorrect"}
            kept = [r for r in results if r["id"] in relevant]
        strips = []
        if kept:
            refinement = components.refiner.refine(state["question"], kept, settings)
            strips = refinement.strips
        emit("web_search", f"web search: {len(results)} results, {len(kept)} relevant", results=len(results),
             relevant=len(kept))
        before = state.get("evidence") or []
        update["evidence"], update["knowledge"] = accumulate(before, strips, settings)
        update |= spent(screening, grading, refinement)
        update["trace"] = [
            {
                "node": "web_search",
                "decision": f"{len(strips)} web strips",
                "reason": f"{len(results)} results for {query!r}, {len(kept)} relevant" + injection.reason(removed),
                "urls": [r["source"] for r in kept],
                "evidence_added": len(update["evidence"]) - len(before),
                **model_notes(screening, grading, refinement),
                **injection.notes(removed),
            }
        ]
        return update

    return web_search
