"""Generates a cited answer from the knowledge strips; a regeneration is told which statements the last
draft could not support, so it does not repeat them."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.components.backend import Components
from selfcrag.context import Context, settings_of
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.prepare import history_from
from selfcrag.progress import emit
from selfcrag.state import NodeFunction, State


def make(components: Components) -> NodeFunction:
    def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        generation = state.get("generations", 0) + 1
        avoid = list(state.get("unsupported_claims") or []) if generation > 1 else []
        if avoid:
            emit("generate", f"regenerating: {len(avoid)} unsupported statements", generation=generation)
        else:
            emit("generate", f"generating an answer from {len(state.get('knowledge') or [])} strips",
                 generation=generation)
        draft = components.generator.generate(state["question"], state.get("knowledge") or [], settings, avoid,
                                              history=history_from(state))  # fmt: skip
        reason = f"generation {generation}/{settings.max_generations} from {len(state.get('knowledge') or [])} strips"
        if avoid:
            reason += f", avoiding {len(avoid)} unsupported statements"
        return {
            "answer": draft.answer,
            "citations": draft.citations,
            "missing": draft.missing,
            "generations": generation,
            "unsupported_claims": [] if generation == 1 else avoid,
            **spent(draft),
            "trace": [
                {
                    "node": "generate",
                    "decision": "draft" if draft.answer else "no answer",
                    "reason": reason if draft.answer else f"{reason}; {draft.missing}",
                    "citations": [c["ref"] for c in draft.citations],
                    **model_notes(draft),
                }
            ],
        }

    return generate
