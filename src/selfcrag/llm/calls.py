"""The one place every model call goes through: the run's call budget, deadlines, retries and reply sizes.

- Budget: `max_llm_calls` is a hard ceiling over the whole run. Every attempt (retries and rejected
  structured-output probes included) takes one call from the run's ledger (selfcrag/ledger.py: in this process,
  never in client-writable state) first; when none is left the call is not made and the component degrades in
  its configured direction. The two checks of a draft run at the same time and share the run's one ledger.
- Deadlines: a call (all its attempts) ends `llm_timeout` seconds after it starts, and never after the run's
  own deadline (`run_timeout` from the run's start, which its ledger records). The model is called in a worker
  thread and we stop waiting at the deadline, whatever the server does (silent, one byte a second): httpx
  timeouts are per read, so the client alone cannot promise that. The abandoned thread ends when the client's
  own timeout fires (ChatOpenAI is built with `timeout=llm_timeout`); it is a daemon, so it never holds the
  process at exit. Ctrl-C and SIGTERM (selfcrag/stopping.py) end the wait at once: the call is abandoned and
  the run unwinds. The worker runs in a copy of the caller's context, so the node's callbacks (and with them
  `stream_mode="messages"`) and the run's limits go along.
- Retries: transient faults (timeouts, connection errors, 408/409/429/5xx) are retried here, up to
  `MODEL_ATTEMPTS`, waiting what the server's `Retry-After` asks when that fits in the deadline (else giving up
  at once), else backing off exponentially. LangGraph's node-level RetryPolicy is not used for model nodes:
  it re-ran a whole node and lost the failed attempt's counts.
- Sizes: every call carries `max_tokens` for its role (`MAX_TOKENS`), and a reply longer than the role's
  character cap is not parsed (`reply_chars`).

Components keep their Protocols: nodes that call models run inside `run_limits` (a `ContextVar`), set by the
wrapper `selfcrag.nodes.bounded`; outside a graph run there is no budget and no run deadline.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from selfcrag.errors import BudgetSpent, ReplayedFault, RunTimeSpent, TotalTimeoutError
from selfcrag.llm import replay
from selfcrag.llm.faults import describe, is_transient, retry_after
from selfcrag.stopping import pause, stopping, watched

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.ledger import RunLedger

T = TypeVar("T")

MODEL_ATTEMPTS = 3
BACKOFF = 0.5  # seconds before the second attempt, doubled before each later one; no jitter (no herd to spread)

# Completion tokens one call may produce, by role (`max_tokens`). Each is what its prompt asks for with room to
# spare, so a careful model never hits it and a runaway one stops early:
MAX_TOKENS = {
    "answer": 1024,  # summaries, comparisons, overviews and code answers
    # A direct answer to one point: one to three cited sentences and perhaps a Missing line (~120 tokens). A small
    # model that rambles on to a 1024 cap spent minutes of a 2-core machine on text the checks then threw away.
    "short_answer": 256,
    "relevance": 160,  # per passage graded: id, label, confidence and a one-sentence reason (~50 tokens)
    "groundedness": 1536,  # repeats each statement of an answer (itself <= 1024) with a verdict and a reason
    "answer_grade": 256,  # a score, what is missing, one reason
    "rewrite": 200,  # one query and one reason
    "route": 100,  # one route name and a few words of reason
    "refine": 1024,  # id and score of each strip kept (~15 tokens) out of a few dozen candidates
}
# A reply longer than this many characters per token of its role's cap is not parsed: English runs ~4 characters
# a token, so this leaves room for whitespace-heavy JSON, and bounds the reply of a model that ignores max_tokens.
CHARS_PER_TOKEN = 8


def max_tokens(role: str, items: int = 1) -> int:
    """The completion-token cap of one call; `items` scales the per-passage roles (a batch of k passages)."""
    return MAX_TOKENS[role] * max(1, items) if role == "relevance" else MAX_TOKENS[role]


def reply_chars(role: str, items: int = 1) -> int:
    return max_tokens(role, items) * CHARS_PER_TOKEN


# --- the run's limits ---------------------------------------------------------------------------------------------


@dataclass
class RunLimits:
    max_calls: int
    deadline: float  # time.monotonic() when the run's time is up
    run_timeout: float
    ledger: RunLedger  # the run's counts, shared by the concurrent nodes of a superstep (selfcrag/ledger.py)
    reserved: int = 0  # calls this node took from the ledger
    turn: int = 0  # concurrent nodes of this superstep ahead of this one in the order calls are handed out
    left_at_start: int | None = None  # calls the budget had left when the superstep began (state's count)

    def reserve(self) -> bool:
        """Take one call from the budget; False when none is left. Concurrent nodes that each need a call get
        their first calls in a fixed order: with fewer left than they are, those behind go without, whichever
        thread asks first, so a decision never depends on thread timing (a replayed run decides as recorded)."""
        if self.reserved == 0 and self.turn and self.left_at_start is not None and self.left_at_start <= self.turn:
            return False
        if not self.ledger.reserve_call(self.max_calls):
            return False
        self.reserved += 1
        return True

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


_LIMITS: contextvars.ContextVar[RunLimits | None] = contextvars.ContextVar("selfcrag_run_limits", default=None)


@contextmanager
def run_limits(settings: Context, ledger: RunLedger, turn: int = 0, spent_before: int | None = None
               ) -> Iterator[RunLimits]:  # fmt: skip
    """The limits of the run for the calls made inside: its budget and deadline, counted in its `ledger`. A node
    run concurrently with others has its `turn` among them and the calls `spent_before` their superstep."""
    left = None if spent_before is None else max(0, settings.max_llm_calls - spent_before)
    limits = RunLimits(max_calls=settings.max_llm_calls, deadline=ledger.started + settings.run_timeout,
                       run_timeout=settings.run_timeout, ledger=ledger, turn=turn, left_at_start=left)  # fmt: skip
    token = _LIMITS.set(limits)
    try:
        yield limits
    finally:
        _LIMITS.reset(token)


def current_limits() -> RunLimits | None:
    return _LIMITS.get()


# --- calls ----------------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One logical call: the model's output, or the fault it ended with, and the requests it made."""

    output: Any = None
    error: BaseException | None = None
    calls: int = 0
    note: str = ""  # why it stopped retrying, when that is not obvious from the error

    @property
    def reason(self) -> str:
        """The fault for the trace (never for users: it names exceptions and quotes servers)."""
        if self.error is None:
            return ""
        text = describe(self.error)
        return f"{text} ({self.note})" if self.note else text

    @property
    def skipped(self) -> bool:
        """The call was not made at all: no budget or no time left."""
        return isinstance(self.error, (BudgetSpent, RunTimeSpent))


