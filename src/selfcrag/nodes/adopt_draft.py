"""Where grading and the speculative draft meet (LangGraph runs it once both have finished). It refines the
passages grading kept, as `refine` would, and keeps the draft when grading agrees (`speculate.discard_reason`):
the draft becomes the run's first generation on that evidence and goes to both checks. Otherwise the draft is
dropped, the trace says why, and the run takes the normal path (refine -> generate, or a correction)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.ledger import ledger_of
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.speculate import discard_reason
from selfcrag.progress import emit
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def adopt_draft(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        kept_ids = {g["id"] for g in state.get("grades") or [] if g["label"] != "incorrect"}
        passages = [p for p in state.get("documents") or [] if p["id"] in kept_ids]
        # refine_with="scores" (speculation needs it): the same strips `refine` would keep, with no model call.
        refinement = components.refiner.refine(state["question"], passages, settings) if passages else None
        refined = refinement.strips if refinement else []
        why = discard_reason(state, refined, settings)
        emit("adopt_draft", f"speculative draft discarded: {why}" if why else "speculative draft kept",
             kept=not why)  # fmt: skip
        if why:
            return {"speculation": {"kept": False, "reason": why},
                    "trace": [{"node": "adopt_draft", "decision": "discarded", "reason": why}]}  # fmt: skip
        draft = state["speculation"]
        ledger = ledger_of(state, runtime, settings)
        return {
            "speculation": {"kept": True, "reason": "grading agrees"},
            "knowledge": refined,
            "answer": draft["answer"],
            "citations": draft["citations"],
            "missing": draft["missing"],
            "generations": ledger.next_generation(),
            "unsupported_claims": [],
            **ledger.spent(spent(refinement)),  # refined by scores: no model call, but the totals stay the run's
            "trace": [
                {
                    "node": "adopt_draft",
                    "decision": "kept",
                    "reason": f"grading agrees: action correct, and the {len(refined)} strips refined from the "
                    f"{len(passages)} kept passages are all in the draft's evidence, which it cites under the "
                    "same labels",
                    "strips": [s["id"] for s in refined],
                    **model_notes(refinement),
                }
            ],
        }

    return adopt_draft
