"""A real `langgraph dev` server (in-memory runtime) for tests: started on a free port in its own process group,
with the environment a test gives it, and always stopped (group and all) whatever the test does."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")  # from the dev extra, next to this interpreter


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(process: subprocess.Popen) -> None:
    """Stop a server started with `start_new_session=True`, group and all: SIGTERM, then SIGKILL after 15 s."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_until_ready(url: str, process: subprocess.Popen, log: Path, timeout: float = 90, *, path: str = "/ok",
                     name: str = "langgraph dev") -> None:
    """Ready when `url + path` answers 200; a server process that exits first fails the test with its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{name} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    pytest.fail(f"{name} was not ready after {timeout}s:\n{log.read_text()[-3000:]}")


@contextmanager
def langgraph_dev(env: dict[str, str] | None = None, *, host: str = "127.0.0.1",
                  log: Path | None = None) -> Iterator[str]:
    """The server's URL (on 127.0.0.1 whatever `host` it binds). Offline, whatever the developer's shell holds, plus
    `env`; as it comes, on loopback, every request is the operator `developer` (selfcrag/auth.py), and
    SELFCRAG_AUTH_FILE turns identities on. The test session's index cache is inherited; the server's output goes
    to `log` (a temporary file when None)."""
    with langgraph_dev_process(env, host=host, log=log) as (url, _session):
        yield url


@contextmanager
def langgraph_dev_process(env: dict[str, str] | None = None, extra: list[str] | None = None, *,
                          host: str = "127.0.0.1", log: Path | None = None) -> Iterator[tuple[str, int]]:
    """`langgraph_dev` with `extra` command-line arguments, yielding its URL and its session id (the server's
    process group, whose CPU a benchmark reads)."""
    if not LANGGRAPH.exists():
        pytest.fail(f"{LANGGRAPH} not found: install the dev extra (pip install -e '.[dev]')")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = log or Path(tempfile.mkdtemp(prefix="selfcrag-server-")) / "langgraph-dev.log"
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("TAVILY_", "OPENAI_")) and k != "SELFCRAG_AUTH_FILE"}  # fmt: skip
    environment |= {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "1", **(env or {})}
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", host, "--port", str(port),
               *(extra or [])]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    try:
        wait_until_ready(url, process, log)
        yield url, process.pid
    finally:
        stop_group(process)
