"""Hands a low-confidence answer to a person: pauses the run with LangGraph `interrupt()` and resumes with
`Command(resume={"action": "approve" | "edit" | "reject", "answer": "..."})`."""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from selfcrag.chat import close_run
from selfcrag.components.backend import Components
from selfcrag.language import language_of
from selfcrag.nodes.finalize import missing_evidence
from selfcrag.prompts import messages
from selfcrag.state import State
from selfcrag.store import runs

ACTIONS = ("approve", "edit", "reject")


def make(components: Components):  # noqa: ANN201
    def human_review(state: State) -> dict[str, Any]:
        draft = state.get("draft") or {"answer": state.get("answer"), "citations": state.get("citations") or []}
        reply = interrupt(
            {
                "question": state.get("question"),
                "draft_answer": draft["answer"],
                "reason": (state.get("trace") or [{}])[-1].get("reason", ""),  # why finalize routed it here
                "citations": draft["citations"],
                "evidence": [{"id": s["id"], "text": s["text"]} for s in state.get("knowledge") or []],
                "scores": state.get("scores"),
                "confidence": state.get("confidence"),
                "actions": list(ACTIONS),
            }
        )
        action = reply.get("action") if isinstance(reply, dict) else reply
        if action not in ACTIONS:
            raise ValueError(f"human_review resume needs action in {ACTIONS}, got {action!r}")
        update: dict[str, Any] = {"review": reply if isinstance(reply, dict) else {"action": action}}
        if action == "approve":
            update |= {"decision": "answer", "answer": draft["answer"], "citations": draft["citations"]}
        elif action == "edit":
            edited = (reply.get("answer") or "").strip() if isinstance(reply, dict) else ""
            if not edited:
                raise ValueError("human_review `edit` needs the edited text in `answer`")
            # The reviewer's text keeps the sources it still cites ([doc_1]); a rewritten answer cites none.
            kept = [c for c in draft["citations"] if f"[{c['ref']}]" in edited]
            update |= {"decision": "answer", "answer": edited, "citations": kept}
        else:
            missing = missing_evidence(state)
            answer = messages.abstain(missing, language_of(state.get("question", "")))
            update |= {"decision": "abstain", "answer": answer, "citations": [], "missing": missing}
        update["trace"] = [{"node": "human_review", "decision": update["decision"], "reason": f"reviewer: {action}"}]
        runs.record(state, update)  # the run is finished now: the monitor gets the reviewed decision
        return close_run(state, update)

    return human_review
