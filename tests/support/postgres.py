"""A real PostgreSQL server for tests: Debian's postgresql-15 binaries, a throwaway cluster in a temporary directory
on a free port (socket in that directory too), run as the `postgres` user when the tests run as root (initdb refuses
root), and always stopped (`pg_ctl stop -m immediate`) and removed, whatever the tests do."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.langgraph_server import free_port

BIN = Path(os.environ.get("SELFCRAG_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def postgres_server() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database, for as long as the context lasts."""
    if not (BIN / "initdb").exists():
        pytest.fail(f"PostgreSQL not found in {BIN}: .ci/run installs postgresql-15 (apt-get install postgresql-15)")
    root = Path(tempfile.mkdtemp(prefix="selfcrag-pg-"))
    data, port = root / "data", free_port()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    run = {"check": True, "capture_output": True, "text": True, "timeout": 120}
    started = False
    try:
        subprocess.run(_as_owner([str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                  "--no-sync", "-E", "UTF8"]), **run)  # fmt: skip
        # No TCP at all (the socket lives in the temp dir); no fsync: the cluster is thrown away.
        options = f"-p {port} -c listen_addresses='' -c unix_socket_directories={root} -c fsync=off"
        subprocess.run(_as_owner([str(BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"),
                                  "-w", "-t", "60", "start"]), **run)  # fmt: skip
        started = True
        yield f"postgresql://postgres@/postgres?host={root}&port={port}"
    except subprocess.CalledProcessError as exc:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        pytest.fail(f"PostgreSQL did not start: {exc.stderr or exc.stdout}\n{log[-2000:]}")
    finally:
        if started:
            subprocess.run(_as_owner([str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                           capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def _pg_ctl(root: Path, port: int, action: str) -> None:
    """`pg_ctl stop|start` on a cluster from `postgres_server`, with the options it was first started with."""
    options = f"-p {port} -c listen_addresses='' -c unix_socket_directories={root} -c fsync=off"
    subprocess.run(_as_owner([str(BIN / "pg_ctl"), "-D", str(root / "data"), "-o", options, "-m", "immediate",
                              "-l", str(root / "log"), "-w", "-t", "60", action]),
                   check=True, capture_output=True, text=True, timeout=120)  # fmt: skip


def _cluster(url: str) -> tuple[Path, int]:
    """The cluster directory and port of a URL from `postgres_server`."""
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(url).query)
    return Path(query["host"][0]), int(query["port"][0])


def stop(url: str) -> None:
    """Stop the server of `url` as a crash or an operator would (`-m immediate`: connections cut at once)."""
    _pg_ctl(*_cluster(url), "stop")


def start(url: str) -> None:
    """Start the server of `url` again on its data, socket and port."""
    _pg_ctl(*_cluster(url), "start")
