"""The real `selfcrag` command with one point of it made to wait, for tests that stop (SIGSTOP) a process there:

    python -m support.pausing POINT MARKER GO_ON selfcrag-arguments...

runs `selfcrag.cli.main(arguments)` in this process with POINT made to write its process id to the file MARKER and
then wait until the file GO_ON exists, and go on. POINT is `decision` (the `human_review` node, before any write of
the reviewer's decision) or `record` (`reviews.set_status`, after the thread's write and before the record's).
Everything else is the shipped code.

`stop_outside_writes` stops such a process (SIGSTOP) at a moment it holds no SQLite write: its lease renewer writes
every third of a lease, and a process stopped inside a write keeps the database locked, so the next reviewer fails
on the lock (after db.BUSY_SECONDS) instead of taking the expired lease: a different case from the one these tests
and the fault matrix's `fencing` group stage (seen under CPU load, when writes are slow)."""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

POINTS = ("decision", "record")


def pausing(run: Callable[..., Any], marker: Path, go_on: Path) -> Callable[..., Any]:
    @functools.wraps(run)  # the same signature: the graph passes the runtime as it would
    def paused(*args: Any, **kwargs: Any) -> Any:
        marker.write_text(str(os.getpid()))
        while not go_on.exists():
            time.sleep(0.02)
        return run(*args, **kwargs)

    return paused


def stop_outside_writes(process: subprocess.Popen[str], tries: int = 100) -> None:
    """SIGSTOP `process` while it holds no write on the SQLite store (SELFCRAG_DATABASE_URL); PostgreSQL needs no
    care (a take ends the stalled holder's open transaction: store/leases.py)."""
    from selfcrag.home import sqlite_path
    from selfcrag.store.db import database

    db = database()
    for _ in range(tries):
        process.send_signal(signal.SIGSTOP)
        if db.postgres or not _write_locked(sqlite_path(db.url)):
            return
        process.send_signal(signal.SIGCONT)  # stopped inside a write: let it finish, then try again
        time.sleep(0.05)
    raise RuntimeError(f"process {process.pid} was inside a write on each of {tries} stops")


def _write_locked(path: Path) -> bool:
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")  # WAL: fails at once while another connection writes
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        return True
    finally:
        conn.close()


def pause_at(point: str, marker: Path, go_on: Path) -> None:
    if point == "decision":
        module = importlib.import_module("selfcrag.nodes.human_review")
        make = module.make
        module.make = lambda components: pausing(make(components), marker, go_on)
        graph_module = importlib.import_module("selfcrag.graph")
        graph_module.graph = graph_module.build_graph()  # a review resumes on the module's graph
    elif point == "record":
        from selfcrag.store import reviews

        reviews.set_status = pausing(reviews.set_status, marker, go_on)
    else:
        raise SystemExit(f"point must be one of {', '.join(POINTS)}, got {point!r}")


if __name__ == "__main__":
    point, marker, go_on, *arguments = sys.argv[1:]
    pause_at(point, Path(marker), Path(go_on))
    from selfcrag.cli import main

    sys.exit(main(arguments))