def call(runnable: Any, value: Any, settings: Context, config: dict[str, Any] | None = None) -> Outcome:
    """`runnable.invoke(value, config)` within the run's budget and deadlines, retrying transient faults.
    Never raises an Exception: every fault comes back in the Outcome."""
    limits = current_limits()
    start = time.monotonic()
    deadline, why = start + settings.llm_timeout, "llm_timeout"
    if limits is not None and limits.deadline < deadline:
        deadline, why = limits.deadline, "the run's remaining time"
    outcome = Outcome()
    for attempt in range(1, MODEL_ATTEMPTS + 1):
        if limits is not None and limits.remaining() <= 0:
            return _stopped(outcome, RunTimeSpent(f"the run's time limit (run_timeout={limits.run_timeout:g} s) is "
                                                  "spent: call not made"))  # fmt: skip
        if limits is not None and not limits.reserve():
            return _stopped(outcome, BudgetSpent(f"the run's model-call budget (max_llm_calls={limits.max_calls}) "
                                                 "is spent: call not made"))  # fmt: skip
        outcome.calls += 1
        began = time.monotonic()
        with replay.attempt() as made:  # what a recording needs to replay this attempt, fault included
            try:
                outcome.output = before(deadline, lambda: runnable.invoke(value, config=config),
                                        f"{deadline - began:.3g} s ({why})")  # fmt: skip
                outcome.error = None
                return outcome
            except Exception as exc:  # any fault of any provider, RecursionError and MemoryError included
                outcome.error = exc
            wait = _next_try(outcome, attempt, deadline)
            made.failed(outcome.error, retried=wait is not None, note=outcome.note)
        if wait is None:
            return outcome
        pause(wait)  # ends at once when the process is stopping (Ctrl-C, SIGTERM)
    return outcome  # pragma: no cover - the loop returns on its last attempt


