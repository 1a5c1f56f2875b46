"""Hands a low-confidence answer to a person: pauses the run with LangGraph `interrupt()` and resumes with
`Command(resume={"action": "approve" | "edit" | "reject", "answer": "...", "note": "...", "draft_id": "..."})`
(`draft_id`, optional: the held draft the reviewer read; a reply naming another one decides nothing). Where the
case waits, and who may decide it: selfcrag/review_case.py.

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

from selfcrag import review_case
from selfcrag.backend import Components
from selfcrag.chat import close_run
from selfcrag.language import language_of
from selfcrag.nodes.finalize import missing_evidence
from selfcrag.prompts import messages
from selfcrag.state import NodeFunction, State
from selfcrag.store import runs
from selfcrag.text.sanitize import clean_text

ACTIONS = ("approve", "edit", "reject")
FIELDS = ("action", "answer", "note", "draft_id")
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
    if (named := reply.get("draft_id")) is not None:
        if not isinstance(named, str) or not 0 < len(named) <= 64:
            return {}, f"`draft_id` must be the held draft's id (text), got {_shown(named)}"
        review["draft_id"] = named
    return review, ""


def case_of(state: State) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(what state `draft` holds, the held case the reviewer reads) — the case is None when it is gone. A thread
    paused before cases were whole (state `draft` had only answer and citations) gets its case from the state."""
    kept = dict(state.get("draft") or {})
    if kept and "draft_answer" not in kept and not kept.get("sealed"):
        kept = {"question": state.get("question"), "draft_answer": kept.get("answer"),
                "reason": (state.get("trace") or [{}])[-1].get("reason", ""), "citations": kept.get("citations") or [],
                "evidence": [{"id": s["id"], "text": s["text"]} for s in state.get("knowledge") or []],
                "scores": state.get("scores"), "confidence": state.get("confidence")}  # fmt: skip
        kept["draft_id"] = review_case.draft_id(kept)
    return kept, review_case.held(kept)


def request_for(state: State, kept: dict[str, Any], case: dict[str, Any] | None) -> dict[str, Any]:
    """What the interrupt shows: the whole case, or (sealed) where a reviewer reads it — never the draft."""
    if not kept.get("sealed"):
        shown = {k: v for k, v in (case or kept).items() if k != "missing"}
        return {**shown, "actions": list(ACTIONS)}
    return {"question": state.get("question"), "reason": (state.get("trace") or [{}])[-1].get("reason", ""),
            "scores": state.get("scores"), "confidence": state.get("confidence"), "actions": list(ACTIONS),
            "draft_id": kept.get("draft_id"),
            "review": {"store": list(review_case.REVIEWS), "key": kept.get("thread_id")}}  # fmt: skip


def refusal(review: dict[str, str], case: dict[str, Any] | None) -> str:
    """Why a well-formed reply still cannot decide: who sent it, or what it would publish ("" when it can)."""
    allowed, who = review_case.decider()
    if not allowed:
        return f"only a reviewer decides a held answer; {who or 'this caller'} is not one"
    if review.get("draft_id") and case and review["draft_id"] != case.get("draft_id"):
        return f"draft {review['draft_id']} is not the one held now ({case.get('draft_id')}): read it again"
    if review["action"] == "approve" and case is None:
        return "the held draft is gone from the review store: edit or reject"
    return ""


def make(components: Components) -> NodeFunction:
    def human_review(state: State) -> dict[str, Any]:
        earlier = state.get("review") or {}
        kept, case = case_of(state)
        request = request_for(state, kept, case)
        if earlier.get("error"):  # the last reply could not be used: say why, and ask again
            request["error"] = earlier["error"]
        review, error = check_reply(interrupt(request))
        error = error or refusal(review, case)
        if error:
            # No decision: routing sends the case back here, to interrupt again with this error.
            return {"review": {"error": error, "bad_replies": int(earlier.get("bad_replies", 0)) + 1}}
        action = review["action"]
        reviewer = review_case.decider()[1]
        update: dict[str, Any] = {"review": review | ({"reviewer": reviewer} if reviewer else {})}
        draft_answer, citations = (case or {}).get("draft_answer") or "", (case or {}).get("citations") or []
        if action == "approve":
            update |= {"decision": "answer", "answer": draft_answer, "citations": citations}
        elif action == "edit":
            edited = review["answer"]
            # The reviewer's text keeps the sources it still cites ([doc_1]); a rewritten answer cites none.
            kept_citations = [c for c in citations if f"[{c['ref']}]" in edited]
            update |= {"decision": "answer", "answer": edited, "citations": kept_citations}
        else:
            missing = (case or {}).get("missing") or missing_evidence(state)
            answer = messages.abstain(missing, language_of(state.get("question", "")))
            update |= {"decision": "abstain", "answer": answer, "citations": [], "missing": missing}
        reason = f"reviewer: {action}"
        if earlier.get("bad_replies"):
            reason += f" (after {earlier['bad_replies']} unusable repl{'y' if earlier['bad_replies'] == 1 else 'ies'})"
        step = {"node": "human_review", "decision": update["decision"], "reason": reason}
        update["trace"] = [step | ({"reviewer": reviewer} if reviewer else {})]
        if kept.get("sealed"):
            review_case.release()  # decided: the draft no longer waits for anyone
        runs.record(state, update)  # the run is finished now: the monitor gets the reviewed decision
        return close_run(state, update)

    return human_review
