"""A call in flight is abandoned the moment the process is stopping (selfcrag/stopping.py, llm/calls.before), and
a retry's back-off ends with it; the real signals, on a real `selfcrag ask`: tests/integration/test_cli_signals.py."""

from __future__ import annotations

import threading
import time

import pytest

from selfcrag import stopping
from selfcrag.llm.calls import before


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "_stopping", threading.Event())  # the process goes on after each test
    monkeypatch.setattr(stopping, "_waits", set())


def test_a_hung_call_is_abandoned_when_the_process_stops() -> None:
    never = threading.Event()
    threading.Timer(0.2, stopping.stop).start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match="the process is stopping: a call abandoned"):
        before(time.monotonic() + 60, never.wait, "60 s")
    assert time.monotonic() - began < 5  # not the 60 s deadline
    never.set()


def test_after_the_stop_no_call_waits_and_no_back_off_sleeps() -> None:
    stopping.stop()
    with pytest.raises(KeyboardInterrupt):
        before(time.monotonic() + 60, lambda: time.sleep(0.5), "60 s")
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        stopping.pause(30)
    assert time.monotonic() - began < 1


def test_a_call_that_ends_is_not_affected() -> None:
    assert before(time.monotonic() + 5, lambda: 42, "5 s") == 42
    assert stopping._waits == set()
