"""The async path, as test_threads.py and test_turns.py test the sync one, on SQLite and on a real PostgreSQL:
`aask(thread_id=...)` continues a thread (one `ask` began, too), turns on one thread take turns while threads on
others run together, a turn killed (kill -9) in a process running `aask` is answered as itself by the next one, a
turn that fails or whose task is cancelled is closed with a note and frees the thread."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import pytest
from test_turns import GIFT, QUESTIONS, REFUNDS, RETURNS, STOPPED, environment, eventually, history, kill

from selfcrag import aask, ask
from selfcrag.errors import ThreadBusyError
from selfcrag.store import leases, runs
from selfcrag.threads import config, persistent, turn_input


async def test_aask_continues_a_thread_and_starts_new_ones(store_url):
    one = await aask(RETURNS, thread_id="py-1")
    two = await aask(REFUNDS, thread_id="py-1")
    fresh = await aask(RETURNS)
    assert (one["turn"], two["turn"], fresh["turn"]) == (1, 2, 1)
    assert fresh["thread_id"] not in ("py-1", "") and two["thread_id"] == "py-1"
    assert [m.content for m in two["messages"] if m.type == "human"] == [RETURNS, REFUNDS]
    assert "30 days" in one["answer"]
    assert sorted(r["question"] for r in runs.recent(0)) == sorted([RETURNS, REFUNDS, RETURNS])  # all recorded


async def test_a_thread_moves_between_ask_and_aask(store_url):
    first = await asyncio.to_thread(ask, RETURNS, thread_id="both")
    second = await aask(REFUNDS, thread_id="both")
    third = await asyncio.to_thread(ask, RETURNS, thread_id="both")
    assert (first["turn"], second["turn"], third["turn"]) == (1, 2, 3)
    assert history("both") == [("human", RETURNS), ("ai", first["answer"]), ("human", REFUNDS),
                               ("ai", second["answer"]), ("human", RETURNS), ("ai", third["answer"])]  # fmt: skip


async def test_a_persistent_graph_runs_with_ainvoke(store_url):
    # The issue's own line: the store's checkpointer was SqliteSaver's, which has no async methods.
    graph = persistent()
    out = await graph.ainvoke(turn_input(RETURNS), config("plain"))
    assert "30 days" in out["answer"]
    state = await graph.aget_state(config("plain"))
    assert [m.type for m in state.values["messages"]] == ["human", "ai"] and state.next == ()
    assert graph.get_state(config("plain")).values["answer"] == out["answer"]  # the sync face reads the same


async def test_without_a_usable_store_a_one_off_aask_still_runs_and_a_thread_is_refused(tmp_path, monkeypatch,
                                                                                       caplog):  # fmt: skip
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("SELFCRAG_DATABASE_URL", f"sqlite:///{blocked}/store.db")
    out = await aask(RETURNS)
    assert "30 days" in out["answer"] and "this run is not kept" in caplog.text
    with pytest.raises(OSError, match="cannot open"):
        await aask(RETURNS, thread_id="t")


async def test_a_turn_that_fails_is_closed_at_once_and_the_next_question_gets_its_own_answer(store_url):
    with pytest.raises(ValueError, match="at most 4,000 are accepted") as failed:
        await aask("x" * 5000, thread_id="fails")
    out = await aask(RETURNS, thread_id="fails")
    assert out["turn"] == 2 and "30 days" in out["answer"] and "recovered" not in out
    (_, note) = history("fails")[1]
    assert note == (f"This question was not answered: its run did not finish (it failed: {failed.value}). Ask it "
                    "again for an answer.")  # fmt: skip
    assert leases.current("fails") is None


async def test_a_cancelled_turn_is_closed_as_stopped_and_frees_the_thread(store_url, monkeypatch):
    import selfcrag.nodes.first_draft as drafting

    reached = asyncio.Event()
    loop = asyncio.get_running_loop()
    make = drafting.make

    def slow_make(components):  # noqa: ANN001, ANN202 - the first draft waits, as a slow model call would
        run = make(components)

        def waiting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            loop.call_soon_threadsafe(reached.set)
            import time

            time.sleep(2)
            return run(*args, **kwargs)

        return waiting

    monkeypatch.setattr(drafting, "make", slow_make)
    from selfcrag import build_graph

    graph = build_graph()
    task = asyncio.create_task(aask(GIFT, None, graph, thread_id="cancelled"))
    await asyncio.wait_for(reached.wait(), 120)
    assert leases.current("cancelled") is not None
    task.cancel()  # a client gone, a request timed out: the task is cancelled mid-run
    with pytest.raises(asyncio.CancelledError):
        await task
    assert leases.current("cancelled") is None  # freed at once, not after the lease runs out
    (_, note) = history("cancelled")[1]
    assert note == ("This question was not answered: its run did not finish (it was stopped). Ask it again for an "
                    "answer.")  # fmt: skip
    out = await aask(RETURNS, None, graph, thread_id="cancelled")
    assert out["turn"] == 2 and "30 days" in out["answer"] and "recovered" not in out


async def test_concurrent_turns_on_one_thread_keep_every_question_once_with_its_own_answer(store_url, monkeypatch):
    monkeypatch.setenv("SELFCRAG_TURN_WAIT", "600")
    questions = QUESTIONS[:5]
    outputs = await asyncio.gather(*(aask(q, thread_id="together") for q in questions))
    kept = dict(zip(questions, outputs, strict=True))
    assert sorted(o["turn"] for o in outputs) == [1, 2, 3, 4, 5]
    said = history("together")
    assert len(said) == 10
    for n in range(0, len(said), 2):  # each question once, followed by its own answer
        (asker, question), (answerer, answer) = said[n], said[n + 1]
        assert (asker, answerer) == ("human", "ai") and answer == kept[question]["answer"]
        assert kept[question]["turn"] == n // 2 + 1


async def test_a_turn_told_not_to_wait_is_refused_while_another_holds_the_thread(store_url, monkeypatch):
    async with leases.aheld("held"):  # another turn, as the lease sees it
        monkeypatch.setenv("SELFCRAG_TURN_WAIT", "0")
        with pytest.raises(ThreadBusyError, match="thread held is busy: another turn holds it"):
            await aask(RETURNS, thread_id="held")
    monkeypatch.delenv("SELFCRAG_TURN_WAIT")
    assert (await aask(RETURNS, thread_id="held"))["turn"] == 1


async def test_an_async_turn_whose_lease_was_taken_writes_no_checkpoint(store_url):
    # Fenced as the sync savers are (issue 44): a holder stalled past its lease, whose thread another process
    # then took, saves nothing more to the thread under ainvoke, and stops with one line.
    from selfcrag.errors import LeaseLostError
    from selfcrag.store.db import database

    graph = persistent()
    async with leases.aheld("fenced-async"):
        await graph.ainvoke(turn_input(RETURNS), config("fenced-async"))  # its lease is current: saved
        saved = [c.config async for c in graph.aget_state_history(config("fenced-async"))]
        database().execute("UPDATE selfcrag_turns SET expires_at = 0 WHERE thread_id = 'fenced-async'")
        assert leases._take("fenced-async", "other", "review", 30)  # another process takes the thread
        with pytest.raises(LeaseLostError, match="stopped before its next write") as lost:
            await graph.ainvoke(turn_input(REFUNDS), config("fenced-async"))
        assert "\n" not in str(lost.value)
    assert [c.config async for c in graph.aget_state_history(config("fenced-async"))] == saved
    assert history("fenced-async") == [("human", RETURNS), ("ai", history("fenced-async")[1][1])]
    assert leases.current("fenced-async")["holder"] == "other"


def stopped_aask(tmp_path, node: str, question: str, thread: str) -> subprocess.Popen[str]:  # noqa: ANN001
    """A process running `aask(question, thread_id=thread)` stopped inside `node`, once it waits there."""
    marker = tmp_path / f"in-{node}-{thread}"
    marker.unlink(missing_ok=True)
    proc = subprocess.Popen([*STOPPED, node, str(marker), "aask", question, thread], env=environment(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    eventually(lambda: marker.exists() or proc.poll() is not None, f"aask reaching {node}")
    if not marker.exists():
        pytest.fail(f"aask ended before {node}: {proc.communicate()[1][-2000:]}")
    return proc


@pytest.mark.system  # kills (kill -9) a running turn
def test_a_turn_killed_mid_run_under_aask_is_answered_as_itself_by_the_next(store_url, tmp_path):
    proc = stopped_aask(tmp_path, "first_draft", GIFT, "crash-1")
    # The checkpoint before the node is written in the background: killed once it is, the turn stops inside it.
    eventually(lambda: persistent().get_state(config("crash-1")).next == ("first_draft",), "the checkpoint")
    assert kill(proc).returncode == -signal.SIGKILL
    assert persistent().get_state(config("crash-1")).next == ("first_draft",)
    eventually(lambda: leases.current("crash-1") is None, "the killed holder's lease running out")

    out = asyncio.run(aask(RETURNS, thread_id="crash-1"))
    assert out["turn"] == 2 and "30 days" in out["answer"] and "gift card" not in out["answer"].lower()
    recovered = out["recovered"]
    assert (recovered["turn"], recovered["question"], recovered["outcome"]) == (1, GIFT, "answered")
    assert "gift card" in recovered["answer"].lower()
    assert history("crash-1") == [("human", GIFT), ("ai", recovered["answer"]), ("human", RETURNS),
                                  ("ai", out["answer"])]  # fmt: skip
    assert sorted(r["question"] for r in runs.recent(0)) == sorted([GIFT, RETURNS])


@pytest.mark.system  # kills (kill -9) a running turn
def test_a_turn_killed_again_while_resumed_under_aask_is_closed_with_a_note(store_url, tmp_path):
    for question in (GIFT, RETURNS):  # the second process resumes the first's turn and is killed inside it too
        proc = stopped_aask(tmp_path, "grade_answer", question, "crash-2")
        kill(proc)
        eventually(lambda: leases.current("crash-2") is None, "the killed holder's lease running out")
    out = asyncio.run(aask(REFUNDS, thread_id="crash-2"))
    assert out["turn"] == 2 and out["recovered"]["outcome"] == "closed" and out["recovered"]["question"] == GIFT
    note = out["recovered"]["answer"]
    assert note == ("This question was not answered: its run did not finish (it stopped again when resumed). "
                    "Ask it again for an answer.")  # fmt: skip
    assert history("crash-2") == [("human", GIFT), ("ai", note), ("human", REFUNDS), ("ai", out["answer"])]


def test_a_process_that_awaits_aask_ends_when_its_loop_does(store_url):
    # The store's async savers (an aiosqlite worker thread, an async pool) close as asyncio.run ends the loop:
    # nothing is left that keeps the process alive or loses the turn.
    script = (f"import asyncio, json, selfcrag; out = asyncio.run(selfcrag.aask({RETURNS!r}, thread_id='ends')); "
              "print(json.dumps([out['turn'], out['answer']]))")
    done = subprocess.run([sys.executable, "-c", script], env=environment(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    turn, answer = json.loads(done.stdout)
    assert turn == 1 and history("ends") == [("human", RETURNS), ("ai", answer)]
