"""The store under test, on SQLite and on a real PostgreSQL: `store_url` is a fresh, empty database of either kind
(set as SELFCRAG_DATABASE_URL for this process and the subprocesses it starts). tests/conftest.py loads these
fixtures as a plugin."""

from __future__ import annotations

import uuid

import pytest

from selfcrag.store.db import close_all
from support.postgres import postgres_server


@pytest.fixture(scope="session")
def postgres_url():
    with postgres_server() as url:
        try:
            yield url
        finally:
            close_all()  # pools first: the server is stopped right after


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path, monkeypatch):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        import psycopg

        server, name = request.getfixturevalue("postgres_url"), f"t{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = server.replace("/postgres?", f"/{name}?")
    monkeypatch.setenv("SELFCRAG_DATABASE_URL", url)
    yield url
    close_all()
