"""A claim that outlives its lease (issue 44): a reviewer process stopped (SIGSTOP: a suspended laptop, a paused VM)
while it holds a review's lease, past SELFCRAG_TURN_LEASE; a second reviewer decides meanwhile; the first is
resumed (SIGCONT). The stalled reviewer must write nothing once its lease is gone — not the thread, not the review
record, not the run record — and say so in one line, and the review record must agree with the thread.

Each trial stops the first reviewer at one of two points: inside the decision (the `human_review` node, before any
write of it) or between the thread's write and the record's (`reviews.set_status`). Trials on both stores, for
approve then approve and for edit then reject."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from faults.core import QUESTION, Outcome, cases, timed
from faults.threads import REVIEW_EVERY_ANSWER, SHIPPING, STORES, T, selfcrag, store

LEASE = 2.0  # seconds (SELFCRAG_TURN_LEASE): the first reviewer is stopped for longer than this
STALLED_EDIT = "The stalled reviewer's edit, which must never be published."
TRIALS = 10  # per store and pair of actions
POINTS = ("decision", "record")
TESTS = str(Path(__file__).resolve().parents[2] / "tests")  # support.pausing: the command with a point made to wait


def stop_outside_writes(process: subprocess.Popen[str]) -> None:
    """SIGSTOP it outside any SQLite write (tests/support/pausing.py says why)."""
    if TESTS not in sys.path:
        sys.path.append(TESTS)
    from support.pausing import stop_outside_writes as stop

    stop(process)


def decide_args(action: str, who: str) -> list[str]:
    return ["review", action, T, *(["--answer", STALLED_EDIT if who == "stalled" else "Edited."]
                                   if action == "edit" else [])]  # fmt: skip


def snapshot() -> dict[str, Any]:
    """What the stalled reviewer must not change: the thread's checkpoints, the review record, the run records."""
    from selfcrag.store import reviews, runs
    from selfcrag.threads import config, persistent

    graph = persistent()
    state = graph.get_state(config(T))
    record = reviews.get(T)
    return {"checkpoints": len(list(graph.get_state_history(config(T)))), "paused": bool(state.interrupts),
            "thread_action": (state.values.get("review") or {}).get("action", ""),
            "thread_answer": state.values.get("answer", ""),
            "record": {k: record[k] for k in ("status", "answer", "resolved_at")},
            "runs": [(r["decision"], r["reviewed"], r["finished_at"]) for r in runs.recent(0)]}  # fmt: skip


def _trial(outcome: Outcome, setting: tuple[str, tuple[str, str], str]) -> None:
    kind, (first, second), point = setting
    env = {"SELFCRAG_TURN_LEASE": f"{LEASE:g}"}
    with store(kind):
        from selfcrag import ask

        held = ask(QUESTION, thread_id=T, context=REVIEW_EVERY_ANSWER)  # in this process: the commands are the test
        if "review" not in held:
            raise RuntimeError(f"the answer was not held for review: {held.get('decision')}")
        folder = Path(tempfile.mkdtemp(prefix="selfcrag-faults-fence-"))
        marker, go_on = folder / "reached", folder / "go-on"
        path = os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])
        stalled = subprocess.Popen([sys.executable, "-m", "support.pausing", point, str(marker), str(go_on),
                                    *decide_args(first, "stalled")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env={**os.environ, "PYTHONPATH": path, **env})  # fmt: skip
        try:
            while not marker.exists() and stalled.poll() is None:
                time.sleep(0.02)
            if not marker.exists():
                raise RuntimeError(f"the first reviewer ended before the {point} point: {stalled.stderr.read()[-300:]}")
            stop_outside_writes(stalled)
            go_on.write_text("")  # it goes on only once resumed
            time.sleep(LEASE + 1)  # its lease runs out while it is stopped
            other = selfcrag(outcome, *decide_args(second, "other"), env=env)
            before = snapshot()
        finally:
            stalled.send_signal(signal.SIGCONT)
        out, err = stalled.communicate(timeout=300)
        outcome.seen += [out, err]
        outcome.one_line.append((err, True))
        after = snapshot()
        _, failed, _ = timed(lambda: ask(SHIPPING, thread_id=T))
        outcome.seen.append(repr(failed))
    from selfcrag.store.reviews import DONE

    wrote, record, action = after != before, after["record"], after["thread_action"]
    agree = bool(action) and not after["paused"] and (record["status"], record["answer"]) == (
        DONE[action], after["thread_answer"])  # fmt: skip
    published_stalled = STALLED_EDIT in after["thread_answer"] and point == "decision"
    said = (err.strip().splitlines() or [""])[-1]
    outcome.flags["stale_writes"] = wrote or not agree or published_stalled or stalled.returncode == 0
    # Stopped inside the decision, it had written nothing: the second reviewer's decision is the one taken.
    expected = DONE[second if point == "decision" else first]
    outcome.flags["crashes"] = record["status"] != expected or (point == "decision" and other.returncode != 0)
    outcome.flags["stuck_threads"] = failed is not None
    outcome.note = (f"{point}: record {record['status']}, thread {after['thread_action'] or '-'}; stalled exit "
                    f"{stalled.returncode}: {said[:60]}")  # fmt: skip


_settings = [(kind, pair, POINTS[n % 2]) for kind in STORES for pair in (("approve", "approve"), ("edit", "reject"))
             for n in range(TRIALS)]  # fmt: skip
cases(
    "fencing",
    [f"{kind}: {a}/{b}, stopped at the {point} past its lease (trial {n % TRIALS + 1})"
     for n, (kind, (a, b), point) in enumerate(_settings)],  # fmt: skip
    _trial,
    _settings,
    fast={0, TRIALS, 3 * TRIALS + 1},  # SQLite both pairs, PostgreSQL edit/reject stopped at the record
)
