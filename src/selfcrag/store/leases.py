"""One turn at a time on a thread, across processes and machines: a lease in the store (SQLite or PostgreSQL).

A lease is the thread's row in `selfcrag_turns`: its holder (host, process, a random tag), what it does (`turn`
or `review`) and when it expires. It is taken in one statement — an upsert that replaces only an expired row — so
two processes cannot both hold it; a background thread renews it while its holder lives, and the holder frees it
when done. A holder that dies (kill -9, power loss) stops renewing, so its lease runs out after
`SELFCRAG_TURN_LEASE` seconds (default 30) and the thread is free again. A process that finds the thread held
waits for it, polling, at most `SELFCRAG_TURN_WAIT` seconds (default 60), then gives up with one line. Async code
takes the same lease with `aheld`, which waits without blocking its event loop.

Expiry is compared with each process's own clock: processes on several machines sharing PostgreSQL need clocks
within a small part of the lease of each other (NTP does that).

Fencing. Each take of a lease raises the row's `epoch`. A holder stalled longer than its lease (a suspended laptop,
SIGSTOP, a VM paused) loses it once another process takes the thread: every write it makes under the lease — the
thread's checkpoints (store/checkpoint.py), the review record, the run record, the lease row's own marks — is one
transaction with a check that the row still holds its holder and epoch (db.Lease), so a lost lease writes nothing
and the holder stops with LeaseLostError, one line. (Expired and not taken, the lease is still its: it renews it.)
The lease this code holds is found by thread id in a context variable, which LangGraph copies into the threads
that write checkpoints.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

from selfcrag.errors import ThreadBusyError
from selfcrag.store.db import CURRENT, Lease, database

LOG = logging.getLogger("selfcrag.store")
LEASE_SECONDS = 30.0
WAIT_SECONDS = 60.0
POLL_SECONDS = 0.2

TAKE = """INSERT INTO selfcrag_turns (thread_id, holder, purpose, expires_at, epoch) VALUES (?, ?, ?, ?, 1)
    ON CONFLICT (thread_id) DO UPDATE SET holder = excluded.holder, purpose = excluded.purpose,
    expires_at = excluded.expires_at, epoch = selfcrag_turns.epoch + 1 WHERE selfcrag_turns.expires_at < ?"""
RENEW = f"UPDATE selfcrag_turns SET expires_at = ? WHERE {CURRENT}"
FREE = "UPDATE selfcrag_turns SET expires_at = 0 WHERE thread_id = ? AND holder = ? AND epoch = ?"
# The leases this code holds, by thread id: what its writes on those threads are fenced with.
HELD: ContextVar[dict[str, Lease]] = ContextVar("selfcrag_leases", default={})  # noqa: B039 - never mutated


def _seconds(name: str, default: float, least: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {value!r}") from None
    if not least <= seconds <= 86400:
        raise ValueError(f"{name} must be between {least:g} and 86400 seconds, got {value}")
    return seconds


def lease_seconds() -> float:
    return _seconds("SELFCRAG_TURN_LEASE", LEASE_SECONDS, 1)


def wait_seconds() -> float:
    return _seconds("SELFCRAG_TURN_WAIT", WAIT_SECONDS, 0)


def holder_name() -> str:
    """Who holds a lease, as a person reading `review list` or an error wants to see it."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def current(thread_id: str) -> dict[str, object] | None:
    """The thread's live lease (holder, purpose, expires_at), or None when it is free."""
    rows = database().query("SELECT holder, purpose, expires_at FROM selfcrag_turns WHERE thread_id = ? AND "
                            "expires_at >= ?", (thread_id, time.time()))  # fmt: skip
    return rows[0] if rows else None


def mine(thread_id: str) -> Lease | None:
    """The lease this code holds on the thread, which its writes there must carry; None when it holds none."""
    return HELD.get().get(thread_id)


def _take(thread_id: str, holder: str, purpose: str, lease: float) -> bool:
    now = time.time()
    return database().execute(TAKE, (thread_id, holder, purpose, now + lease, now)) > 0


