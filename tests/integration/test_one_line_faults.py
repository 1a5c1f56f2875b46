"""Faults from outside the program end a command with one line and a non-zero exit, never a traceback, and lose
nothing that was saved: the next command works once the fault is gone. Each through the real part that fails — a
real PostgreSQL stopped in the middle of a run, a file-size limit the kernel enforces on the SQLite store's writes
(`RLIMIT_FSIZE`: the write fails as on a full disk), a damaged PDF read by the real pypdf."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer, Reply, Request
from support.postgres import postgres_server, start, stop
from support.replies import Plausible

CLI = [sys.executable, "-m", "selfcrag.cli"]
RETURNS = "How many days do I have to return an item?"
SHIPPING = "Do you ship to Antarctica?"
# The bytes any file may grow to: the store opens (its -shm file is 32 KB) but a turn's writes fail.
STORE_FILE_LIMIT = 65536


def cli(*args: str, env: dict[str, str], limit_files: bool = False) -> subprocess.CompletedProcess[str]:
    def small_files() -> None:  # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG, as disks do
        resource.setrlimit(resource.RLIMIT_FSIZE, (STORE_FILE_LIMIT, STORE_FILE_LIMIT))

    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **env},
                          preexec_fn=small_files if limit_files else None)  # fmt: skip


def assert_one_line_error(proc: subprocess.CompletedProcess[str], says: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == "", proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("selfcrag: error: ") and says in lines[-1], proc.stderr
    # Nothing else but the run record's own warning: not the database driver's reconnection chatter.
    assert all(line.startswith(("selfcrag: ", "run not recorded: ")) for line in lines), proc.stderr


@pytest.mark.system  # stops and starts a PostgreSQL server mid-run
def test_postgres_stopping_mid_run_is_one_line_and_the_thread_goes_on(tmp_path: Path) -> None:
    reached, go_on = threading.Event(), threading.Event()
    plausible = Plausible().responder()

    def hold_the_first_call(request: Request) -> Reply:
        if not reached.is_set():
            reached.set()
            go_on.wait(120)  # the test stops the database meanwhile
        return plausible(request)

    with postgres_server() as url, OpenAIServer(hold_the_first_call) as model:
        env = {"SELFCRAG_DATABASE_URL": url, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "sk-test"}
        ask = [*CLI, "ask", RETURNS, "--thread", "t-pg", "--model", "openai:fault-model"]
        run = subprocess.Popen(ask, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **env})  # fmt: skip
        assert reached.wait(180), "the run never reached the model"
        stop(url)  # mid-run: the turn's first steps are saved, the rest will not be
        go_on.set()
        out, err = run.communicate(timeout=300)
        assert_one_line_error(subprocess.CompletedProcess(ask, run.returncode, out, err), "database")
        start(url)
        again = cli("ask", SHIPPING, "--thread", "t-pg", "--model", "openai:fault-model", "--json", env=env)
    assert again.returncode == 0, again.stderr
    answered = json.loads(again.stdout)
    assert answered["thread_id"] == "t-pg" and answered["decision"] in ("answer", "abstain")
    assert answered["turn"] >= 1 and "Traceback" not in again.stderr


@pytest.mark.system  # stops a PostgreSQL server under an open pool
def test_a_pool_request_to_a_stopped_server_fails_at_once_and_one_to_a_busy_server_waits() -> None:
    # Each request of a run whose server stopped used to wait out the pool's whole timeout (the run above ended
    # 84 s after the stop). With a timeout of 120 s, a request that waited it out would fail the `match` below.
    from psycopg_pool import PoolTimeout

    from selfcrag.store.pg_pool import fail_fast_pool

    with postgres_server() as url:
        pool = fail_fast_pool(url, min_size=1, max_size=1, timeout=120, open=True)
        try:
            with pool.connection() as held:  # the only connection, lent out: the server is busy, not gone
                with pytest.raises(PoolTimeout) as busy:
                    pool.getconn(timeout=2.5)
                assert "unreachable" not in str(busy.value)  # it waited its timeout, as a busy pool should
                held.execute("SELECT 1")
            # A server that answers with an error of its own is there: no such database, as a full one would say
            # "too many clients". The request waits its timeout, as before.
            missing = fail_fast_pool(url.replace("/postgres?", "/no_such_database?"), min_size=1, max_size=1,
                                     timeout=2.5, open=False)  # fmt: skip
            missing.open(wait=False)
            try:
                with pytest.raises(PoolTimeout) as refused:
                    missing.getconn()
                assert "unreachable" not in str(refused.value)
            finally:
                missing.close()
            stop(url)
            with pytest.raises(PoolTimeout, match="the database server is unreachable"):
                for _ in range(2):  # the first may be handed the pool's connection, which the stop cut
                    try:
                        with pool.connection() as conn:
                            conn.execute("SELECT 1")
                    except PoolTimeout:
                        raise
                    except Exception:  # noqa: BLE001 - the cut connection's own error
                        continue
            start(url)
        finally:
            pool.close()


def test_a_full_disk_during_a_store_write_is_one_line_and_the_thread_goes_on(tmp_path: Path) -> None:
    env = {"SELFCRAG_DATABASE_URL": f"sqlite:///{tmp_path / 'store.db'}"}
    first = cli("ask", RETURNS, "--thread", "t-disk", "--json", env=env)
    assert first.returncode == 0, first.stderr
    full = cli("ask", "Can I return a gift card?", "--thread", "t-disk", env=env, limit_files=True)
    assert_one_line_error(full, "database")
    assert all(len(line) < 400 for line in full.stderr.splitlines())
    again = cli("ask", SHIPPING, "--thread", "t-disk", "--json", env=env)
    assert again.returncode == 0, again.stderr
    answered = json.loads(again.stdout)
    assert "antarctica" in answered["answer"].lower() or answered["decision"] == "answer"
    # The turn saved before the fault is still the thread's: its question and answer lead the history.
    assert json.loads(first.stdout)["turn"] == 1 and answered["turn"] >= 2
    integrity = subprocess.run([sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
                                ".execute('PRAGMA integrity_check').fetchone()[0])", str(tmp_path / "store.db")],
                               capture_output=True, text=True, timeout=60)  # fmt: skip
    assert integrity.stdout.strip() == "ok"


def test_a_damaged_pdf_is_one_skip_line_without_pypdf_chatter(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(200, 200)
    whole = tmp_path / "whole.pdf"
    writer.write(whole)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "returns.md").write_text("# Returns\n\nItems can be returned within 30 days.\n")
    (folder / "cut.pdf").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])  # no %%EOF, no xref
    proc = cli("ingest", str(folder), "--index", str(tmp_path / "index"), env={})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert all(line.startswith("selfcrag: ") for line in lines), lines  # nothing of pypdf's own ("EOF marker ...")
    assert sum("cut.pdf" in line for line in lines) == 1
    strict = cli("ingest", str(folder), "--index", str(tmp_path / "strict"), "--strict", env={})
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    assert [line for line in strict.stderr.strip().splitlines() if not line.startswith("selfcrag: ")] == []
