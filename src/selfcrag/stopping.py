"""The process is stopping (Ctrl-C, SIGTERM: the CLI says so here): every wait on a model call or a web search
watches this, so a call in flight is abandoned at once rather than at its deadline, and the run unwinds (freeing
its thread's lease) within a moment of the signal. A wait that gives up raises KeyboardInterrupt, whatever the
signal: no `except Exception` that turns a model's fault into a degraded answer catches it.

Only the command line stops a process this way; a server's runs end by LangGraph's own cancellation.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_stopping = threading.Event()
_waits: set[threading.Event] = set()  # the events calls in flight are waiting on
_lock = threading.Lock()


def stop() -> None:
    """The process is stopping: wake every wait, and make every later one give up at once."""
    with _lock:
        _stopping.set()
        for done in _waits:
            done.set()


def stopping() -> bool:
    return _stopping.is_set()


@contextmanager
def watched(done: threading.Event) -> Iterator[None]:
    """While the block waits on `done`, `stop()` sets it too; the block then checks `stopping()`."""
    with _lock:
        _waits.add(done)
        if _stopping.is_set():
            done.set()
    try:
        yield
    finally:
        with _lock:
            _waits.discard(done)


def pause(seconds: float) -> None:
    """`time.sleep(seconds)` that ends at once, raising KeyboardInterrupt, when the process is stopping."""
    if _stopping.wait(max(0.0, seconds)):
        raise KeyboardInterrupt("the process is stopping")
