"""The review queue: answers paused for a person (LangGraph interrupt in `human_review`), listed from the store and
decided by resuming their thread, whose final state then holds the reviewed answer.

A review's id is its thread's id (a thread holds at most one paused run). Deciding claims the review first
(pending -> resolving in one UPDATE), so two reviewers cannot both resume it; a resume that fails puts it back.
"""

from __future__ import annotations

import json
import time
from typing import Any

from selfcrag.store.db import StoreError, database

ACTIONS = ("approve", "edit", "reject")
DONE = {"approve": "approved", "edit": "edited", "reject": "rejected"}

ENQUEUE = """INSERT INTO selfcrag_reviews (thread_id, created_at, question, draft, scores, confidence, reason, status)
    VALUES (?, ?, ?, ?, ?, ?, ?, 'pending')
    ON CONFLICT (thread_id) DO UPDATE SET created_at = excluded.created_at, question = excluded.question,
    draft = excluded.draft, scores = excluded.scores, confidence = excluded.confidence, reason = excluded.reason,
    status = 'pending', resolved_at = NULL, answer = '', note = ''"""


class ReviewError(ValueError):
    """No such review, or it cannot be decided now: one line for the user."""


def enqueue(thread_id: str, request: dict[str, Any]) -> None:
    """Queue the paused run of `thread_id`; `request` is the interrupt's payload (question, draft, scores...)."""
    database().execute(ENQUEUE, (thread_id, time.time(), request.get("question") or "",
                                 request.get("draft_answer") or "", json.dumps(request.get("scores") or {}),
                                 request.get("confidence"), request.get("reason") or ""))  # fmt: skip


def pending() -> list[dict[str, Any]]:
    """Reviews waiting for a person, oldest first, each with its `age_seconds`."""
    rows = database().query("SELECT * FROM selfcrag_reviews WHERE status = 'pending' ORDER BY created_at")
    return [_shaped(row) for row in rows]


def get(review_id: str) -> dict[str, Any]:
    rows = database().query("SELECT * FROM selfcrag_reviews WHERE thread_id = ?", (review_id,))
    if not rows:
        raise ReviewError(f"no review {review_id!r} (see `selfcrag review list`)")
    return _shaped(rows[0])


def resolve(review_id: str, action: str, answer: str = "", note: str = "", graph: Any = None) -> dict[str, Any]:
    """Approve, edit (with `answer`) or reject (with an optional `note`) the review, resuming its thread. Returns
    the thread's final output (the reviewed answer)."""
    from langgraph.types import Command

    from selfcrag.store.threads import config, finish, paused, persistent

    if action not in ACTIONS:
        raise ReviewError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    if action == "edit" and not answer.strip():
        raise ReviewError("edit needs the reviewed answer: --answer TEXT")
    status = get(review_id)["status"]  # raises for an unknown id
    claimed = database().execute("UPDATE selfcrag_reviews SET status = 'resolving' WHERE thread_id = ? AND "
                                 "status = 'pending'", (review_id,))  # fmt: skip
    if not claimed:
        raise ReviewError(f"review {review_id} is {status}, not pending")
    graph = persistent(graph)
    try:
        if not paused(graph, review_id):
            _set(review_id, "stale", note="the thread is no longer paused")
            raise ReviewError(f"review {review_id}: its thread is no longer paused (marked stale)")
        reply = {"action": action} | ({"answer": answer.strip()} if action == "edit" else {})
        reply |= {"note": note} if note else {}
        result = finish(graph, review_id, dict(graph.invoke(Command(resume=reply), config(review_id))))
    except ReviewError:
        raise
    except BaseException:
        _set(review_id, "pending")  # nothing was decided: the review waits again
        raise
    _set(review_id, DONE[action], answer=result.get("answer", ""), note=note)
    return result


def _set(review_id: str, status: str, answer: str = "", note: str = "") -> None:
    try:
        database().execute("UPDATE selfcrag_reviews SET status = ?, resolved_at = ?, answer = ?, note = ? "
                           "WHERE thread_id = ?", (status, time.time(), answer, note, review_id))  # fmt: skip
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"review {review_id}: {exc}") from None


def _shaped(row: dict[str, Any]) -> dict[str, Any]:
    review = dict(row)
    review["id"] = review["thread_id"]
    review["scores"] = json.loads(review.get("scores") or "{}")
    review["age_seconds"] = round(time.time() - review["created_at"], 1)
    return review
