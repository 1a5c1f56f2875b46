"""The run's first candidate: plain RAG's single-pass draft. The question and the first round's retrieved passages,
whole, go to the generator in one call, exactly as plain retrieve-then-generate would (offline: the extractive
reader over the same passages). The draft then goes to both checks like any other; its verdicts are features of its
score, never a veto (`judge`, `finalize`).

Keeping plain's draft among the candidates is the cheapest guarantee that the graph never does worse than plain: a
correction round (grading, refinement, a rewrite, web search) runs only while the best candidate scores below the
floor, and its drafts join the candidates; none replaces this one except by scoring higher.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components, component_for
from selfcrag.context import Context
from selfcrag.contract import Passage, Strip
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.prepare import history_from
from selfcrag.progress import emit
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def as_strips(passages: list[Passage]) -> list[Strip]:
    """Whole passages in the strips' shape, scored by retrieval: the evidence plain RAG generates from."""
    return [Strip(id=p["id"], doc_id=p["doc_id"], title=p["title"], source=p["source"], text=p["text"],
                  score=round(float(p["score"]), 4)) for p in passages]  # fmt: skip


def make(components: Components) -> NodeFunction:
    def first_draft(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        passages = as_strips(state.get("documents") or [])
        emit("first_draft", f"drafting an answer from the {len(passages)} retrieved passages, whole")
        generator = component_for(components, "generator", settings)
        draft = generator.generate(state["question"], passages, settings, [], history=history_from(state, settings))
        reason = f"plain's single pass: one generation from the {len(passages)} retrieved passages, whole"
        return {
            "knowledge": passages if draft.answer else [],  # no draft: nothing was drafted from them
            "answer": draft.answer,
            "citations": draft.citations,
            "missing": draft.missing,
            "unsupported_claims": [],
            **spent(draft),
            "trace": [
                {
                    "node": "first_draft",
                    "decision": "draft" if draft.answer else "no answer",
                    "reason": reason if draft.answer else f"{reason}; {draft.missing}",
                    "citations": [c["ref"] for c in draft.citations],
                    **({"answer_probability": draft.probability} if draft.probability is not None else {}),
                    **model_notes(draft),
                }
            ],
        }

    return first_draft
