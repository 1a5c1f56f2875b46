"""The CRAG retrieval evaluator: grades each passage correct / ambiguous / incorrect, then picks the action."""

from __future__ import annotations

from collections import Counter
from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.nodes import model_notes, spent
from selfcrag.offline.offline_grading import crag_action
from selfcrag.progress import emit
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def grade_documents(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        passages = state.get("documents") or []
        grading = components.relevance.grade(state["question"], passages, settings) if passages else None
        grades = grading.grades if grading else []
        action = crag_action(grades, settings.crag_policy)
        counts = Counter(g["label"] for g in grades)
        summary = ", ".join(f"{counts[label]} {label}" for label in ("correct", "ambiguous", "incorrect"))
        found = ", ".join(f"{counts[lab]} {lab}" for lab in ("correct", "ambiguous", "incorrect") if counts[lab])
        emit("grade_documents", f"graded {len(grades)} documents: {found} -> {action}" if grades
             else "no documents to grade", action=action, counts=dict(counts))
        return {
            "grades": grades,
            "crag_action": action,
            **spent(grading),
            "trace": [
                {
                    "node": "grade_documents",
                    "decision": action,
                    "reason": f"graded {len(grades)} passages: {summary} (policy {settings.crag_policy})"
                    if grades
                    else "no passages retrieved",
                    "grades": [{"id": g["id"], "label": g["label"], "score": round(g["score"], 3),
                                "reason": g["reason"]} for g in grades],
                    **model_notes(grading),
                }
            ],
        }

    return grade_documents
