"""One small SQL layer over SQLite and PostgreSQL: the run records and the review queue use it, and the PostgreSQL
checkpointer shares its connection pool. Statements are written with `?` placeholders and the SQL both databases
accept (upserts with ON CONFLICT, DOUBLE PRECISION)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from selfcrag.errors import LeaseLostError, StoreError
from selfcrag.home import database_url, describe, is_postgres, sqlite_path
from selfcrag.store.pg_pool import fail_fast_pool

BUSY_SECONDS = 30  # SQLite: how long a writer waits for another process's write before giving up
POOL_SIZE = 8
IDLE_SQLITE = 4  # SQLite connections a process keeps open between statements
# How long a statement waits for a connection from the pool. Each statement holds one for milliseconds, so a longer
# wait means the server is gone: a run whose PostgreSQL stopped failed after 30 s per statement (minutes) before.
POOL_WAIT_SECONDS = 10.0
NEEDS_EXTRA = "a PostgreSQL database needs the postgres extra: pip install 'selfcrag[postgres]'"

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS selfcrag_runs (
        run_key TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        thread_id TEXT NOT NULL DEFAULT '',
        question TEXT NOT NULL DEFAULT '',
        decision TEXT NOT NULL,
        passed INTEGER NOT NULL DEFAULT 0,
        below TEXT NOT NULL DEFAULT '',
        confidence DOUBLE PRECISION,
        context_relevance DOUBLE PRECISION,
        groundedness DOUBLE PRECISION,
        answer_relevance DOUBLE PRECISION,
        latency_ms DOUBLE PRECISION,
        llm_calls INTEGER NOT NULL DEFAULT 0,
        tokens INTEGER NOT NULL DEFAULT 0,
        domain TEXT NOT NULL DEFAULT '',
        reviewed TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX IF NOT EXISTS selfcrag_runs_created ON selfcrag_runs (created_at)",
    """CREATE TABLE IF NOT EXISTS selfcrag_reviews (
        thread_id TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        question TEXT NOT NULL DEFAULT '',
        draft TEXT NOT NULL DEFAULT '',
        scores TEXT NOT NULL DEFAULT '{}',
        confidence DOUBLE PRECISION,
        reason TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        resolved_at DOUBLE PRECISION,
        answer TEXT NOT NULL DEFAULT '',
        note TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX IF NOT EXISTS selfcrag_reviews_status ON selfcrag_reviews (status)",
    # One row per thread that ever held a turn lease (leases.py): who holds it and until when; expires_at 0 = free;
    # epoch counts the times it was taken (the fence every write under the lease carries).
    """CREATE TABLE IF NOT EXISTS selfcrag_turns (
        thread_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL DEFAULT '',
        purpose TEXT NOT NULL DEFAULT '',
        expires_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        resumed TEXT NOT NULL DEFAULT '',
        epoch BIGINT NOT NULL DEFAULT 0
    )""",
)
# Columns added since a table was first made: (table, column, its definition), added where missing.
ADDED = (("selfcrag_turns", "epoch", "BIGINT NOT NULL DEFAULT 0"),)
# A lease is current while its row still names its holder and epoch: nobody took it since (leases.py). An expired
# lease nobody took is still current — writing under it can clash with no one — and any take raises the epoch.
CURRENT = "thread_id = ? AND holder = ? AND epoch = ?"
LOST = ("thread {}: this process ({}) stalled past its lease (SELFCRAG_TURN_LEASE: suspended, SIGSTOP, a paused "
        "VM) and another process took the thread meanwhile, so it stopped before its next write there")


class Lease(NamedTuple):
    """The lease a write is made under, which must still be current when the write lands."""

    thread_id: str
    holder: str
    epoch: int
    seconds: float = 30.0  # the lease's length: a fenced transaction left idle longer than this is ended

    def current(self) -> tuple[str, tuple[object, ...]]:
        """The SQL condition on `selfcrag_turns` that this lease is still current, with its parameters."""
        return CURRENT, (self.thread_id, self.holder, self.epoch)

    def lost(self) -> LeaseLostError:
        return LeaseLostError(LOST.format(self.thread_id, self.holder))

    def label(self) -> str:
        """What a fenced transaction under this lease calls itself on PostgreSQL (its session's application_name,
        within 63 bytes), so that a process taking the expired lease can find one a stalled holder left open."""
        named = f"{self.thread_id}\0{self.holder}\0{self.epoch}".encode()
        return "selfcrag-fenced " + hashlib.sha256(named).hexdigest()[:24]


