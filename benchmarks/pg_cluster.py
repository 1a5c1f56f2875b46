"""A kept PostgreSQL + pgvector cluster for pg_retrieval_scale.py, so a 1M-chunk knowledge base loads once and is
measured many times (its COPY load alone takes ~20 minutes).

    .venv/bin/python benchmarks/pg_cluster.py start /work/pgdata-1m    # initdb on first use; prints the server URL
    .venv/bin/python benchmarks/pg_cluster.py stop /work/pgdata-1m
    .venv/bin/python benchmarks/pg_cluster.py url /work/pgdata-1m

The wheel's PostgreSQL 16 (tests/support/postgres.py's pgvector_bin), run as the `postgres` user when run as root,
the socket in the directory, no TCP. Started with the settings in OPERATOR: what an operator gives a database
serving a knowledge base of a million chunks on a machine like this one (24 GB RAM), see docs/documents.md.
Then `pg_retrieval_scale.py --url URL --sizes 1000000` reuses a database that already holds the chunks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.postgres import _as_owner, pgvector_bin  # noqa: E402

PORT = 55_432
# shared_buffers holds the HNSW graph, the vectors and the postings' hot part (~3 GB at 1M chunks);
# effective_cache_size tells the planner the OS cache holds the rest. fsync off: a benchmark's cluster, reloadable.
OPERATOR = {"shared_buffers": "4GB", "effective_cache_size": "12GB", "fsync": "off"}


def url(root: Path) -> str:
    return f"postgresql://postgres@/postgres?host={root}&port={PORT}"


def start(root: Path) -> None:
    binaries = pgvector_bin()
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    run = {"check": True, "text": True, "timeout": 600}
    if not (root / "data").exists():
        subprocess.run(_as_owner([str(binaries / "initdb"), "-D", str(root / "data"), "-U", "postgres",
                                  "--auth=trust", "-E", "UTF8"]), **run)  # fmt: skip
    settings = " ".join(f"-c {k}={v}" for k, v in OPERATOR.items())
    options = f"-p {PORT} -c listen_addresses='' -c unix_socket_directories={root} {settings}"
    subprocess.run(_as_owner([str(binaries / "pg_ctl"), "-D", str(root / "data"), "-o", options,
                              "-l", str(root / "log"), "-w", "-t", "300", "start"]), **run)  # fmt: skip


def stop(root: Path) -> None:
    subprocess.run(_as_owner([str(pgvector_bin() / "pg_ctl"), "-D", str(root / "data"), "-m", "fast", "-w",
                              "-t", "300", "stop"]), check=True, timeout=600)  # fmt: skip


def main() -> int:
    cli = argparse.ArgumentParser(description="Start, stop or name a kept PostgreSQL + pgvector benchmark cluster.")
    cli.add_argument("action", choices=("start", "stop", "url"))
    cli.add_argument("root", type=Path, help="the cluster's directory (its data/ and socket live there)")
    args = cli.parse_args()
    action, root = args.action, args.root.resolve()
    if action == "start":
        start(root)
    elif action == "stop":
        stop(root)
        return 0
    print(url(root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
