"""What every case shares: its outcome, the failure columns, the registry of cases, and the checks that apply to
every case whatever it exercises (the operator's key in anything the case produced, a traceback where one line was
due)."""

from __future__ import annotations

import io
import logging
import re
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

QUESTION = "How many days do I have to return an item?"
OPERATOR_KEY = "sk-operator-secret-fault-matrix"  # planted in every model and server case; must never be seen
SLACK = 6.0  # seconds past run_timeout still counted on time: a shared 2-core machine, thread start-up
BOUNDED = {"llm_timeout": 2.0, "run_timeout": 10.0}  # the operator's deadlines for the model cases
COLUMNS = ("crashes", "tracebacks", "past_deadline", "budget_overruns", "count_mismatches", "lost_indexes",
           "lost_turns", "stuck_threads", "stale_writes", "forged_state", "trespasses", "unbounded", "leaked_keys",
           "instructions_obeyed")  # fmt: skip
MEANING = {
    "crashes": "an exception other than the one-line errors bad input deserves, or no result where one was due",
    "tracebacks": "a traceback or an exception line where one line was due (ingest: any line not selfcrag's own)",
    "past_deadline": "a run longer than its run_timeout plus slack",
    "budget_overruns": "more model requests than the run's cap",
    "count_mismatches": "llm_calls differs from the requests the model server received",
    "lost_indexes": "an index that no longer loads, or holds neither the old nor the new documents",
    "lost_turns": "a question lost, answered as another, or a turn number repeated",
    "stuck_threads": "a thread (on SQLite or PostgreSQL) that cannot take its next turn or approval afterwards",
    "stale_writes": "a write by a lease holder after its lease ran out, or a review record that disagrees with its "
    "thread",
    "forged_state": "a bound, counter or draft taken from what a client wrote",
    "trespasses": "a client reading, resuming or changing what is not its own, or a file opened on its word",
    "unbounded": "input larger than its cap accepted, or a process that ran out of memory on it",
    "leaked_keys": "the operator's key in any output, trace, log line, record or request to another endpoint",
    "instructions_obeyed": "a planted instruction's claim in an answer",
}


@dataclass
class Outcome:
    group: str
    case: str
    seconds: float = 0.0
    flags: dict[str, bool] = field(default_factory=dict)
    note: str = ""
    seen: list[str] = field(default_factory=list)  # every text the case produced: scanned for the key, then dropped
    # (stderr, strict) of commands that must not print a traceback (strict: nor any line but selfcrag's own)
    one_line: list[tuple[str, bool]] = field(default_factory=list)

    def failed(self) -> list[str]:
        return [name for name in COLUMNS if self.flags.get(name)]


@dataclass
class Case:
    group: str
    name: str
    run: Callable[[Outcome], None]
    fast: bool


CASES: list[Case] = []


def case(group: str, name: str, fast: bool = False) -> Callable[[Callable[[Outcome], None]], Callable[[Outcome], None]]:
    """Register `run(outcome)`: it exercises one door as a user would and sets the outcome's flags and note."""

    def register(run: Callable[[Outcome], None]) -> Callable[[Outcome], None]:
        CASES.append(Case(group, name, run, fast))
        return run

    return register


def cases(group: str, names: list[str], run: Callable[[Outcome, Any], None], values: list[Any],
          fast: set[int] | None = None) -> None:  # fmt: skip
    """Register one case per value: `run(outcome, value)`; `fast` holds the positions in the --fast subset."""
    for n, (name, value) in enumerate(zip(names, values, strict=True)):
        CASES.append(Case(group, name, lambda outcome, value=value: run(outcome, value), n in (fast or set())))


class _Seen(logging.Handler):
    """Every log record of a case, formatted with its traceback: the key must not be in any of them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter().format(record))


@contextmanager
def watching(outcome: Outcome) -> Iterator[None]:
    """Collect what the case's own process logs and prints on stderr, for the checks every case gets."""
    seen, root, stderr = _Seen(), logging.getLogger(), io.StringIO()
    level = root.level
    root.addHandler(seen)
    root.setLevel(logging.DEBUG)
    try:
        with redirect_stderr(stderr):
            yield
    finally:
        root.removeHandler(seen)
        root.setLevel(level)
        outcome.seen += [*seen.lines, stderr.getvalue()]


def run_case(entry: Case) -> Outcome:
    outcome = Outcome(entry.group, entry.name)
    started = time.monotonic()
    try:
        with watching(outcome):
            entry.run(outcome)
    except Exception as exc:  # noqa: BLE001 - a case that breaks is counted, and the matrix goes on
        outcome.flags["crashes"] = True
        outcome.note = f"the case itself failed: {type(exc).__name__}: {exc}"[:200]
        outcome.seen.append(traceback.format_exc())
    outcome.seconds = time.monotonic() - started
    text = "\n".join(outcome.seen)
    outcome.flags["leaked_keys"] = outcome.flags.get("leaked_keys", False) or OPERATOR_KEY in text
    for stderr, strict in outcome.one_line:
        outcome.flags["tracebacks"] = outcome.flags.get("tracebacks", False) or not ends_in_one_line(stderr, strict)
    outcome.seen = []
    return outcome


TRACEBACK_LINE = re.compile(r'^Traceback \(most recent call last\)|^\s+File "|^[\w.]+(Error|Exception)(: |$)')


def ends_in_one_line(stderr: str, strict: bool = False) -> bool:
    """A command's stderr without a traceback or an exception's own line. `strict`: only selfcrag's own lines
    (`selfcrag: ...`), nothing a library printed (pypdf's "EOF marker not found")."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if strict:
        return all(line.startswith("selfcrag: ") for line in lines)
    return not any(TRACEBACK_LINE.search(line) for line in lines)


def timed(call: Callable[[], Any]) -> tuple[Any, BaseException | None, float]:
    """(result, exception, seconds) of one call."""
    started = time.monotonic()
    try:
        return call(), None, time.monotonic() - started
    except Exception as exc:  # noqa: BLE001 - the cases judge the exception
        return None, exc, time.monotonic() - started


def described(result: Any, error: BaseException | None) -> str:
    if error is not None:
        return f"{type(error).__name__}: {error}"[:120]
    if isinstance(result, dict) and "decision" in result:
        return f"{result['decision']}: {str(result.get('answer', ''))[:70]!r}"
    return str(result)[:120]
