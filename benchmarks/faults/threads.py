"""Threads and reviews on both stores (SQLite and a real PostgreSQL), through the library and the `selfcrag`
command: malformed review replies, a turn killed in the middle, a review whose claimant dies, concurrent turns on
one thread, and the store's database failing under a run (a disk that fills, a server that stops)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langgraph.types import Command

from faults.core import QUESTION, Outcome, cases

STORES = ("sqlite", "postgres")
GIFT_CARDS = "Can I return a gift card?"
SHIPPING = "Do you ship to Antarctica?"
T = "fault-thread"  # the thread each case asks on
LEASE = "3"  # seconds a dead holder keeps a thread or review (SELFCRAG_TURN_LEASE): short, so the cases are
REVIEW_EVERY_ANSWER = {"human_review": True, "min_confidence": 1.0, "caveat_band": 0.0}
HOLD_ENV = {"SELFCRAG_HUMAN_REVIEW": "1", "SELFCRAG_MIN_CONFIDENCE": "1.0", "SELFCRAG_CAVEAT_BAND": "0"}
# The real `selfcrag` command with one node replaced by one that says so (a marker file) and waits to be killed:
# a chosen point of a run, whatever the branch's code around it.
STOPPER = textwrap.dedent("""
    import importlib, os, sys, time
    node, marker, *arguments = sys.argv[1:]
    module = importlib.import_module(f"selfcrag.nodes.{node}")
    make = module.make
    def stopping_make(components):
        run = make(components)
        def stopped(*args, **kwargs):
            open(marker, "w").write(str(os.getpid()))
            time.sleep(3600)
        return stopped
    module.make = stopping_make
    graph_module = importlib.import_module("selfcrag.graph")
    graph_module.graph = graph_module.build_graph()  # a review resumes on the module's graph
    from selfcrag.cli import main
    sys.exit(main(arguments))
""")
_postgres: list[str] = []


def postgres() -> str:
    """The matrix's PostgreSQL server (one for all cases, stopped at exit)."""
    if not _postgres:
        from support.postgres import postgres_server

        stack = contextlib.ExitStack()
        _postgres.append(stack.enter_context(postgres_server()))
        atexit.register(stack.close)
    return _postgres[0]


@contextlib.contextmanager
def store(kind: str) -> Iterator[str]:
    """A fresh, empty database of `kind`, as SELFCRAG_DATABASE_URL for this process and the commands it starts."""
    from selfcrag.store.db import close_all

    if kind == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp(prefix='selfcrag-faults-store-')}/store.db"
    else:
        import psycopg

        server, name = postgres(), f"f{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = server.replace("/postgres?", f"/{name}?")
    os.environ["SELFCRAG_DATABASE_URL"] = url
    try:
        yield url
    finally:
        close_all()
        os.environ.pop("SELFCRAG_DATABASE_URL", None)


