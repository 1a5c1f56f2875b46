"""The thread lease (store/leases.py) on a real SQLite file: one holder at a time, an expired lease is taken over,
a busy thread is refused in one line, the lease is freed however the block ends, and bad settings are one line."""

from __future__ import annotations

import pytest

from selfcrag.store import leases
from selfcrag.store.db import close_all


@pytest.fixture(autouse=True)
def _store(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFCRAG_DATABASE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.delenv("SELFCRAG_TURN_WAIT", raising=False)
    monkeypatch.delenv("SELFCRAG_TURN_LEASE", raising=False)
    yield
    close_all()


def test_one_holder_at_a_time_until_the_lease_expires():
    assert leases._take("t", "first", "turn", 30)
    assert not leases._take("t", "second", "turn", 30)
    assert leases.current("t")["holder"] == "first"
    assert leases._take("u", "second", "turn", 30)  # another thread is another lease
    assert leases._take("v", "dead", "turn", -1)  # a lease whose holder stopped renewing: already run out
    assert leases.current("v") is None and leases._take("v", "next", "review", 30)
    taken = leases.current("v")
    assert taken is not None and (taken["holder"], taken["purpose"]) == ("next", "review")


def test_a_busy_thread_is_refused_in_one_line_naming_it_and_its_holder(monkeypatch):
    monkeypatch.setenv("SELFCRAG_TURN_WAIT", "0")
    assert leases._take("t", "host:42:abc", "review", 30)
    with pytest.raises(leases.ThreadBusyError) as refused, leases.held("t"):
        pass
    message = str(refused.value)
    assert "\n" not in message and message.startswith("thread t is busy: another review holds it (host:42:abc)")


def test_the_lease_is_freed_when_the_block_ends_or_fails():
    with leases.held("t") as holder:
        assert leases.current("t")["holder"] == holder
    assert leases.current("t") is None
    with pytest.raises(RuntimeError), leases.held("t"):
        raise RuntimeError("the turn failed")
    assert leases.current("t") is None


def test_a_resumed_turn_is_remembered_across_leases():
    with leases.held("t"):
        leases.mark_resumed("t", "message-1")
    assert leases.resumed("t") == "message-1" and leases.resumed("other") == ""


@pytest.mark.parametrize(("name", "value"), [("SELFCRAG_TURN_WAIT", "soon"), ("SELFCRAG_TURN_WAIT", "-1"),
                                             ("SELFCRAG_TURN_LEASE", "0.1"), ("SELFCRAG_TURN_LEASE", "1e9")])
def test_bad_settings_are_one_line(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name) as bad, leases.held("t"):
        pass
    assert "\n" not in str(bad.value)


async def test_aheld_is_the_same_lease_and_waits_without_blocking_the_loop(monkeypatch):
    import asyncio

    monkeypatch.setenv("SELFCRAG_TURN_WAIT", "30")
    ticks = 0

    async def ticking() -> None:  # runs only while the loop is free
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    clock = asyncio.create_task(ticking())
    async with leases.aheld("t") as first:
        assert leases.current("t")["holder"] == first
        waiting = leases.aheld("t")
        second = asyncio.create_task(waiting.__aenter__())
        await asyncio.sleep(0.5)
        assert not second.done() and ticks >= 5  # the waiter polls; the loop goes on
    holder = await asyncio.wait_for(second, 10)
    assert leases.current("t")["holder"] == holder != first
    monkeypatch.setenv("SELFCRAG_TURN_WAIT", "0")
    with pytest.raises(leases.ThreadBusyError), leases.held("t"):  # a sync turn sees the async holder: one lease
        pass
    await waiting.__aexit__(None, None, None)
    assert leases.current("t") is None
    clock.cancel()


async def test_aheld_is_refused_in_one_line_and_freed_when_cancelled(monkeypatch):
    import asyncio

    monkeypatch.setenv("SELFCRAG_TURN_WAIT", "0")
    assert leases._take("t", "host:42:abc", "turn", 30)
    with pytest.raises(leases.ThreadBusyError, match=r"^thread t is busy: another turn holds it \(host:42:abc\)"):
        async with leases.aheld("t"):
            pass
    entered = asyncio.Event()

    async def holding() -> None:
        async with leases.aheld("u"):
            entered.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(holding())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert leases.current("u") is None


async def test_aheld_cancelled_while_its_take_runs_gives_the_lease_back(monkeypatch):
    import asyncio
    import time

    take = leases._try_take

    def slow_take(*args):  # noqa: ANN002, ANN202 - a statement that takes a while (a busy database)
        time.sleep(0.5)
        return take(*args)

    monkeypatch.setattr(leases, "_try_take", slow_take)
    task = asyncio.create_task(leases.aheld("t").__aenter__())
    await asyncio.sleep(0.1)
    task.cancel()  # while the statement runs in its worker thread, which goes on and takes the lease
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.8)  # the statement has ended by now, whichever way
    assert leases.current("t") is None


