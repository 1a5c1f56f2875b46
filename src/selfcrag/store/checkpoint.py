"""LangGraph's checkpointer on the store's database: `SqliteSaver` on the home's SQLite file, or `PostgresSaver`
sharing the store's connection pool. Threads and paused reviews live there, so they survive the process.

Both are fenced (store/leases.py): a checkpoint or a task's writes on a thread whose lease this code holds are
saved in one transaction with the check that the lease is still current, so a holder that stalled past its lease
writes nothing to the thread and its run stops with LeaseLostError."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from selfcrag.errors import StoreError
from selfcrag.home import describe, sqlite_path
from selfcrag.store.db import BUSY_SECONDS, LOCK, NEEDS_EXTRA, Database, Lease, database, ended_idle, fence
from selfcrag.store.leases import mine

# The lease the write being saved now is made under (set by put and put_writes, read by the saver's cursor).
WRITING: ContextVar[Lease | None] = ContextVar("selfcrag_writing", default=None)


@contextmanager
def _writing(config: Any) -> Iterator[None]:
    token = WRITING.set(mine(str((config.get("configurable") or {}).get("thread_id") or "")))
    try:
        yield
    finally:
        WRITING.reset(token)


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

    class FencedSqliteSaver(SqliteSaver):
        def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
            with _writing(config):
                return super().put(config, *args, **kwargs)

        def put_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
            with _writing(config):
                super().put_writes(config, *args, **kwargs)

        @contextmanager
        def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
            with super().cursor(transaction) as cur:
                if (lease := WRITING.get()) is not None:
                    # The check's UPDATE opens the transaction the write then joins; a refused one commits nothing.
                    fence(cur, False, lease)
                yield cur

    # One connection per process, shared by threads: SqliteSaver serialises its use with a lock.
    conn = sqlite3.connect(sqlite_path(db.url), timeout=BUSY_SECONDS, check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable at checkpoints, no fsync per step
    saver = FencedSqliteSaver(conn)
    saver.setup()
    return saver


def _postgres_saver(db: Database) -> BaseCheckpointSaver[str]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver, _internal
        from psycopg.rows import dict_row
    except ImportError:
        raise StoreError(NEEDS_EXTRA) from None

    class FencedPostgresSaver(PostgresSaver):
        def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
            with _writing(config):
                return super().put(config, *args, **kwargs)

        def put_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
            with _writing(config):
                super().put_writes(config, *args, **kwargs)

        @contextmanager
        def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
            if (lease := WRITING.get()) is None:
                with super()._cursor(pipeline=pipeline) as cur:
                    yield cur
                return
            # A fenced write: its statements and the check in one transaction (PostgresSaver's own `_cursor`
            # would run them in autocommit, each on its own).
            try:
                with (self.lock, _internal.get_connection(self.conn) as conn, conn.transaction(),
                      conn.cursor(binary=True, row_factory=dict_row) as cur):  # fmt: skip
                    fence(cur, True, lease)
                    yield cur
            except Exception as exc:
                if ended_idle(exc):  # stopped inside it past the lease: the server ended it, nothing was written
                    raise lease.lost() from None
                raise

    saver = FencedPostgresSaver(db.pool)
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
