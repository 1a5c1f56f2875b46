"""The schema of a PostgreSQL knowledge base (pg_index.py searches it, pg_ingest.py writes it): its tables, created by
the first ingest and migrated under an advisory lock, with the version, embedder, tokenizer and dimension recorded;
connections outside the pool; and the one-line errors of a database that cannot be used (changed: out of
pg_index.py, which outgrew a module).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from selfcrag.contract import Embedder
from selfcrag.errors import IngestError
from selfcrag.home import describe
from selfcrag.knowledge.pg_keywords import IMPACT_INDEX
from selfcrag.knowledge.retrieval import embedder_label
from selfcrag.text.text import TOKENIZER

if TYPE_CHECKING:
    from selfcrag.context import Context

SCHEMA_VERSION = 4
SCHEMA_LOCK, WRITE_LOCK = 7261025, 7261026  # advisory lock keys: schema changes; ingest batches, one at a time
CONNECT_SECONDS = 5  # a database that is down fails a run after this, not after the pool's default 30 s


def hnsw_index(settings: Context) -> str:
    """The HNSW index with the operator's m and ef_construction (pgvector requires ef_construction >= 2 m). Built
    with the table, or after a first bulk load (pg_ingest.py), and again by any ingest that finds it missing (a
    bulk load killed before it was rebuilt)."""
    m = settings.pg_hnsw_m
    return f"""CREATE INDEX IF NOT EXISTS selfcrag_kb_chunks_hnsw ON selfcrag_kb_chunks USING hnsw
        (embedding vector_ip_ops) WITH (m = {m}, ef_construction = {max(settings.pg_hnsw_ef_construction, 2 * m)})"""


# A chunk's metadata as JSONB, derived from the stored text so that every writer keeps it right, with a GIN index:
# a metadata filter (metadata_filter.py) is a containment test in the WHERE clause of the search itself.
FILTERABLE = ["""ALTER TABLE selfcrag_kb_chunks ADD COLUMN IF NOT EXISTS meta JSONB GENERATED ALWAYS AS
                 (CASE WHEN metadata = '' THEN '{}'::jsonb ELSE metadata::jsonb END) STORED""",
              "CREATE INDEX IF NOT EXISTS selfcrag_kb_chunks_meta ON selfcrag_kb_chunks "
              "USING gin (meta jsonb_path_ops)"]


def schema(dim: int, settings: Context) -> list[str]:
    """The tables as of SCHEMA_VERSION. The vector columns need the dimension, so they are made by the first
    ingest."""
    return [
        "CREATE EXTENSION IF NOT EXISTS vector",
        "CREATE TABLE IF NOT EXISTS selfcrag_kb_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS selfcrag_kb_documents (doc_id TEXT PRIMARY KEY, hash TEXT NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS selfcrag_kb_chunks (
            row BIGSERIAL PRIMARY KEY,
            doc_id TEXT NOT NULL REFERENCES selfcrag_kb_documents ON DELETE CASCADE,
            chunk_index INTEGER NOT NULL, title TEXT NOT NULL, source TEXT NOT NULL, text TEXT NOT NULL,
            search_key BYTEA NOT NULL, length INTEGER NOT NULL, embedding vector({dim}) NOT NULL,
            metadata TEXT NOT NULL DEFAULT '', UNIQUE (doc_id, chunk_index))""",
        "CREATE INDEX IF NOT EXISTS selfcrag_kb_chunks_key ON selfcrag_kb_chunks (search_key)",
        hnsw_index(settings),
        # The chunk's length is kept with each posting, so BM25's length normalisation needs no join.
        """CREATE TABLE IF NOT EXISTS selfcrag_kb_postings (
            term TEXT NOT NULL, chunk BIGINT NOT NULL REFERENCES selfcrag_kb_chunks ON DELETE CASCADE,
            tf INTEGER NOT NULL, length INTEGER NOT NULL, PRIMARY KEY (term, chunk) INCLUDE (tf, length))""",
        "CREATE INDEX IF NOT EXISTS selfcrag_kb_postings_chunk ON selfcrag_kb_postings (chunk)",
        IMPACT_INDEX,
        "CREATE TABLE IF NOT EXISTS selfcrag_kb_terms (term TEXT PRIMARY KEY, df BIGINT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS selfcrag_kb_stats (
            one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), chunks BIGINT NOT NULL, tokens BIGINT NOT NULL)""",
        "INSERT INTO selfcrag_kb_stats (chunks, tokens) VALUES (0, 0) ON CONFLICT DO NOTHING",
        f"""CREATE TABLE IF NOT EXISTS selfcrag_kb_text_vectors (
            key BYTEA PRIMARY KEY, doc_id TEXT NOT NULL, embedding vector({dim}) NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS selfcrag_kb_text_vectors_doc ON selfcrag_kb_text_vectors (doc_id)",
        *FILTERABLE,
    ]