def _epoch(thread_id: str, holder: str) -> int:
    rows = database().query("SELECT epoch FROM selfcrag_turns WHERE thread_id = ? AND holder = ?", (thread_id, holder))
    return int(rows[0]["epoch"]) if rows else -1  # gone already (it cannot be: -1 fences every write out)


@contextmanager
def held(thread_id: str, purpose: str = "turn") -> Iterator[str]:
    """Hold the thread's lease for the block (renewed meanwhile), waiting for it at most `wait_seconds()`;
    raises ThreadBusyError naming the thread and its holder when it stays taken. Yields the holder's name; the
    block's writes on the thread are fenced with the lease (see the module's text)."""
    lease, wait = lease_seconds(), wait_seconds()
    holder = holder_name()
    deadline = time.monotonic() + wait
    while not _try_take(thread_id, holder, purpose, lease):
        time.sleep(_pause(thread_id, wait, deadline))
    renewer = _Renewer(_fence(thread_id, holder, lease))
    token = HELD.set({**HELD.get(), thread_id: renewer.fenced})
    try:
        yield holder
    finally:
        HELD.reset(token)
        renewer.release()


@asynccontextmanager
async def aheld(thread_id: str, purpose: str = "turn") -> AsyncIterator[str]:
    """`held` for async code: the same lease, fenced and registered the same way, waited for without blocking the
    event loop (its statements run in worker threads, its renewal in the same background thread)."""
    lease, wait = lease_seconds(), wait_seconds()
    holder = holder_name()
    deadline = time.monotonic() + wait
    while not await _atake(thread_id, holder, purpose, lease):
        await asyncio.sleep(await asyncio.to_thread(_pause, thread_id, wait, deadline))
    starting = asyncio.ensure_future(asyncio.to_thread(lambda: _Renewer(_fence(thread_id, holder, lease))))
    try:
        renewer = await asyncio.shield(starting)
    except asyncio.CancelledError:  # the lease is taken: give it back, else it stays held until it runs out
        await asyncio.to_thread((await starting).release)
        raise
    HELD.set({**HELD.get(), thread_id: renewer.fenced})
    try:
        yield holder
    finally:
        # Not a token's reset: an async context manager may be left from another task (another context) than the
        # one that entered it, where the token is not valid.
        HELD.set({held_id: other for held_id, other in HELD.get().items() if held_id != thread_id})
        # Shielded: a task cancelled again while it frees the lease still frees it (else it waits out its expiry).
        await asyncio.shield(asyncio.to_thread(renewer.release))


def _try_take(thread_id: str, holder: str, purpose: str, lease: float) -> bool:
    if current(thread_id) is not None:
        return False
    _end_stalled_writes(thread_id)
    return _take(thread_id, holder, purpose, lease)


# A fenced transaction of the lease's last holder, open longer than a lease, on another connection.
STALLED = """SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE application_name = ?
    AND pid <> pg_backend_pid() AND xact_start < now() - make_interval(secs => ?)"""


def _end_stalled_writes(thread_id: str) -> None:
    """PostgreSQL: before taking an expired lease, end any fenced transaction its last holder left open for longer
    than the lease (db.fence labels them). Its holder stopped inside it, where the server's idle limit does not
    reach (mid-pipeline): it holds the lease's row, so the take would wait for it until that process is resumed.
    Ended, it writes nothing, and its holder, resumed, is told it lost the lease. SQLite needs none of this: a
    write there holds the database's lock only while it runs, and a stopped one makes others fail in one line."""
    db = database()
    if not db.postgres:
        return
    try:
        rows = db.query("SELECT holder, epoch FROM selfcrag_turns WHERE thread_id = ?", (thread_id,))
        if rows:
            last = Lease(thread_id, str(rows[0]["holder"]), int(rows[0]["epoch"]))
            if db.query(STALLED, (last.label(), lease_seconds())):
                LOG.info("thread %s: ended a write its last holder (%s) left open past its lease", thread_id,
                         last.holder)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - not allowed (another role) or a blip: the take waits, as before
        LOG.info("thread %s: could not end a stalled holder's write: %s", thread_id, exc)