def ended_idle(exc: BaseException, lease: Lease, db: Database) -> bool:
    """Whether PostgreSQL ended a fenced transaction left idle past its lease (see `fence`). The server says so
    before it closes the connection, but a client resumed after the close may read only the closed socket; so a
    fault inside the transaction also counts when the lease is, read afresh, no longer current (a database that
    is down cannot say: its own fault stands)."""
    if getattr(exc, "sqlstate", None) == "25P03" or "idle-in-transaction timeout" in str(exc):
        return True
    try:
        found = db.query(f"SELECT 1 FROM selfcrag_turns WHERE {CURRENT}", lease.current()[1])
    except Exception:  # the database is down or unreachable: report the fault as it was
        return False
    return not found


def fence(cursor: Any, postgres: bool, lease: Lease) -> None:
    """Inside the write's own transaction, before it: raise LeaseLostError unless `lease` is still current. It holds
    the lease's row until the transaction ends (PostgreSQL: FOR UPDATE; SQLite: a write takes the database's write
    lock), so a process taking the lease waits for this write and then sees it, never the other way round."""
    if postgres:
        cursor.execute(*_idle_limit(lease))
        found = cursor.execute(*_fence_statement(postgres, lease)).fetchone()
    else:
        found = cursor.execute(*_fence_statement(postgres, lease)).rowcount
    if not found:
        raise lease.lost()


async def afence(cursor: Any, postgres: bool, lease: Lease) -> None:
    """`fence` on an async cursor (psycopg's AsyncCursor, aiosqlite's Cursor): the same check, the same hold."""
    if postgres:
        await cursor.execute(*_idle_limit(lease))
        await cursor.execute(*_fence_statement(postgres, lease))
        found = await cursor.fetchone()
    else:
        await cursor.execute(*_fence_statement(postgres, lease))
        found = cursor.rowcount > 0
    if not found:
        raise lease.lost()


def _idle_limit(lease: Lease) -> tuple[str, tuple[object, ...]]:
    # A process stopped inside this transaction (SIGSTOP) would hold the row, and every taker, until resumed:
    # the server ends a transaction left idle past the lease, and what it had not committed is not written. Not
    # every stop leaves it idle (stopped in the middle of a pipeline, or of a message, the server waits for the
    # rest without a limit), so it also names itself: a taker of the expired lease ends it (leases.py).
    return ("SELECT set_config('idle_in_transaction_session_timeout', %s, true), "
            "set_config('application_name', %s, true)", (str(max(1000, int(lease.seconds * 1000))), lease.label()))


def _fence_statement(postgres: bool, lease: Lease) -> tuple[str, tuple[object, ...]]:
    where, params = lease.current()
    if postgres:
        return f"SELECT 1 FROM selfcrag_turns WHERE {where.replace('?', '%s')} FOR UPDATE", params
    return f"UPDATE selfcrag_turns SET epoch = epoch WHERE {where}", params


