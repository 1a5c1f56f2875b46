"""Knowledge refinement (decompose-then-recompose): keeps the question-relevant strips of the passages
graded correct or ambiguous; citations still point at the original documents."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.components.backend import Components
from selfcrag.context import Context, settings_of
from selfcrag.nodes import model_notes, spent
from selfcrag.state import State


def make(components: Components):  # noqa: ANN201
    def refine(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        kept = {g["id"] for g in state.get("grades") or [] if g["label"] != "incorrect"}
        passages = [p for p in state.get("documents") or [] if p["id"] in kept]
        refinement = components.refiner.refine(state["question"], passages, settings)
        strips = refinement.strips
        return {
            "knowledge": strips,
            **spent(refinement),
            "trace": [
                {
                    "node": "refine",
                    "decision": f"{len(strips)} strips",
                    "reason": f"kept {len(strips)} strips from {len(passages)} passages not graded incorrect",
                    "strips": [s["id"] for s in strips],
                    **model_notes(refinement),
                }
            ],
        }

    return refine
