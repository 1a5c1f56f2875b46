"""The first commands on a database nobody used yet, started at once: each sets up the store's tables (LangGraph's
checkpointer migration among them) and answers, on SQLite and a real PostgreSQL. On PostgreSQL a process that
waited in `pg_advisory_lock` for the migration was itself a transaction the migration's CREATE INDEX CONCURRENTLY
waited for: every command hung for good."""

from __future__ import annotations

import os
import subprocess
import sys

CLI = [sys.executable, "-m", "selfcrag.cli"]


def test_five_first_commands_at_once_on_a_fresh_store_all_answer(store_url):
    commands = [subprocess.Popen([*CLI, "ask", "How many days do I have to return an item?", "--thread", f"t{i}"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
                for i in range(5)]  # fmt: skip
    try:
        outputs = [p.communicate(timeout=300) for p in commands]  # a hung setup ends the test here, failed
    finally:
        for p in commands:
            p.kill()
    assert [p.returncode for p in commands] == [0] * 5, [err[-500:] for _, err in outputs]
    assert all("Thread: t" in out for out, _ in outputs)