async def _atake(thread_id: str, holder: str, purpose: str, lease: float) -> bool:
    """One try at the lease from async code. A task cancelled while the statement runs (in its worker thread,
    which runs on) gives back a lease the statement took: else the thread stays held until the lease runs out."""
    taking = asyncio.ensure_future(asyncio.to_thread(_try_take, thread_id, holder, purpose, lease))
    try:
        return await asyncio.shield(taking)
    except asyncio.CancelledError:
        if await taking:
            await asyncio.to_thread(_free, _fence(thread_id, holder, lease))
        raise


def _pause(thread_id: str, wait: float, deadline: float) -> float:
    """How long to wait before trying the taken lease again; raises ThreadBusyError once the wait is over."""
    if time.monotonic() >= deadline:
        other = current(thread_id) or {}
        raise ThreadBusyError(f"thread {thread_id} is busy: another {other.get('purpose') or 'turn'} holds it "
                              f"({other.get('holder') or 'just ended'}); waited {wait:g}s (SELFCRAG_TURN_WAIT), "
                              "try again when it ends")  # fmt: skip
    # Jitter: waiters that poll in step would all miss the moment it frees, then all collide.
    return min(POLL_SECONDS * random.uniform(0.5, 1.5), max(0.0, deadline - time.monotonic()))


def _fence(thread_id: str, holder: str, lease: float) -> Lease:
    """The lease just taken, with the epoch its take gave it."""
    return Lease(thread_id, holder, _epoch(thread_id, holder), lease)


class _Renewer:
    """The background thread that renews a held lease until it is released."""

    def __init__(self, fenced: Lease) -> None:
        self.fenced = fenced
        self._stop = threading.Event()
        self._thread = threading.Thread(target=_renew, args=(fenced, fenced.seconds, self._stop), daemon=True,
                                        name=f"selfcrag-lease-{fenced.thread_id[:20]}")  # fmt: skip
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        _free(self.fenced)


def _free(fenced: Lease) -> None:
    try:
        database().execute(FREE, (fenced.thread_id, fenced.holder, fenced.epoch))
    except Exception as exc:  # noqa: BLE001 - the lease runs out by itself; the turn's own outcome matters more
        # Info, not a warning: the command's own line reports the database fault once; the next turn that
        # finds the lease says how long it waits.
        LOG.info("thread %s: lease not freed (it expires in %gs): %s", fenced.thread_id, fenced.seconds, exc)


def _renew(fenced: Lease, lease: float, stop: threading.Event) -> None:
    thread_id = fenced.thread_id
    while not stop.wait(lease / 3):
        try:
            if not database().execute(RENEW, (time.time() + lease, *fenced.current()[1])):
                # Info, not a warning: the holder's next write there is refused, and that error is its one line.
                LOG.info("thread %s: lease lost (held longer than %gs without renewal); another process may take "
                         "the thread, and this one writes nothing more there", thread_id, lease)  # fmt: skip
                return
        except Exception as exc:  # noqa: BLE001 - a database blip: try again at the next beat, within the lease
            LOG.info("thread %s: lease not renewed: %s", thread_id, exc)  # a lost lease is the warning above


def resumed(thread_id: str) -> str:
    """The id of the thread's last turn a crash left unfinished and a later turn resumed ("" if none)."""
    rows = database().query("SELECT resumed FROM selfcrag_turns WHERE thread_id = ?", (thread_id,))
    return str(rows[0]["resumed"]) if rows else ""


def mark_resumed(thread_id: str, turn_id: str) -> None:
    """Remember, before resuming it, that this crashed turn was resumed once (a second crash closes it). Only
    under the thread's lease, while it is current."""
    fenced = mine(thread_id)
    if fenced is None:
        raise RuntimeError(f"mark_resumed({thread_id!r}) outside the thread's lease")
    where, params = fenced.current()
    if not database().execute(f"UPDATE selfcrag_turns SET resumed = ? WHERE {where}", (turn_id, *params)):
        raise fenced.lost()
