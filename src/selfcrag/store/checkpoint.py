"""LangGraph's checkpointer on the store's database, for sync and async runs alike: `SqliteSaver` on the home's
SQLite file, or `PostgresSaver` sharing the store's connection pool, and for `ainvoke`/`astream` their async twins,
`AsyncSqliteSaver` (aiosqlite) and `AsyncPostgresSaver` (an async pool), on the same tables. Threads and paused
reviews live there, so they survive the process, and a thread begun by `ask()` continues under `aask()`.

Every saver is fenced (store/leases.py): a checkpoint or a task's writes on a thread whose lease this code holds are
saved in one transaction with the check that the lease is still current, so a holder that stalled past its lease
writes nothing to the thread and its run stops with LeaseLostError — under `invoke` and `ainvoke` alike.

An async saver belongs to one event loop (its connection, locks and pool do), so each loop that runs a graph gets
its own, opened on first use and closed when the loop shuts down (`asyncio.run`, uvicorn and pytest all do)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from selfcrag.errors import StoreError
from selfcrag.home import describe, sqlite_path
from selfcrag.store.db import (
    BUSY_SECONDS,
    LOCK,
    NEEDS_EXTRA,
    POOL_SIZE,
    POOL_WAIT_SECONDS,
    Database,
    Lease,
    afence,
    database,
    ended_idle,
    fence,
)
from selfcrag.store.leases import mine

Closer = Callable[[], Awaitable[Any]]

# The lease the write being saved now is made under (set by put and put_writes, read by the saver's cursor).
WRITING: ContextVar[Lease | None] = ContextVar("selfcrag_writing", default=None)


@contextmanager
def _writing(config: Any) -> Iterator[None]:
    token = WRITING.set(mine(str((config.get("configurable") or {}).get("thread_id") or "")))
    try:
        yield
    finally:
        WRITING.reset(token)


class _UnderLease:
    """A saver's writes (checkpoints and a task's writes, sync and async) made with their thread's lease in WRITING,
    for the saver's own fence to read."""

    def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        with _writing(config):
            return super().put(config, *args, **kwargs)  # type: ignore[misc]

    def put_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
        with _writing(config):
            super().put_writes(config, *args, **kwargs)  # type: ignore[misc]

    async def aput(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        with _writing(config):
            return await super().aput(config, *args, **kwargs)  # type: ignore[misc]

    async def aput_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
        with _writing(config):
            await super().aput_writes(config, *args, **kwargs)  # type: ignore[misc]


def checkpointer(url: str | None = None) -> BaseCheckpointSaver[str]:
    """The checkpointer for `url` (default: the configured database), one per process and database."""
    db = database(url)
    with LOCK:
        if db.saver is None:
            try:
                db.saver = StoreSaver(db, _postgres_saver(db) if db.postgres else _sqlite_saver(db))
            except StoreError:
                raise
            except Exception as exc:
                raise StoreError(f"cannot set up threads in {describe(db.url)}: {str(exc).splitlines()[0]}") from None
    saver: BaseCheckpointSaver[str] = db.saver
    return saver


class StoreSaver(BaseCheckpointSaver[str]):
    """The store's checkpointer with both faces: each sync method is the sync saver's, each async one the async
    saver's of the running event loop. Both savers read and write the same tables in the same format (one package
    wrote them), so a graph may be invoked and ainvoked on one thread, from any mix of processes."""

    def __init__(self, db: Database, sync: BaseCheckpointSaver[str]) -> None:
        super().__init__(serde=sync.serde)
        self.db, self.sync = db, sync

    # Sync: the sync saver.
    def get_tuple(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.get_tuple(*args, **kwargs)

    def list(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return self.sync.list(*args, **kwargs)

    def put(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.sync.put_writes(*args, **kwargs)

    def delete_thread(self, *args: Any, **kwargs: Any) -> None:
        self.sync.delete_thread(*args, **kwargs)

    def delete_for_runs(self, *args: Any, **kwargs: Any) -> None:
        self.sync.delete_for_runs(*args, **kwargs)

    def copy_thread(self, *args: Any, **kwargs: Any) -> None:
        self.sync.copy_thread(*args, **kwargs)

    def prune(self, *args: Any, **kwargs: Any) -> None:
        self.sync.prune(*args, **kwargs)

    def get_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.get_delta_channel_history(*args, **kwargs)

    def get_next_version(self, current: str | None, channel: None) -> str:
        return self.sync.get_next_version(current, channel)

    # Async: the running loop's async saver.
    async def aget_tuple(self, *args: Any, **kwargs: Any) -> Any:
        return await (await async_saver(self.db)).aget_tuple(*args, **kwargs)

    async def alist(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in (await async_saver(self.db)).alist(*args, **kwargs):
            yield item

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        return await (await async_saver(self.db)).aput(*args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        await (await async_saver(self.db)).aput_writes(*args, **kwargs)

    async def adelete_thread(self, *args: Any, **kwargs: Any) -> None:
        await (await async_saver(self.db)).adelete_thread(*args, **kwargs)

    async def adelete_for_runs(self, *args: Any, **kwargs: Any) -> None:
        await (await async_saver(self.db)).adelete_for_runs(*args, **kwargs)

    async def acopy_thread(self, *args: Any, **kwargs: Any) -> None:
        await (await async_saver(self.db)).acopy_thread(*args, **kwargs)

    async def aprune(self, *args: Any, **kwargs: Any) -> None:
        await (await async_saver(self.db)).aprune(*args, **kwargs)

    async def aget_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        return await (await async_saver(self.db)).aget_delta_channel_history(*args, **kwargs)


def _sqlite_saver(db: Database) -> BaseCheckpointSaver[str]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    class FencedSqliteSaver(_UnderLease, SqliteSaver):
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

    class FencedPostgresSaver(_UnderLease, PostgresSaver):
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
                if ended_idle(exc, lease, db):  # stopped past the lease inside it: ended, nothing was written
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


async def async_saver(db: Database) -> BaseCheckpointSaver[str]:
    """The running loop's async saver on `db`, opened once per loop; the sync saver set up the tables before."""
    loop = asyncio.get_running_loop()
    with LOCK:
        opening = db.async_savers.get(loop)
        if opening is None:
            opening = db.async_savers[loop] = loop.create_task(_open_async(db, loop))
    # Shielded: a caller cancelled while it waits must not cancel the opening every other caller awaits.
    saver: BaseCheckpointSaver[str] = (await asyncio.shield(opening))[0]
    return saver


async def _open_async(db: Database, loop: asyncio.AbstractEventLoop) -> tuple[BaseCheckpointSaver[str], Any]:
    try:
        saver, close = await (_async_postgres_saver(db) if db.postgres else _async_sqlite_saver(db))
    except BaseException as exc:
        with LOCK:
            db.async_savers.pop(loop, None)  # the next call tries again
        if isinstance(exc, StoreError) or not isinstance(exc, Exception):
            raise
        raise StoreError(f"cannot set up threads in {describe(db.url)}: {str(exc).splitlines()[0]}") from None
    lifetime = _until_loop_ends(db, loop, close)
    await anext(lifetime)  # started on this loop, so the loop's shutdown_asyncgens() finishes it
    return saver, lifetime  # the task holds the generator: collected early, it would close the saver with it


async def _until_loop_ends(db: Database, loop: asyncio.AbstractEventLoop, close: Closer) -> AsyncIterator[None]:
    try:
        yield
    finally:
        with LOCK:
            db.async_savers.pop(loop, None)
        with contextlib.suppress(Exception):  # the loop is ending: what was written is committed already
            await close()


async def _async_sqlite_saver(db: Database) -> tuple[BaseCheckpointSaver[str], Closer]:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    class FencedAsyncSqliteSaver(_UnderLease, AsyncSqliteSaver):
        pass

    conn = aiosqlite.connect(sqlite_path(db.url), timeout=BUSY_SECONDS)
    # A daemon worker: a loop closed without shutting down (no asyncio.run) must not keep the process alive.
    conn._thread.daemon = True
    await conn
    await conn.execute("PRAGMA synchronous=NORMAL")
    saver = FencedAsyncSqliteSaver(conn)
    await saver.setup()  # now, not at the first write: setup's script would commit the fence's open transaction
    saver.lock = _FencingLock(saver.lock, conn)  # type: ignore[assignment]
    return saver, conn.close


class _FencingLock:
    """AsyncSqliteSaver's lock, which each of its writes takes just before it runs on the saver's connection and
    commits. Taken for a write under a lease, it also opens that write's transaction with the lease's check, so
    the write joins the check and a lost lease commits nothing (the sync saver fences in its `cursor`)."""

    def __init__(self, lock: asyncio.Lock, conn: Any) -> None:
        self.lock, self.conn = lock, conn

    async def __aenter__(self) -> None:
        await self.lock.acquire()
        if (lease := WRITING.get()) is None:
            return
        try:
            async with self.conn.cursor() as cur:
                await afence(cur, False, lease)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.conn.rollback()
            self.lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.lock.release()


async def _async_postgres_saver(db: Database) -> tuple[BaseCheckpointSaver[str], Closer]:
    try:
        from langgraph.checkpoint.postgres import _ainternal
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError:
        raise StoreError(NEEDS_EXTRA) from None

    class FencedAsyncPostgresSaver(_UnderLease, AsyncPostgresSaver):
        @asynccontextmanager
        async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
            if (lease := WRITING.get()) is None:
                async with super()._cursor(pipeline=pipeline) as cur:
                    yield cur
                return
            # As the sync saver's: the write's statements and the check in one transaction.
            try:
                async with (self.lock, _ainternal.get_connection(self.conn) as conn, conn.transaction(),
                            conn.cursor(binary=True, row_factory=dict_row) as cur):  # fmt: skip
                    await afence(cur, True, lease)
                    yield cur
            except Exception as exc:
                if await asyncio.to_thread(ended_idle, exc, lease, db):
                    raise lease.lost() from None
                raise

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        db.url, min_size=1, max_size=POOL_SIZE, open=False, timeout=POOL_WAIT_SECONDS,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})  # fmt: skip
    try:
        await pool.open(wait=True, timeout=15)
    except Exception:
        await pool.close()
        raise
    return FencedAsyncPostgresSaver(pool), pool.close  # the tables: migrated by the sync saver, made first
