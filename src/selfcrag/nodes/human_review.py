"""Hands a low-confidence answer to a person: pauses the run with LangGraph `interrupt()` and resumes with
`Command(resume={"action": "approve" | "edit" | "reject", "answer": "...", "note": "..."})`.

A reply the node cannot use (no action, an edit without text, a number, a list, a huge string ...) never
raises: raising after `interrupt()` would fail the run, and LangGraph would replay the same bad reply on every
later resume, so the thread could never be approved. Instead the node records what was wrong and routing sends
the case back here (`routing.after_review`), which interrupts again with the same request plus `error`. Each
bad reply starts a fresh task, so nothing piles up: LangGraph matches resume values to a task's `interrupt()`
calls by their order, and a task that kept interrupting would replay its whole list of bad replies on every
resume; state keeps only the last error and a count.
"""

from __future__ import annotations

import reprlib
from typing import Any

from langgraph.types import interrupt

from selfcrag.chat import close_run
from selfcrag.components.backend import Components
from selfcrag.components.sanitize import clean_text
from selfcrag.language import language_of
from selfcrag.nodes.finalize import missing_evidence
from selfcrag.prompts import messages
from selfcrag.state import NodeFunction, State
from selfcrag.store import runs

ACTIONS = ("approve", "edit", "reject")
FIELDS = ("action", "answer", "note")
MAX_ANSWER_CHARS = 10_000  # an edited answer; longer is a paste gone wrong, not an answer
MAX_NOTE_CHARS = 2_000
# A bad reply is quoted back in the error, shortened: a 10 MB string costs a line, not 10 MB of state.
_QUOTE = reprlib.Repr()
_QUOTE.maxstring = _QUOTE.maxother = 60


def _shown(value: Any) -> str:
    return _QUOTE.repr(value)


def check_reply(reply: Any) -> tuple[dict[str, str], str]:
    """A reviewer's reply as `({"action", "answer"?, "note"?}, "")`, or `({}, what is wrong with it)`.
    A bare "approve" or "reject" is accepted too; the edited answer and the note come back cleaned."""
    usage = 'reply {"action": "approve"}, {"action": "edit", "answer": "<text>"} or {"action": "reject"}'
    if isinstance(reply, str) and reply.strip() in ("approve", "reject"):
        reply = {"action": reply.strip()}
    if not isinstance(reply, dict):
        kind = "an empty reply" if reply in ("", None) else f"{type(reply).__name__} {_shown(reply)}"
        return {}, f"got {kind}; {usage}"
    if unknown := [str(key) for key in reply if key not in FIELDS]:
        return {}, f"unknown field(s) {_shown(unknown)}: a reply has {', '.join(FIELDS)}; {usage}"
    action = reply.get("action")
    if action not in ACTIONS:  # `in` on a tuple of strings is safe for any value, hashable or not
        return {}, f"action must be one of {', '.join(ACTIONS)}, got {_shown(action)}"
    review = {"action": action}
    answer, note = reply.get("answer"), reply.get("note")
    if action == "edit":
        if isinstance(answer, str) and len(answer) > MAX_ANSWER_CHARS:
            return {}, f"the edited answer has {len(answer):,} characters; at most {MAX_ANSWER_CHARS:,}"
        if not isinstance(answer, str) or not clean_text(answer):
            return {}, f"edit needs the edited answer as non-empty text in `answer`, got {_shown(answer)}"
        review["answer"] = clean_text(answer)
    elif answer is not None:
        return {}, f"{action} takes no `answer` (to change the answer, use edit)"
    if note is not None:
        if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS:
            return {}, f"`note` must be text of at most {MAX_NOTE_CHARS:,} characters, got {_shown(note)}"
        review["note"] = clean_text(note)
    return review, ""


def make(components: Components) -> NodeFunction:
    def human_review(state: State) -> dict[str, Any]:
        earlier = state.get("review") or {}
        draft = state.get("draft") or {"answer": state.get("answer"), "citations": state.get("citations") or []}
        request: dict[str, Any] = {
            "question": state.get("question"),
            "draft_answer": draft["answer"],
            "reason": (state.get("trace") or [{}])[-1].get("reason", ""),  # why finalize routed it here
            "citations": draft["citations"],
            "evidence": [{"id": s["id"], "text": s["text"]} for s in state.get("knowledge") or []],
            "scores": state.get("scores"),
            "confidence": state.get("confidence"),
            "actions": list(ACTIONS),
        }
        if earlier.get("error"):  # the last reply could not be used: say why, and ask again
            request["error"] = earlier["error"]
        review, error = check_reply(interrupt(request))
        if error:
            # No decision: routing sends the case back here, to interrupt again with this error.
            return {"review": {"error": error, "bad_replies": int(earlier.get("bad_replies", 0)) + 1}}
        action = review["action"]
        update: dict[str, Any] = {"review": review}
        if action == "approve":
            update |= {"decision": "answer", "answer": draft["answer"], "citations": draft["citations"]}
        elif action == "edit":
            edited = review["answer"]
            # The reviewer's text keeps the sources it still cites ([doc_1]); a rewritten answer cites none.
            kept = [c for c in draft["citations"] if f"[{c['ref']}]" in edited]
            update |= {"decision": "answer", "answer": edited, "citations": kept}
        else:
            missing = missing_evidence(state)
            answer = messages.abstain(missing, language_of(state.get("question", "")))
            update |= {"decision": "abstain", "answer": answer, "citations": [], "missing": missing}
        reason = f"reviewer: {action}"
        if earlier.get("bad_replies"):
            reason += f" (after {earlier['bad_replies']} unusable repl{'y' if earlier['bad_replies'] == 1 else 'ies'})"
        update["trace"] = [{"node": "human_review", "decision": update["decision"], "reason": reason}]
        runs.record(state, update)  # the run is finished now: the monitor gets the reviewed decision
        return close_run(state, update)

    return human_review
