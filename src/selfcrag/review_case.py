"""Where an answer held for review waits, and who may read or decide it.

Run by a client that is not a reviewer (an asker on a server with auth, selfcrag/auth.py), the held case — the
draft, its citations, evidence and what a rejection would say is missing — goes to the LangGraph store under
("selfcrag_reviews", <thread id>), which only reviewers read; the thread's state and the interrupt carry only a
pointer, and the state loses every other copy of the draft's text (the candidates, the
unsupported sentences, the answer grader's feedback, the trace's quotes) and the passages it was drawn from.
Everywhere else (the CLI, `ask()`, a server without auth, an operator's or a reviewer's own run) whoever reads the
thread may read the draft, and the case waits in state `draft` as before.

A decision is a reviewer's: the resume of a run on a server with auth counts only from an identity with the
`reviewer` permission, and the review record names it. An approve publishes the case as the graph held it (the
store or state, neither of which a client writes), never anything a client sent.
"""

from __future__ import annotations

import hashlib
from typing import Any

from langgraph.config import get_config, get_store
from langgraph.store.base import BaseStore
from langgraph.types import Overwrite

REVIEWS = ("selfcrag_reviews",)
QUOTING = ("unsupported", "draft", "candidates")  # trace keys that may quote the draft


def _configurable() -> dict[str, Any]:
    try:
        return dict(get_config().get("configurable") or {})
    except RuntimeError:  # a node called on its own (unit tests): no run, no caller
        return {}


def caller() -> tuple[str, list[str]] | None:
    """(identity, permissions) of whoever started this run on a LangGraph server with auth; None elsewhere (no
    server, or a server without auth, where every client is trusted alike)."""
    configurable = _configurable()
    permissions = configurable.get("langgraph_auth_permissions")
    if not permissions:
        return None
    return str(configurable.get("langgraph_auth_user_id") or ""), [str(p) for p in permissions]


def must_seal() -> bool:
    """Whether the client that started this run may not read the draft it may be held with."""
    who = caller()
    return who is not None and "reviewer" not in who[1]


def decider() -> tuple[bool, str]:
    """(may decide, identity) of whoever resumed the run: anyone where there is no auth, else a reviewer."""
    who = caller()
    return (True, "") if who is None else ("reviewer" in who[1], who[0])


def _store() -> BaseStore | None:
    try:
        return get_store()
    except (RuntimeError, KeyError):
        return None


def draft_id(case: dict[str, Any]) -> str:
    """A short name of the held text, so a reviewer can say which draft they read."""
    return hashlib.sha256(str(case.get("draft_answer", "")).encode("utf-8")).hexdigest()[:12]


def hold(case: dict[str, Any]) -> dict[str, Any]:
    """What state `draft` keeps of a held case: the case itself, or (sealed) a pointer to it in the store."""
    thread = str(_configurable().get("thread_id") or "")
    case = {**case, "draft_id": draft_id(case)}
    if not must_seal():
        return case
    if (store := _store()) is not None and thread:
        store.put(REVIEWS, thread, case, index=False)
    # No store to hold it (a parent graph without one): the draft is dropped; a reviewer can still edit or reject.
    return {"sealed": True, "thread_id": thread, "draft_id": case["draft_id"]}


def held(draft: dict[str, Any] | None) -> dict[str, Any] | None:
    """The case a reviewer saw: from the store when sealed, else from state; None when it is gone."""
    if not draft:
        return None
    if not draft.get("sealed"):
        return draft
    store = _store()
    item = store.get(REVIEWS, draft["thread_id"]) if store is not None and draft.get("thread_id") else None
    return dict(item.value) if item is not None and item.value.get("draft_id") == draft.get("draft_id") else None


def release() -> None:
    """The thread's case is decided, or a new run on it did not hold: nothing of it waits any longer."""
    thread, store = str(_configurable().get("thread_id") or ""), _store()
    if store is not None and thread:
        store.delete(REVIEWS, thread)


def sealed_state(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """The state update that removes every other copy of a sealed draft's text from the thread's state, and the
    passages it was drawn from (an extractive draft is their sentences): the case in the store keeps its evidence."""
    quiet = [{k: ("" if k == "draft" else []) if k in QUOTING else v for k, v in step.items()} for step in trace]
    passages: dict[str, list[Any]] = {key: [] for key in ("documents", "knowledge", "evidence", "sources", "set_aside")}
    return {"candidates": [], "unsupported_claims": [], "feedback": "", **passages,
            "trace": Overwrite(quiet)}