def _next_try(outcome: Outcome, attempt: int, deadline: float) -> float | None:
    """Seconds to wait before another attempt after `outcome`'s fault, or None to stop (with a note when the
    reason is not obvious). A fault replayed from a recording is retried exactly when it was then."""
    error = outcome.error
    assert error is not None
    if isinstance(error, ReplayedFault):
        outcome.note = error.note
        return 0.0 if error.retried and attempt < MODEL_ATTEMPTS else None
    if not is_transient(error) or attempt == MODEL_ATTEMPTS:
        if attempt > 1:
            outcome.note = f"after {attempt} attempts"
        return None
    asked = retry_after(error)
    wait = asked if asked is not None else BACKOFF * 2 ** (attempt - 1)
    if time.monotonic() + wait >= deadline:
        outcome.note = (f"the server asked to retry after {asked:g} s, beyond the call's deadline" if asked
                        is not None else f"no time left before the call's deadline for attempt {attempt + 1}")
        return None
    return wait


def _stopped(outcome: Outcome, reason: Exception) -> Outcome:
    """A call that cannot go on: the fault of its last attempt if it made one (the note says why it stopped),
    else the reason it was never made."""
    if outcome.error is None:
        outcome.error = reason
    else:
        outcome.note = f"not retried: {reason}"
    return outcome


def call_all(runnable: Any, values: Sequence[Any], settings: Context,
             config: dict[str, Any] | None = None) -> list[Outcome]:  # fmt: skip
    """One call per value, all at once (parallel grading), each in a copy of the caller's context."""
    if len(values) == 1:
        return [call(runnable, values[0], settings, config)]
    from langchain_core.runnables.config import ContextThreadPoolExecutor

    with ContextThreadPoolExecutor(max_workers=len(values)) as pool:
        return list(pool.map(lambda v: call(runnable, v, settings, config), values))


def before(deadline: float, work: Callable[[], T], span: str) -> T:
    """`work()` in a worker thread; TotalTimeoutError when it has not finished at `deadline` (time.monotonic())."""
    result: dict[str, Any] = {}
    done, started = threading.Event(), time.monotonic()
    context = contextvars.copy_context()  # the node's config (callbacks, stream writer) and the run's limits

    def run() -> None:
        try:
            result["value"] = context.run(work)
        except BaseException as exc:  # handed to the waiting caller, whatever it is
            result["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="selfcrag-call", daemon=True).start()
    with watched(done):  # Ctrl-C or SIGTERM wakes this wait: the call is abandoned, its daemon thread left behind
        finished = done.wait(max(0.0, deadline - time.monotonic()))
    if stopping():
        raise KeyboardInterrupt(f"the process is stopping: a call abandoned after {time.monotonic() - started:.1f} s")
    if not finished:
        raise TotalTimeoutError(f"no complete reply within {span}")
    if "error" in result:
        raise result["error"]
    return result["value"]  # type: ignore[no-any-return]


def within(seconds: float, work: Callable[[], T], what: str) -> T:
    """`work()` for at most `seconds`, and never past the run's deadline (web search: not a model call, so it
    takes nothing from the call budget). Raises RunTimeSpent when the run has no time left."""
    deadline, span = time.monotonic() + seconds, f"{seconds:.3g} s (its timeout)"
    limits = current_limits()
    if limits is not None and limits.deadline < deadline:
        if limits.remaining() <= 0:
            raise RunTimeSpent(f"the run's time limit (run_timeout={limits.run_timeout:g} s) is spent: {what} "
                               "not made")  # fmt: skip
        deadline, span = limits.deadline, f"{limits.remaining():.3g} s (the run's remaining time)"
    return before(deadline, work, span)


def time_left(seconds: float) -> float:
    """`seconds`, or less when the run ends sooner: what a client's own timeout should be."""
    limits = current_limits()
    return seconds if limits is None else max(0.001, min(seconds, limits.remaining()))