def test_each_take_raises_the_epoch_and_a_lost_lease_writes_nothing():
    from selfcrag.errors import LeaseLostError
    from selfcrag.store.db import database

    with leases.held("t"):
        first = leases.mine("t")
        assert first is not None and first.epoch == 1
    with leases.held("t"):
        ours = leases.mine("t")
        assert ours is not None and ours.epoch == 2
        database().execute("UPDATE selfcrag_turns SET expires_at = 0 WHERE thread_id = 't'")  # stalled past it
        leases.mark_resumed("t", "message-1")  # expired, but nobody took it: still current
        assert leases._take("t", "other", "review", 30)  # another process takes the thread
        assert leases.current("t")["holder"] == "other"
        with pytest.raises(LeaseLostError, match="stopped before its next write") as lost:
            leases.mark_resumed("t", "message-2")
        assert "\n" not in str(lost.value)
        assert not database().execute(leases.RENEW, (1e12, *ours.current()[1]))  # nor renewed back
    assert leases.mine("t") is None and leases.resumed("t") == "message-1"
    assert leases.current("t")["holder"] == "other"  # freeing the lost lease did not free the other's


def test_a_store_made_before_fencing_gets_its_epoch_column(tmp_path, monkeypatch):
    import sqlite3

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:
        conn.execute("CREATE TABLE selfcrag_turns (thread_id TEXT PRIMARY KEY, holder TEXT NOT NULL DEFAULT '', "
                     "purpose TEXT NOT NULL DEFAULT '', expires_at DOUBLE PRECISION NOT NULL DEFAULT 0, "
                     "resumed TEXT NOT NULL DEFAULT '')")  # fmt: skip
        conn.execute("INSERT INTO selfcrag_turns VALUES ('t', 'old', 'turn', 0, '')")
    monkeypatch.setenv("SELFCRAG_DATABASE_URL", f"sqlite:///{old}")
    with leases.held("t"):
        assert leases.mine("t").epoch == 1


async def test_aheld_is_fenced_like_held():
    from selfcrag.errors import LeaseLostError

    async with leases.aheld("t"):
        ours = leases.mine("t")
        assert ours is not None and ours.epoch == 1  # registered, with its take's epoch, as held does
        assert leases._take("t", "other", "review", 0) is False  # live: not taken from under it
    async with leases.aheld("t"):
        ours = leases.mine("t")
        assert ours is not None and ours.epoch == 2
        from selfcrag.store.db import database

        database().execute("UPDATE selfcrag_turns SET expires_at = 0 WHERE thread_id = 't'")  # stalled past it
        assert leases._take("t", "other", "review", 30)
        with pytest.raises(LeaseLostError):
            leases.mark_resumed("t", "message-1")
    assert leases.mine("t") is None and leases.current("t")["holder"] == "other"


def test_a_fault_inside_a_fenced_write_counts_as_the_lease_lost_only_when_another_holds_it():
    # A client resumed after PostgreSQL closed its idle transaction may read only "server closed the connection":
    # whether the lease was lost is then read afresh, never guessed from the message.
    from selfcrag.store.db import database, ended_idle

    closed = OSError("consuming input failed: server closed the connection unexpectedly")
    with leases.held("t"):
        ours = leases.mine("t")
        assert ours is not None
        assert not ended_idle(closed, ours, database())  # still ours: the fault is the database's, reported
        database().execute("UPDATE selfcrag_turns SET expires_at = 0 WHERE thread_id = 't'")
        assert leases._take("t", "other", "review", 30)
        assert ended_idle(closed, ours, database())  # another process took the thread meanwhile
    timed_out = OSError("terminating connection due to idle-in-transaction timeout")
    assert ended_idle(timed_out, ours, database())
