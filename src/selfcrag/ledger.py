"""Each run's bounds, kept where a client cannot write them: model calls spent, tokens, retrieval rounds,
generations on the current evidence, and when the run's time started. Thread state is client-writable (a server's
`threads.update_state`, a resume with `input=None`), so a bound read from state could be raised by whoever wrote
it: `llm_calls=-100000` gave a run 169 model calls against a cap of 10. The ledger lives in the process running
the run instead, keyed by the run:

- the run id LangGraph gives each run (a server always sets it; in process, a caller may pass `run_id`),
- the thread, the graph's namespace (a subgraph's invocations each get their own), and
- `run_ledger`, an id `prepare` writes to state when it opens the run: it tells apart in-process runs that have
  no run id and no thread. A client that changes it only gets a fresh ledger (below), never another run's.

A run that did not start at `prepare` in this process (a resume, an update then `input=None`, a restart after a
crash) opens a fresh ledger at its first node: no calls, rounds or generations yet, and its time starts then. So
every run is bounded by the caps from the moment it runs, whatever the state says. Nodes write the state's counters
from the ledger, so routing, the trace, the monitor and the runs log read counts the run made, never negative
ones; a count a client wrote and no node has overwritten yet can only end a loop sooner (routing.py compares
it with the same caps). A finished run's ledger is forgotten (`finalize`),
and at most LEDGERS_KEPT are kept (a run that ended in an error is dropped oldest first).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    from selfcrag.context import Context
    from selfcrag.state import State

LEDGERS_KEPT = 1024  # runs in progress in one process, far more than a server runs at once


@dataclass
class RunLedger:
    calls: int = 0  # model calls made, every attempt (llm/calls.py takes each one here first)
    tokens: int = 0
    rounds: int = 0  # retrieval rounds
    generations: int = 0  # generations on the current evidence
    started: float = field(default_factory=time.monotonic)  # the run's deadline is this + run_timeout
    lock: threading.Lock = field(default_factory=threading.Lock)  # concurrent nodes of a superstep share it

    def reserve_call(self, most: int) -> bool:
        """Take one model call; False when `most` are spent."""
        with self.lock:
            if self.calls >= most:
                return False
            self.calls += 1
            return True

    def next_round(self, new_evidence: bool) -> int:
        """A retrieval round begins; new evidence (or the first round) starts the generation count again."""
        with self.lock:
            self.rounds += 1
            if new_evidence or self.rounds == 1:
                self.generations = 0
            return self.rounds

    def next_generation(self) -> int:
        with self.lock:
            self.generations += 1
            return self.generations

    def new_evidence(self) -> None:
        """The evidence changed (web results): its generations count from 0."""
        with self.lock:
            self.generations = 0

    def spent(self, update: dict[str, Any], reserved: int = 0) -> dict[str, Any]:
        """A model node's update with its usage added here and the run's totals written for state (the state's
        reducer keeps the larger of two nodes' totals in one superstep: the later one). Calls made through
        llm/calls.py were counted as they were `reserved`; the node's components may report more
        (their own models, made without it), and those count too."""
        tokens, calls = count_of(update.get("tokens"), None), count_of(update.get("llm_calls"), None)
        with self.lock:
            self.tokens += tokens
            self.calls += max(0, calls - reserved)
            return {**update, "llm_calls": self.calls, "tokens": self.tokens}


_LEDGERS: OrderedDict[tuple[Any, ...], RunLedger] = OrderedDict()
_LOCK = threading.Lock()


def open_run(runtime: Runtime[Any] | None) -> str:
    """A run starts (`prepare`): a fresh ledger; the id to write to state as `run_ledger`."""
    ident = uuid.uuid4().hex
    key = _key(runtime, ident)
    if key is not None:
        with _LOCK:
            _LEDGERS[key] = RunLedger()
            _trim()
    return ident


def ledger_of(state: State, runtime: Runtime[Any] | None, settings: Context) -> RunLedger:
    """The ledger of the run this node belongs to; a fresh one when this process has none for it (the run did not
    start at `prepare` here). A node called on its own, outside any run, counts from the state's counts clamped
    into the caps."""
    key = _key(runtime, state.get("run_ledger"))
    if key is None:
        return RunLedger(calls=count_of(state.get("llm_calls"), settings.max_llm_calls),
                         tokens=count_of(state.get("tokens"), None),
                         rounds=count_of(state.get("retrieval_rounds"), settings.max_retrieval_rounds),
                         generations=count_of(state.get("generations"), settings.max_generations))  # fmt: skip
    with _LOCK:
        ledger = _LEDGERS.get(key)
        if ledger is None:
            ledger = _LEDGERS[key] = RunLedger()
            _trim()
        else:
            _LEDGERS.move_to_end(key)
        return ledger


def forget(state: State, runtime: Runtime[Any] | None) -> None:
    """The run is finished (`finalize`): no node of it counts any more."""
    key = _key(runtime, state.get("run_ledger"))
    if key is not None:
        with _LOCK:
            _LEDGERS.pop(key, None)


def _key(runtime: Runtime[Any] | None, ident: Any) -> tuple[Any, ...] | None:
    """The run's key; None when nothing tells this run from another (a node function called on its own)."""
    info = getattr(runtime, "execution_info", None)
    run_id, thread = getattr(info, "run_id", None), getattr(info, "thread_id", None)
    ident = ident if isinstance(ident, str) else ""
    if not (run_id or thread or ident):
        return None
    # A node's namespace is the graph's plus its own task ("node:task"); the graph's is shared by the run's nodes.
    scope = str(getattr(info, "checkpoint_ns", "") or "").rpartition("|")[0]
    return (run_id, thread, scope, ident)


def _trim() -> None:
    while len(_LEDGERS) > LEDGERS_KEPT:
        _LEDGERS.popitem(last=False)


def count_of(value: Any, most: int | None) -> int:
    """A count read from state, as a client may have written it: not a finite number is 0, and it is clamped to
    [0, most]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0
    value = max(value, 0) if most is None else min(max(value, 0), most)
    return int(min(value, 2**62))
