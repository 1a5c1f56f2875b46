"""Ctrl-C and SIGTERM end a real `selfcrag ask` within 2 s, at start-up and while a model call hangs, with one line,
exit 128 + the signal's number (130, 143) and the thread's lease freed: the call in flight is abandoned
(selfcrag/stopping.py, llm/calls.py), not waited for until its deadline. The model is the local OpenAI-compatible
test server, scripted never to answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer, Reply

from selfcrag.store import leases

pytestmark = pytest.mark.system  # signals to running CLI processes, and a model call that hangs

CLI = [sys.executable, "-m", "selfcrag.cli"]
QUESTION = "How many days do I have to return an item?"
WITHIN = 2.0  # seconds from the signal to the process's end


def handles_sigterm(pid: int) -> bool:
    """Whether the process has set its own SIGTERM handler (Python alone catches only SIGINT): main() has begun."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def eventually(check: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g}s")
        time.sleep(0.02)


def stopped(proc: subprocess.Popen[str], signum: int) -> tuple[float, str]:
    """Send `signum`; the seconds until the process ended, and its stderr."""
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"selfcrag still ran 30 s after signal {signum}: {proc.communicate()[1][-2000:]}")
    return time.monotonic() - sent, err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("SELFCRAG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SELFCRAG_DATABASE_URL", raising=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TAVILY_"))}
    return env | {"SELFCRAG_HOME": str(tmp_path / "home"), "SELFCRAG_TURN_LEASE": "60"}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_at_start_up_ends_the_command_in_one_line(home: dict[str, str], signum: int) -> None:
    proc = subprocess.Popen([*CLI, "ask", QUESTION], env=home, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    eventually(lambda: proc.poll() is not None or handles_sigterm(proc.pid), "selfcrag's main() starting")
    took, err = stopped(proc, signum)  # while it imports the graph and loads the index
    name = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}[signum]
    assert proc.returncode == 128 + signum, err
    assert err == f"selfcrag: stopped by {name}\n" and took <= WITHIN, (took, err)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_model_call_that_hangs_abandons_it_and_frees_the_lease(
    home: dict[str, str], signum: int
) -> None:
    thread = f"hung-{signum}"
    with OpenAIServer(lambda request: Reply.never()) as server:
        env = home | {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test", "SELFCRAG_LLM_TIMEOUT": "120"}
        # A thread of its own the first time (no lease taken: nobody else knows it), so ask twice: the second turn
        # holds the lease while its model call hangs.
        first = subprocess.run([*CLI, "ask", QUESTION, "--thread", thread], env=env | {"OPENAI_BASE_URL": ""},
                               capture_output=True, text=True, timeout=300)  # fmt: skip
        assert first.returncode == 0, first.stderr
        proc = subprocess.Popen([*CLI, "ask", QUESTION, "--thread", thread, "--model", "openai:test-model"], env=env,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        eventually(lambda: proc.poll() is not None or bool(server.requests), "the model call starting")
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert leases.current(thread) is not None  # the turn holds the thread
        took, err = stopped(proc, signum)
    name = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}[signum]
    assert proc.returncode == 128 + signum, err
    assert err.splitlines()[-1] == f"selfcrag: stopped by {name}" and "Traceback" not in err, err
    assert took <= WITHIN, (took, err)
    assert leases.current(thread) is None  # freed on the way out, not left to run out
