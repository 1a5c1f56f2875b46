"""LangGraph's checkpointer on the store's database: `SqliteSaver` on the home's SQLite file, or `PostgresSaver`
sharing the store's connection pool. Threads and paused reviews live there, so they survive the process."""

from __future__ import annotations

import sqlite3
import time

from langgraph.checkpoint.base import BaseCheckpointSaver

from selfcrag.errors import StoreError
from selfcrag.home import describe, sqlite_path
from selfcrag.store.db import BUSY_SECONDS, LOCK, NEEDS_EXTRA, Database, database


def checkpointer(url: str | None = None) -> BaseCheckpointSaver[str]:
    """The checkpointer for `url` (default: the configured database), one per process and database."""
    db = database(url)
    with LOCK:
        if db.saver is None:
            try:
                db.saver = _postgres_saver(db) if db.postgres else _sqlite_saver(db)
            except StoreError:
                raise
            except Exception as exc:
                raise StoreError(f"cannot set up threads in {describe(db.url)}: {str(exc).splitlines()[0]}") from None
    saver: BaseCheckpointSaver[str] = db.saver
    return saver


def _sqlite_saver(db: Database) -> BaseCheckpointSaver[str]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    # One connection per process, shared by threads: SqliteSaver serialises its use with a lock.
    conn = sqlite3.connect(sqlite_path(db.url), timeout=BUSY_SECONDS, check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable at checkpoints, no fsync per step
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def _postgres_saver(db: Database) -> BaseCheckpointSaver[str]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise StoreError(NEEDS_EXTRA) from None
    saver = PostgresSaver(db.pool)
    # One process migrates at a time. A session lock, not a transaction's: a migration that creates an index
    # CONCURRENTLY waits for every open transaction, this one included. And taken by polling, not by waiting in
    # pg_advisory_lock: a process waiting there is in a statement CREATE INDEX CONCURRENTLY also waits for, while
    # the holder waits for that index — a deadlock PostgreSQL cannot see (processes started together on a new
    # database hung for good).
    with db.pool.connection() as conn:
        while not conn.execute("SELECT pg_try_advisory_lock(7261002) AS taken").fetchone()["taken"]:
            time.sleep(0.1)
        try:
            saver.setup()
        finally:
            conn.execute("SELECT pg_advisory_unlock(7261002)")
    return saver