# Statements that take a knowledge base of version N to N + 1 (MIGRATIONS[N - 1]).
MIGRATIONS: list[list[str]] = [
    # 2: a document's metadata as added through the VectorStore face (documents.SourceDocument.metadata)
    ["ALTER TABLE selfcrag_kb_chunks ADD COLUMN IF NOT EXISTS metadata TEXT NOT NULL DEFAULT ''"],
    # 3: postings by density, for pg_keywords.top
    [IMPACT_INDEX],
    # 4: metadata filters
    FILTERABLE,
]


def unreachable(url: str, exc: BaseException) -> IngestError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return IngestError(f"the knowledge base at {describe(url)} cannot be used: {first}")


def needs_extra() -> IngestError:
    return IngestError("a PostgreSQL knowledge base needs the postgres extra: pip install 'selfcrag[postgres]'")


def connect(url: str) -> Any:
    """One connection outside the pool (schema creation, ingest), with pgvector's types when the extension is in."""
    try:
        import pgvector.psycopg  # noqa: F401 - every caller then registers its types
        import psycopg
    except ImportError:
        raise needs_extra() from None
    try:
        return psycopg.connect(url, connect_timeout=CONNECT_SECONDS, autocommit=True)
    except psycopg.Error as exc:
        raise unreachable(url, exc) from None


def ensure_schema(conn: Any, url: str, embedder: Embedder, dim: int, settings: Context) -> None:
    """Create (or migrate) the tables under an advisory lock, recording version, embedder, tokenizer and dimension;
    a knowledge base built with other embeddings, another tokenizer or by a newer selfcrag is refused."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        exists = conn.execute("SELECT to_regclass('selfcrag_kb_meta') IS NOT NULL").fetchone()[0]
        if not exists:
            for statement in schema(dim, settings):
                conn.execute(statement)
            wanted = {"version": str(SCHEMA_VERSION), "embedder": embedder_label(embedder), "tokenizer": TOKENIZER,
                      "dim": str(dim)}
            conn.cursor().executemany("INSERT INTO selfcrag_kb_meta VALUES (%s, %s)", list(wanted.items()))
        meta = check_meta(conn, url, embedder)
        conn.execute(hnsw_index(settings))
        _migrate(conn, int(meta["version"]))
    if int(meta["dim"]) != dim:
        raise IngestError(f"the knowledge base at {describe(url)} holds {meta['dim']}-dimensional vectors but the "
                          f"embeddings give {dim}-dimensional ones; use the embeddings that built it")


def _migrate(conn: Any, version: int) -> None:
    """Take the schema from `version` to SCHEMA_VERSION (in the caller's transaction, under SCHEMA_LOCK)."""
    for step in range(version, SCHEMA_VERSION):
        for statement in MIGRATIONS[step - 1]:
            conn.execute(statement)
        conn.execute("UPDATE selfcrag_kb_meta SET value = %s WHERE name = 'version'", (str(step + 1),))


@contextmanager
def connected(url: str) -> Iterator[Any]:
    """One connection outside the pool for the block, closed after it; a database error in the block ends as the
    one-line IngestError of `unreachable` (an IngestError raised in the block passes as it is)."""
    conn = connect(url)
    try:
        yield conn
    except IngestError:
        raise
    except Exception as exc:
        raise unreachable(url, exc) from None
    finally:
        conn.close()


def upgrade(url: str) -> None:
    """Migrate the knowledge base at `url` to SCHEMA_VERSION now, not at its next ingest: the VectorStore face
    (langchain_store.py) reads what a newer version added. Searching never needs it (nothing else changed)."""
    with connected(url) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        version = conn.execute("SELECT value FROM selfcrag_kb_meta WHERE name = 'version'").fetchone()[0]
        _migrate(conn, int(version))


def check_meta(conn: Any, url: str, embedder: Embedder) -> dict[str, str]:
    meta = {name: value for name, value in conn.execute("SELECT name, value FROM selfcrag_kb_meta").fetchall()}
    where = describe(url)
    if int(meta["version"]) > SCHEMA_VERSION:
        raise IngestError(f"the knowledge base at {where} has schema version {meta['version']}; this selfcrag reads "
                          f"up to {SCHEMA_VERSION}: upgrade selfcrag")
    for what, built, current in (("embedder", meta["embedder"], embedder_label(embedder)),
                                 ("keyword tokenizer", meta["tokenizer"], TOKENIZER)):
        if built != current:
            raise IngestError(f"the knowledge base at {where} was built with {what} {built!r} but the current "
                              f"{what} is {current!r}; use the one that built it, or another database")
    return meta


def has_knowledge_base(url: str) -> bool:
    """Whether the database at `url` holds a knowledge base (an ingest created its tables)."""
    with connected(url) as conn:
        return bool(conn.execute("SELECT to_regclass('selfcrag_kb_meta') IS NOT NULL").fetchone()[0])
