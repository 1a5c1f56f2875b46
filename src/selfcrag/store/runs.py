"""The quality monitor's record of every finished run, written by the node that ends it (`finalize`, or
`human_review` once a person decided), so every face records: the CLI, `ask()`, a parent graph, a LangGraph server.

A run paused for review is recorded by `finalize` with decision `human_review`; the reviewer's decision updates the
same record (its latency stays the machine's, not the reviewer's). Recording is fail-safe and cheap: one upsert;
a database fault logs a warning on `selfcrag.store` and the run goes on. `SELFCRAG_RECORD_RUNS=0` turns it off.
A run on a thread whose lease this code holds is recorded under the lease (leases.py, fencing): a holder that
stalled past it records nothing (a warning), and its run stops at its next checkpoint.

A low-quality run (any triad score or the confidence below its minimum) is logged as a WARNING on the logger
`selfcrag.monitor`, with the record in `extra={"selfcrag_run": {...}}`, for routing to alerting.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from selfcrag.errors import LeaseLostError
from selfcrag.store.db import database
from selfcrag.store.leases import mine

MONITOR = logging.getLogger("selfcrag.monitor")
# Silent until the application configures logging (a library must not print on its own); faults on
# `selfcrag.store` are not silenced, so a run that could not be recorded says so on stderr.
MONITOR.addHandler(logging.NullHandler())
LOG = logging.getLogger("selfcrag.store")

UPSERT = """INSERT INTO selfcrag_runs (run_key, created_at, finished_at, thread_id, question, decision, passed, below,
    confidence, context_relevance, groundedness, answer_relevance, latency_ms, llm_calls, tokens, domain, reviewed)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (run_key) DO UPDATE SET finished_at = excluded.finished_at, decision = excluded.decision,
    passed = excluded.passed, below = excluded.below, confidence = excluded.confidence,
    context_relevance = excluded.context_relevance, groundedness = excluded.groundedness,
    answer_relevance = excluded.answer_relevance, latency_ms = excluded.latency_ms, llm_calls = excluded.llm_calls,
    tokens = excluded.tokens, domain = excluded.domain"""
REVIEWED = "UPDATE selfcrag_runs SET decision = ?, reviewed = ?, finished_at = ? WHERE run_key = ?"


def enabled() -> bool:
    return os.environ.get("SELFCRAG_RECORD_RUNS", "1").strip().lower() not in ("0", "false", "no", "off")


def record(state: Mapping[str, Any], update: dict[str, Any], domain: str | None = None) -> None:
    """Record the run `update` ends (finalize passes its `domain`; human_review does not). Never raises."""
    if not enabled():
        return
    try:
        row = run_row(state, update, domain, _thread_id())
        if domain is None:  # a person decided a paused run: its record gets the decision
            _reviewed(row, str((update.get("review") or {}).get("action", "")))
        else:
            _store(row)
            if not row["passed"]:
                MONITOR.warning("low-quality run: decision %s, confidence %.2f, below minimum: %s; thread %s; %r",
                                row["decision"], row["confidence"] or 0.0, row["below"] or "-",
                                row["thread_id"] or "-", row["question"][:200], extra={"selfcrag_run": row})
    except LeaseLostError as exc:  # the run stops at its next checkpoint, whose error is the one line
        LOG.info("run not recorded: %s", exc)
    except Exception as exc:  # noqa: BLE001 - the monitor must never fail the run it watches
        LOG.warning("run not recorded: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def run_row(state: Mapping[str, Any], update: dict[str, Any], domain: str | None, thread_id: str) -> dict[str, Any]:
    """The record of a run from its state and the closing node's update (pure: no clock but `now`)."""
    now = time.time()
    trace = state.get("trace") or []
    started = trace[0].get("started") if trace and trace[0].get("node") == "prepare" else None
    scores = update.get("scores") or state.get("scores") or {}
    quality = update.get("quality") or state.get("quality") or {}
    question = state.get("question") or (trace[0].get("question", "") if trace else "")
    return {
        # The same key at finalize and after the review: the thread and the moment the run started.
        "run_key": f"{thread_id}:{started}" if thread_id and started else uuid.uuid4().hex,
        "created_at": float(started or now),
        "finished_at": now,
        "thread_id": thread_id,
        "question": question,
        "decision": update.get("decision", ""),
        "passed": int(bool(quality.get("passed"))),
        "below": ",".join(quality.get("below") or []),
        "confidence": update.get("confidence", state.get("confidence")),
        "context_relevance": scores.get("context_relevance"),
        "groundedness": scores.get("groundedness"),
        "answer_relevance": scores.get("answer_relevance"),
        "latency_ms": round((now - started) * 1000, 1) if started else None,
        "llm_calls": int(state.get("llm_calls") or 0),
        "tokens": int(state.get("tokens") or 0),
        "domain": domain or "",
    }


def _thread_id() -> str:
    from langgraph.config import get_config

    try:
        return str((get_config().get("configurable") or {}).get("thread_id") or "")
    except RuntimeError:  # called outside a run (a node function called directly)
        return ""


def _store(row: dict[str, Any]) -> None:
    columns = ("run_key", "created_at", "finished_at", "thread_id", "question", "decision", "passed", "below",
               "confidence", "context_relevance", "groundedness", "answer_relevance", "latency_ms", "llm_calls",
               "tokens", "domain")
    database().execute(UPSERT, [row[c] for c in columns] + [""], lease=mine(row["thread_id"]))


def _reviewed(row: dict[str, Any], action: str) -> None:
    lease = mine(row["thread_id"])
    changed = database().execute(REVIEWED, (row["decision"], action, row["finished_at"], row["run_key"]), lease=lease)
    if not changed:  # finalize could not record it (a fault then): record it now, without a latency
        _store(row | {"latency_ms": None})
        database().execute(REVIEWED, (row["decision"], action, row["finished_at"], row["run_key"]), lease=lease)


def recent(since: float, until: float | None = None) -> list[dict[str, Any]]:
    """Records of runs started at or after `since` (epoch seconds), oldest first."""
    return database().query("SELECT * FROM selfcrag_runs WHERE created_at >= ? AND created_at <= ? ORDER BY created_at",
                            (since, until if until is not None else time.time() + 1))


def prune(before: float) -> int:
    """Delete the records of runs started before `before`; returns how many."""
    return database().execute("DELETE FROM selfcrag_runs WHERE created_at < ?", (before,))