class Database:
    def __init__(self, url: str) -> None:
        self.url = url
        self.postgres = is_postgres(url)
        self.pool: Any = None
        self.saver: Any = None  # LangGraph's checkpointer on this database, made once (checkpoint.py)
        self.async_savers: dict[Any, Any] = {}  # its async half, one per event loop (checkpoint.async_saver)
        self._idle: list[sqlite3.Connection] = []  # SQLite connections kept for the next statement (_lend_sqlite)
        self._idle_lock, self._idle_pid = threading.Lock(), os.getpid()
        if self.postgres:
            try:
                import psycopg
                import psycopg_pool  # noqa: F401 - the postgres extra's, as pg_pool needs it
                from psycopg.rows import dict_row
            except ImportError:
                raise StoreError(NEEDS_EXTRA) from None
            try:  # a server that is down fails here at once, not after the pool's retries
                psycopg.connect(url, connect_timeout=5).close()
            except Exception as exc:
                raise StoreError(f"cannot connect to {describe(url)}: {str(exc).splitlines()[0]}") from None
            # The keyword arguments LangGraph's PostgresSaver requires of its connections, so it can share the pool.
            self.pool = fail_fast_pool(url, min_size=1, max_size=POOL_SIZE, open=False, timeout=POOL_WAIT_SECONDS,
                                       kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
            try:
                self.pool.open(wait=True, timeout=15)
            except Exception as exc:
                self.pool.close()
                raise StoreError(f"cannot connect to {describe(url)}: {str(exc).splitlines()[0]}") from None
        else:
            sqlite_path(url).parent.mkdir(parents=True, exist_ok=True)
        self._ensure_schema()

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if self.postgres:
            with self.pool.connection() as conn:
                yield conn
            return
        conn = self._lend_sqlite()
        try:
            yield conn
        except BaseException:
            conn.close()  # a connection a fault met is never lent again
            raise
        self._give_back_sqlite(conn)

    def _lend_sqlite(self) -> sqlite3.Connection:
        """An idle SQLite connection of this process, else a new one. Opening one costs ~0.8 ms of CPU (the file,
        the WAL index, the schema), 10x the statement a run record is; so connections are kept and lent again,
        one user at a time, as PostgreSQL's pool does. Never across a fork: SQLite forbids it."""
        with self._idle_lock:
            if self._idle_pid != os.getpid():
                self._idle, self._idle_pid = [], os.getpid()  # a forked child: the parent's are not its to use
            if self._idle:
                return self._idle.pop()
        conn = sqlite3.connect(sqlite_path(self.url), timeout=BUSY_SECONDS, isolation_level=None,
                               check_same_thread=False)  # fmt: skip
        conn.row_factory = sqlite3.Row
        return conn

    def _give_back_sqlite(self, conn: sqlite3.Connection) -> None:
        with self._idle_lock:
            if not conn.in_transaction and len(self._idle) < IDLE_SQLITE and self._idle_pid == os.getpid():
                self._idle.append(conn)
                return
        conn.close()

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, params: Sequence[Any] = (), lease: Lease | None = None) -> int:
        """Run one statement (autocommit); returns the number of rows it changed. Under `lease`, the statement and
        the check that the lease is still current are one transaction: LeaseLostError, and nothing written, if not."""
        with self._connection() as conn:
            if lease is None:
                return int(conn.execute(self._sql(sql), tuple(params)).rowcount)
            if self.postgres:
                try:
                    with conn.transaction():
                        fence(conn, True, lease)
                        return int(conn.execute(self._sql(sql), tuple(params)).rowcount)
                except Exception as exc:
                    if ended_idle(exc, lease, self):
                        raise lease.lost() from None
                    raise
            conn.execute("BEGIN IMMEDIATE")
            try:
                fence(conn, False, lease)
                changed = int(conn.execute(sql, tuple(params)).rowcount)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return changed

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._connection() as conn:
            return [dict(row) for row in conn.execute(self._sql(sql), tuple(params)).fetchall()]

    def _ensure_schema(self) -> None:
        with self._connection() as conn:
            if self.postgres:
                # Two processes creating the same table at once collide in PostgreSQL's catalog: take turns.
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(7261001)")
                    for statement in SCHEMA:
                        conn.execute(statement)
                    for table, column, definition in ADDED:
                        # Only when missing: ALTER TABLE waits for every transaction on the table, and one of a
                        # process stopped mid-write (SIGSTOP) would hold every process that starts after it.
                        if not conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name = %s AND "
                                            "column_name = %s", (table, column)).fetchone():  # fmt: skip
                            conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {definition}")
            else:
                conn.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
                for statement in SCHEMA:
                    conn.execute(statement)
                for table, column, definition in ADDED:
                    if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                        try:
                            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
                        except sqlite3.OperationalError as exc:  # another process added it just now
                            if "duplicate column" not in str(exc):
                                raise

    def close(self) -> None:
        if self.saver is not None and not self.postgres:
            self.saver.sync.conn.close()
        if self.pool is not None:
            self.pool.close()
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


_open: dict[str, Database] = {}
LOCK = threading.Lock()  # guards the per-process caches of databases and checkpointers


def database(url: str | None = None) -> Database:
    """The database at `url` (default: `SELFCRAG_DATABASE_URL`, else the home's SQLite file), opened once per
    process with its tables created."""
    url = url or database_url()
    with LOCK:
        if url not in _open:
            try:
                _open[url] = Database(url)
            except StoreError:
                raise
            except Exception as exc:  # sqlite3, psycopg or the file system: one line either way
                raise StoreError(f"cannot open {describe(url)}: {str(exc).splitlines()[0]}") from None
        return _open[url]


def close_all() -> None:
    """Close every pool this process opened (tests that stop a database server call it first)."""
    with LOCK:
        for db in _open.values():
            db.close()
        _open.clear()


def database_errors() -> tuple[type[Exception], ...]:
    """What a database that fails in the middle of a run raises: sqlite3's errors (a full disk, a file it cannot
    write) and psycopg's (a PostgreSQL server that stopped). Neither is an OSError, so the CLI names them here to
    report them in one line."""
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    try:
        import psycopg
    except ImportError:  # without the postgres extra nothing can raise its errors
        return errors
    return (*errors, psycopg.Error)


def failure_line(exc: BaseException) -> str:
    """One line for a database fault met mid-run: which database and its own first line (a psycopg message runs on
    over several lines, with hints meant for a DBA)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return (f"the store's database ({describe(database_url())}) failed: {first} ({type(exc).__name__}); "
            "what was saved before the fault is kept: run the command again once the database is back")
