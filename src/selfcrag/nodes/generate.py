"""Generates a cited answer from the knowledge strips; a regeneration is told which statements the last
draft could not support, so it does not repeat them. Where the strips fall short the generator reads more of
the run's passages: whole passages before a decline, a bridge question's second hop (`offline/drafting.py`).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components, component_for
from selfcrag.context import Context
from selfcrag.ledger import ledger_of
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.prepare import history_from
from selfcrag.offline.drafting import RunEvidence, write_draft
from selfcrag.progress import emit
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def run_evidence(state: State) -> RunEvidence:
    """What generation may read of the run's evidence."""
    return RunEvidence(question=state["question"], knowledge=state.get("knowledge") or [],
                       evidence=state.get("evidence") or [], grades=state.get("grades") or [],
                       sources=state.get("sources") or [], set_aside=state.get("set_aside") or [])  # fmt: skip


def make(components: Components) -> NodeFunction:
    def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        ledger = ledger_of(state, runtime, settings)  # the run's counts, never the client-writable state's
        generation = ledger.next_generation()
        avoid = list(state.get("unsupported_claims") or []) if generation > 1 else []
        run = run_evidence(state)
        if avoid:
            emit("generate", f"regenerating: {len(avoid)} unsupported statements", generation=generation)
        else:
            emit("generate", f"generating an answer from {len(run.knowledge)} strips", generation=generation)
        history, budget_left = history_from(state, settings), ledger.calls < settings.max_llm_calls
        made = write_draft(component_for(components, "generator", settings), run, settings, avoid, history,
                           budget_left=budget_left)  # fmt: skip
        draft = made.draft
        reason = f"generation {generation}/{settings.max_generations} from {len(run.knowledge)} strips"
        reason += "".join(f"; {note}" for note in made.notes)
        if avoid:
            reason += f", avoiding {len(avoid)} unsupported statements"
        return {
            **({"knowledge": made.knowledge} if made.knowledge is not None else {}),
            "answer": draft.answer,
            "citations": draft.citations,
            "missing": draft.missing,
            "generations": generation,
            "unsupported_claims": [] if generation == 1 else avoid,
            **spent(made.first, made.whole, made.extension),
            "trace": [
                {
                    "node": "generate",
                    "decision": "draft" if draft.answer else "no answer",
                    "reason": reason if draft.answer else f"{reason}; {draft.missing}",
                    "citations": [c["ref"] for c in draft.citations],
                    **({"answer_probability": draft.probability} if draft.probability is not None else {}),
                    "whole_passages": made.whole_passages,
                    "second_hop": made.second_hop,
                    **model_notes(made.first, made.whole, made.extension),
                }
            ],
        }

    return generate