def selfcrag(outcome: Outcome, *args: str, env: dict[str, str] | None = None, one_line: bool = True,
             limit: int | None = None, memory: int | None = None, strict: bool = False,
             ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The `selfcrag` command; what it prints is seen, and its stderr must end in one line. `limit`: the bytes any
    file it writes may grow to; `memory`: the bytes of address space it may take."""

    def limits() -> None:
        if limit:  # Python ignores SIGXFSZ: a write past the limit fails (EFBIG) as on a full disk
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        if memory:  # a runaway process fails instead of the machine
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "SELFCRAG_TURN_LEASE": LEASE, **(env or {})},
                          preexec_fn=limits if limit or memory else None)  # fmt: skip
    outcome.seen += [proc.stdout, proc.stderr]
    if one_line:
        outcome.one_line.append((proc.stderr, strict))
    return proc


def stopped_in(outcome: Outcome, node: str, *args: str, env: dict[str, str] | None = None) -> None:
    """`selfcrag ARGS` run until it reaches `node`, then killed with SIGKILL there."""
    marker = Path(tempfile.mkdtemp(prefix="selfcrag-faults-stop-")) / "reached"
    process = subprocess.Popen([sys.executable, "-c", STOPPER, node, str(marker), *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "SELFCRAG_TURN_LEASE": LEASE, **(env or {})})  # fmt: skip
    while not marker.exists() and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    out, err = process.communicate()
    outcome.seen += [out, err]
    if not marker.exists():
        raise RuntimeError(f"`selfcrag {' '.join(args)}` ended before reaching {node}: {err[-300:]}")


def history(url: str, thread: str) -> list[tuple[str, str]]:
    from selfcrag.threads import config, persistent

    state = persistent().get_state(config(thread))
    return [(m.type, m.content) for m in state.values.get("messages", [])]


# --- malformed review replies -------------------------------------------------------------------------------------

PAYLOADS: list[Any] = [{"action": "edit", "answer": 5}, "", [], {"action": "approve", "answer": {"x": 1}},
                       {"action": "publish"}, {"action": "edit"}, {"action": "edit", "answer": "   "},
                       {"action": "edit", "answer": "x" * 1_000_000}, 42, {"action": ["approve"]},
                       {"action": "reject", "note": 7}, "maybe", {"verdict": "approve"}]  # fmt: skip


def _bad_reply(outcome: Outcome, pair: tuple[str, Any]) -> None:
    kind, payload = pair
    from selfcrag import build_graph
    from selfcrag.store.checkpoint import checkpointer

    with store(kind) as url:
        graph = build_graph(checkpointer=checkpointer(url))
        config = {"configurable": {"thread_id": "review"}}
        try:
            graph.invoke({"question": QUESTION}, config, context=REVIEW_EVERY_ANSWER)
            graph.invoke(Command(resume=payload), config, context=REVIEW_EVERY_ANSWER)
            paused = bool(graph.get_state(config).interrupts)
            done = graph.invoke(Command(resume={"action": "approve"}), config, context=REVIEW_EVERY_ANSWER)
            outcome.seen.append(json.dumps(done, default=str)[:100_000])
            outcome.flags["stuck_threads"] = not paused or done.get("decision") != "answer"
            outcome.note = "paused again, then approved" if not outcome.flags["stuck_threads"] else "stuck"
        except Exception as exc:  # noqa: BLE001
            outcome.flags |= {"crashes": True, "stuck_threads": True}
            outcome.note = f"{type(exc).__name__}: {exc}"[:120]


_pairs = [(kind, payload) for kind in STORES for payload in PAYLOADS]
cases(
    "threads",
    [f"{kind}: resume with {json.dumps(p)[:40]}" for kind, p in _pairs],
    _bad_reply,
    _pairs,
    fast={0, 4, len(PAYLOADS) + 4},
)

# --- a turn killed in the middle ----------------------------------------------------------------------------------


def _killed_turn(outcome: Outcome, kind: str) -> None:
    """`kill -9` while the turn is in `generate` (after prepare, retrieve and grading were checkpointed); the next
    question on the thread is answered as itself, and the killed one is not answered in its place."""
    with store(kind) as url:
        first = selfcrag(outcome, "ask", QUESTION, "--thread", T, "--json")
        stopped_in(outcome, "generate", "ask", GIFT_CARDS, "--thread", T)
        after = selfcrag(outcome, "ask", SHIPPING, "--thread", T, "--json")
        if after.returncode != 0:
            outcome.flags["stuck_threads"], outcome.note = True, after.stderr.strip()[-120:]
            return
        answer = json.loads(after.stdout)
        asked = [text for kind_, text in history(url, T) if kind_ == "human"]
        wrong = "gift card" in answer["answer"].lower() or (asked and asked[-1] != SHIPPING)
        repeated = json.loads(first.stdout)["turn"] >= answer["turn"]
        outcome.flags["lost_turns"] = bool(wrong or repeated)
        outcome.note = f"turn {answer['turn']}: {answer['answer'][:60]!r}"


cases(
    "threads",
    [f"{kind}: kill -9 in the middle of a turn, then ask again" for kind in STORES],
    _killed_turn,
    list(STORES),
    # Not in the fast subset for now: under load, 1 of 2 clean-clone CI runs of 2026-11-26 found turn 4 where 3
    # was due (one human turn too many after the kill), the same symptom as the PostgreSQL flake test_turns.py
    # skips; 6 of 6 runs alone passed. Open in the closing note; the full matrix still runs both stores.
    fast=set(),
)

# --- a review whose claimant dies ---------------------------------------------------------------------------------


def _dead_claim(outcome: Outcome, kind: str) -> None:
    """`selfcrag review approve` killed (SIGKILL) inside the resumed run: once its lease runs out the review is
    listed again, a reviewer approves it, and the thread takes new questions."""
    with store(kind):
        held = selfcrag(outcome, "ask", QUESTION, "--thread", T, "--review", "--json", env=HOLD_ENV)
        if "review" not in json.loads(held.stdout or "{}"):
            raise RuntimeError(f"the answer was not held for review: {held.stdout[:200]} {held.stderr[-200:]}")
        stopped_in(outcome, "human_review", "review", "approve", T)
        time.sleep(float(LEASE) + 1)
        listed = f'"{T}"' in selfcrag(outcome, "review", "list", "--json").stdout
        approved = selfcrag(outcome, "review", "approve", T).returncode == 0
        next_turn = selfcrag(outcome, "ask", SHIPPING, "--thread", T).returncode == 0
        outcome.flags["stuck_threads"] = not (listed and approved and next_turn)
        outcome.note = f"listed again {listed}, approved {approved}, next turn {next_turn}"


cases("threads", [f"{kind}: kill -9 during review approve" for kind in STORES], _dead_claim, list(STORES), fast={0})

# --- concurrent turns ---------------------------------------------------------------------------------------------


def at_once(outcome: Outcome, commands: list[list[str]], patience: float = 300) -> list[tuple[str, str, int]]:
    """(stdout, stderr, exit code) of `selfcrag` commands started together; one still running after `patience`
    seconds is killed (exit code -9) and counted stuck."""
    env = {**os.environ, "SELFCRAG_TURN_LEASE": LEASE}
    running = [subprocess.Popen([sys.executable, "-m", "selfcrag.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env) for args in commands]  # fmt: skip
    deadline, done = time.monotonic() + patience, []
    for process in running:
        try:
            out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            outcome.flags["stuck_threads"] = True
        outcome.seen += [out, err]
        outcome.one_line.append((err, False))
        done.append((out, err, process.returncode))
    outcome.flags["crashes"] = outcome.flags.get("crashes", False) or any(rc < 0 for _, _, rc in done)
    return done


def _concurrent(outcome: Outcome, pair: tuple[str, int]) -> None:
    """N `selfcrag ask --thread T` at once on a store already in use: each question is answered on the thread or
    refused in one line; none is lost, and no turn number repeats."""
    kind, n = pair
    with store(kind) as url:
        selfcrag(outcome, "ask", QUESTION, "--thread", "warm-up")  # the store's tables exist: the turns are tested
        questions = [f"Question {i}: how many days do I have to return item number {i}?" for i in range(n)]
        done = at_once(outcome, [["ask", q, "--thread", T, "--json"] for q in questions])
        answered = {q: json.loads(out)["turn"] for q, (out, _, rc) in zip(questions, done, strict=True) if rc == 0}
        asked = [text for kind_, text in history(url, T) if kind_ == "human"]
        lost = [q for q in answered if asked.count(q) != 1]
        repeated = len(set(answered.values())) != len(answered)
        outcome.flags["lost_turns"] = bool(lost) or repeated
        outcome.note = f"{len(answered)}/{n} answered, {len(lost)} lost, turns {sorted(answered.values())}"


_concurrency = [("sqlite", 3), ("sqlite", 10), ("postgres", 10)]
cases("threads", [f"{kind}: {n} concurrent turns on one thread" for kind, n in _concurrency], _concurrent,
      _concurrency, fast={0})  # fmt: skip


def _fresh_database(outcome: Outcome, kind: str) -> None:
    """Five commands at once on a database nobody used yet: each sets up the store's tables and answers."""
    with store(kind):
        done = at_once(outcome, [["ask", QUESTION, "--thread", f"first-{i}"] for i in range(5)], patience=180)
    answered = sum(rc == 0 for _, _, rc in done)
    outcome.note = f"{answered}/5 answered" + (", the others hung in setting up the store" if answered < 5 else "")


cases("threads", [f"{kind}: the first five commands on a fresh database at once" for kind in STORES],
      _fresh_database, list(STORES), fast={1})  # fmt: skip

# --- the store's database failing under a run ---------------------------------------------------------------------


def _database_fails(outcome: Outcome, kind: str) -> None:
    """SQLite: the store's files may not grow past 64 KB (RLIMIT_FSIZE, EFBIG as on a full disk). PostgreSQL: the
    server stops while the turn runs (`pg_ctl stop -m immediate` when the run reaches `generate`). Either way the
    command ends in one line, non-zero; with the fault gone, the thread answers its next question."""
    with store(kind) as url:
        first = selfcrag(outcome, "ask", QUESTION, "--thread", T, "--json")
        if kind == "sqlite":
            failed = selfcrag(outcome, "ask", GIFT_CARDS, "--thread", T, limit=65536)
        else:
            failed = _postgres_stops(outcome, url)
        after = selfcrag(outcome, "ask", SHIPPING, "--thread", T, "--json")
    outcome.flags["crashes"] = failed.returncode == 0 or failed.returncode < 0  # no fault seen, or a signal death
    outcome.flags["stuck_threads"] = after.returncode != 0 or first.returncode != 0
    outcome.note = (failed.stderr.strip().splitlines() or ["(nothing)"])[-1][:120]


def _postgres_stops(outcome: Outcome, url: str) -> subprocess.CompletedProcess[str]:
    from support.postgres import start, stop

    marker = Path(tempfile.mkdtemp(prefix="selfcrag-faults-stop-")) / "reached"
    waiter = textwrap.dedent("""
        import importlib, os, sys, time
        node, marker, go_on, *arguments = sys.argv[1:]
        module = importlib.import_module(f"selfcrag.nodes.{node}")
        make = module.make
        def pausing_make(components):
            run = make(components)
            def paused(*args, **kwargs):
                open(marker, "w").write("here")
                while not os.path.exists(go_on):
                    time.sleep(0.05)
                return run(*args, **kwargs)
            return paused
        module.make = pausing_make
        from selfcrag.cli import main
        sys.exit(main(arguments))
    """)
    go_on = marker.with_name("go-on")
    args = ["ask", GIFT_CARDS, "--thread", T]
    process = subprocess.Popen([sys.executable, "-c", waiter, "generate", str(marker), str(go_on), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    while not marker.exists() and process.poll() is None:
        time.sleep(0.05)
    stop(url)
    go_on.write_text("")
    out, err = process.communicate(timeout=300)
    start(url)
    outcome.seen += [out, err]
    outcome.one_line.append((err, False))
    return subprocess.CompletedProcess(args, process.returncode, out, err)


cases(
    "threads",
    ["sqlite: the disk fills during a turn", "postgres: the server stops during a turn"],
    _database_fails,
    list(STORES),
    fast={0},
)
