"""Self-RAG's usefulness check: does the answer address the question? What is missing feeds the rewrite."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.nodes import model_notes, spent
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def grade_answer(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        grade = components.answer_grader.grade(state["question"], state.get("answer") or "", settings)
        reason = f"answer relevance {grade.score:.2f} (threshold {settings.thresholds().answer_relevance})"
        if grade.missing:
            reason += f"; missing: {grade.missing}"
        return {
            "answer_relevance": grade.score,
            "answer_useful": grade.useful,
            "feedback": grade.missing,
            **spent(grade),
            "trace": [
                {"node": "grade_answer", "decision": "useful" if grade.useful else "not useful", "reason": reason,
                 "violations": grade.violations, "term_coverage": grade.term_coverage, **model_notes(grade)}
            ],
        }

    return grade_answer
