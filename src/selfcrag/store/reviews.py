"""The review queue: answers paused for a person (LangGraph interrupt in `human_review`), listed from the store and
decided by resuming their thread (`selfcrag.threads.resolve_review`, changed: out of here, because resuming runs
the graph, which sits above the store), whose final state then holds the reviewed answer.

A review's id is its thread's id (a thread holds at most one paused run). Deciding claims the review first: it
takes the thread's lease (leases.py: a holder and an expiry, renewed while it works), so two reviewers — or a
reviewer and a new question on the thread — cannot both resume it. While claimed the review shows as `resolving`
with `claimed_by`; the row itself stays pending until a decision is recorded, so a reviewer that dies (kill -9,
SIGTERM) leaves it pending again once the lease is freed or runs out. (`resolving` in the row is a claim written
by an older version, which had no lease: it is pending too.)

The record is written under the lease (leases.py, fencing): a reviewer that stalled past its claim records nothing.
The thread is what was published: a record left pending by a reviewer that stopped between the thread's write and
the record's is set from the thread by the next reviewer to claim it (threads.resolve_review).
"""

from __future__ import annotations

import json
import time
from typing import Any

from selfcrag.errors import LeaseLostError, ReviewError, StoreError
from selfcrag.store.db import database
from selfcrag.store.leases import mine

ACTIONS = ("approve", "edit", "reject")
DONE = {"approve": "approved", "edit": "edited", "reject": "rejected"}
OPEN = ("pending", "resolving")  # undecided; `resolving` only from versions before the lease
# Each review with the holder of a live claim on it (a review lease on its thread), if any.
SELECT = """SELECT r.*, t.holder AS claimed_by FROM selfcrag_reviews r LEFT JOIN selfcrag_turns t
    ON t.thread_id = r.thread_id AND t.purpose = 'review' AND t.expires_at >= ?"""

ENQUEUE = """INSERT INTO selfcrag_reviews (thread_id, created_at, question, draft, scores, confidence, reason, status)
    VALUES (?, ?, ?, ?, ?, ?, ?, 'pending')
    ON CONFLICT (thread_id) DO UPDATE SET created_at = excluded.created_at, question = excluded.question,
    draft = excluded.draft, scores = excluded.scores, confidence = excluded.confidence, reason = excluded.reason,
    status = 'pending', resolved_at = NULL, answer = '', note = ''"""


def enqueue(thread_id: str, request: dict[str, Any]) -> None:
    """Queue the paused run of `thread_id`; `request` is the interrupt's payload (question, draft, scores...)."""
    database().execute(ENQUEUE, (thread_id, time.time(), request.get("question") or "",
                                 request.get("draft_answer") or "", json.dumps(request.get("scores") or {}),
                                 request.get("confidence"), request.get("reason") or ""),
                       lease=mine(thread_id))  # fmt: skip


def pending() -> list[dict[str, Any]]:
    """Reviews waiting for a person, oldest first, each with its `age_seconds`."""
    rows = database().query(f"{SELECT} WHERE r.status IN ('pending', 'resolving') ORDER BY r.created_at",
                            (time.time(),))  # fmt: skip
    return [_shaped(row) for row in rows]


def get(review_id: str) -> dict[str, Any]:
    rows = database().query(f"{SELECT} WHERE r.thread_id = ?", (time.time(), review_id))
    if not rows:
        raise ReviewError(f"no review {review_id!r} (see `selfcrag review list`)")
    return _shaped(rows[0])


def set_status(review_id: str, status: str, answer: str = "", note: str = "") -> None:
    """Record the review's outcome; under its claim, only while the claim is current (LeaseLostError if not)."""
    try:
        database().execute("UPDATE selfcrag_reviews SET status = ?, resolved_at = ?, answer = ?, note = ? "
                           "WHERE thread_id = ?", (status, time.time(), answer, note, review_id),
                           lease=mine(review_id))  # fmt: skip
    except (StoreError, LeaseLostError):
        raise
    except Exception as exc:
        raise StoreError(f"review {review_id}: {exc}") from None


def _shaped(row: dict[str, Any]) -> dict[str, Any]:
    review = dict(row)
    review["id"] = review["thread_id"]
    if review["status"] in OPEN:  # claimed only while a live lease says so
        review["status"] = "resolving" if review.get("claimed_by") else "pending"
    review["scores"] = json.loads(review.get("scores") or "{}")
    review["age_seconds"] = round(time.time() - review["created_at"], 1)
    return review
