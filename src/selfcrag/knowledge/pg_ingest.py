"""Ingest into a PostgreSQL knowledge base (pg_index.py): `selfcrag.ingest(sources, "postgresql://...")`.

Documents are planned as for a directory (ingestion.py): a new id is added, a known id with new content replaced,
the same id and content left alone with its vectors; texts the knowledge base already holds a vector for are not
embedded again. Each batch of documents is written in one transaction (its old chunks, postings, document
frequencies and text vectors out, the new ones in), so a kill -9 at any point leaves every document old or new,
never half, and readers (one snapshot per retrieval) never see a half-replaced one. Without `append`, the
documents the sources do not name are removed at the end, in one more transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from selfcrag.context import Context
from selfcrag.contract import Embedder
from selfcrag.knowledge.clashes import settle
from selfcrag.knowledge.documents import Chunk, SourceDocument, chunk_documents
from selfcrag.knowledge.pg_index import PgIndex
from selfcrag.knowledge.pg_schema import WRITE_LOCK, connect, ensure_schema, hnsw_index, unreachable
from selfcrag.knowledge.retrieval import index_text
from selfcrag.knowledge.reuse import Reusing, content_hash
from selfcrag.knowledge.vector_store import embed_index, evidence_texts
from selfcrag.knowledge.vector_store import key as text_key
from selfcrag.text.text import keyword_tokens

BATCH_CHUNKS = 1024  # chunks embedded and written per transaction (whole documents: a batch may hold more)
# A first ingest of at least this many chunks into an empty knowledge base builds the HNSW index after the load:
# inserting into it chunk by chunk was three quarters of the server's ingest CPU (6.3 of 8.1 s for 3,000 chunks).
BULK_FROM = 5000


def ingest_documents(url: str, docs: list[SourceDocument], embedder: Embedder, report: Any, *, append: bool,
                     replace: bool = False, remove: list[str] | None = None,
                     on_progress: Callable[[int, int], None] | None = None) -> None:
    """Write `docs` into the knowledge base at `url` and fill `report` (an ingestion.IngestReport); the documents
    `remove` names (and `docs` does not) are taken out first, in one transaction; ids held by another source are
    settled as `replace` says (clashes.py)."""
    import psycopg

    dim = len(embedder.embed_query("dimensions"))
    settings = Context.from_env()  # the operator's HNSW parameters, for an index this ingest builds
    conn = connect(url)
    try:
        existed = bool(conn.execute("SELECT to_regclass('selfcrag_kb_meta') IS NOT NULL").fetchone()[0])
        ensure_schema(conn, url, embedder, dim, settings)
        from pgvector.psycopg import register_vector

        register_vector(conn)
        index = PgIndex(url, embedder)
        if append:  # the sources of the ids these documents hold or would take (clashes.py)
            wanted = [d.doc_id for d in docs] + [f"{d.folder}/{d.doc_id}" for d in docs if d.folder]
            held = dict(conn.execute("SELECT DISTINCT ON (doc_id) doc_id, source FROM selfcrag_kb_chunks "
                                     "WHERE doc_id = ANY(%s) ORDER BY doc_id, chunk_index", (wanted,)).fetchall())
            docs, report.clashes = settle(docs, held, replace=replace)
        hashes = {doc.doc_id: content_hash(doc) for doc in docs}
        if remove:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                gone = [d for (d,) in conn.execute("SELECT doc_id FROM selfcrag_kb_documents WHERE doc_id = ANY(%s)",
                                                   ([d for d in remove if d not in hashes],)).fetchall()]
                _remove(conn, gone)
            report.removed = len(gone)
        known = dict(conn.execute("SELECT doc_id, hash FROM selfcrag_kb_documents WHERE doc_id = ANY(%s)",
                                  (list(hashes),)).fetchall())
        todo = [doc for doc in docs if known.get(doc.doc_id) != hashes[doc.doc_id]]
        report.added = sum(doc.doc_id not in known for doc in todo)
        report.replaced = len(todo) - report.added
        report.replaced_ids = [doc.doc_id for doc in todo if doc.doc_id in known]
        report.unchanged = len(docs) - len(todo)
        report.replaced_index = existed and not append
        chunks = chunk_documents(todo)
        reusing = Reusing(embedder, index)  # type: ignore[arg-type]  # it asks only for stored_vectors
        empty = not conn.execute("SELECT EXISTS (SELECT 1 FROM selfcrag_kb_chunks)").fetchone()[0]
        if empty and len(chunks) >= BULK_FROM:  # until it is built, searches are exact (and right)
            conn.execute("DROP INDEX IF EXISTS selfcrag_kb_chunks_hnsw")
        done = 0
        for batch_docs, batch in _batches(todo, chunks):
            texts = [index_text(c) for c in batch]

            def progress(step: int, total: int, start: int = done, size: int = len(batch)) -> None:
                if on_progress:
                    on_progress(start + step * size // max(total, 1), len(chunks))

            vectors, store = embed_index(reusing, texts, [c.text for c in batch], progress)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # unit, as faiss would
            owners = _owners(batch, texts)
            stored = [] if store is None else [(bytes(store.keys[i]), owners.get(bytes(store.keys[i]), ""),
                                                store.vectors[i]) for i in range(len(store.keys))]
            _write(conn, [(d.doc_id, hashes[d.doc_id]) for d in batch_docs], batch, texts, vectors, stored)
            done += len(batch)
        conn.execute(hnsw_index(settings))  # after a bulk load: built once, over every vector
        if not append:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                gone = [d for (d,) in conn.execute("SELECT doc_id FROM selfcrag_kb_documents "
                                                   "WHERE NOT (doc_id = ANY(%s))", (list(hashes),)).fetchall()]
                _remove(conn, gone)
        report.chunks = int(conn.execute("SELECT chunks FROM selfcrag_kb_stats").fetchone()[0])
        report.kept = int(conn.execute("SELECT count(*) FROM selfcrag_kb_documents").fetchone()[0]) - len(docs)
        report.embedded, report.reused = reusing.embedded, reusing.reused
    except psycopg.Error as exc:
        raise unreachable(url, exc) from None
    finally:
        conn.close()


def _batches(docs: list[SourceDocument], chunks: list[Chunk]) -> list[tuple[list[SourceDocument], list[Chunk]]]:
    """Whole documents, about BATCH_CHUNKS chunks a batch (a document with no text still gets its row)."""
    by_doc: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    out: list[tuple[list[SourceDocument], list[Chunk]]] = [([], [])]
    for doc in docs:
        if len(out[-1][1]) >= BATCH_CHUNKS:
            out.append(([], []))
        out[-1][0].append(doc)
        out[-1][1].extend(by_doc.get(doc.doc_id, []))
    return [b for b in out if b[0]]


def _owners(chunks: list[Chunk], texts: list[str]) -> dict[bytes, str]:
    """The document each stored text belongs to (the first that holds it): replacing it removes its vectors."""
    owners: dict[bytes, str] = {}
    for chunk, text in zip(chunks, texts, strict=True):
        for part in [text, *evidence_texts([chunk.text])]:
            owners.setdefault(text_key(part), chunk.doc_id)
    return owners


def _remove(conn: Any, doc_ids: list[str]) -> None:
    """Take documents out, with their postings' share of the document frequencies and corpus totals."""
    if not doc_ids:
        return
    conn.execute("""UPDATE selfcrag_kb_terms t SET df = t.df - d.n FROM (
                        SELECT p.term, count(*) AS n FROM selfcrag_kb_postings p JOIN selfcrag_kb_chunks c
                        ON c.row = p.chunk WHERE c.doc_id = ANY(%s) GROUP BY p.term) d
                    WHERE t.term = d.term""", (doc_ids,))
    conn.execute("""UPDATE selfcrag_kb_stats SET chunks = chunks - d.n, tokens = tokens - d.len FROM (
                        SELECT count(*) AS n, coalesce(sum(length), 0) AS len FROM selfcrag_kb_chunks
                        WHERE doc_id = ANY(%s)) d""", (doc_ids,))
    conn.execute("DELETE FROM selfcrag_kb_terms WHERE df <= 0")
    conn.execute("DELETE FROM selfcrag_kb_text_vectors WHERE doc_id = ANY(%s)", (doc_ids,))
    conn.execute("DELETE FROM selfcrag_kb_documents WHERE doc_id = ANY(%s)", (doc_ids,))  # chunks, postings cascade


def _write(conn: Any, documents: list[tuple[str, str]], chunks: list[Chunk], texts: list[str], vectors: np.ndarray,
           stored: list[tuple[bytes, str, np.ndarray]]) -> None:
    """One batch, in one transaction: its documents' old state out, the new in."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))  # one writer: frequencies add up
        _remove(conn, [doc_id for doc_id, _ in documents])
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO selfcrag_kb_documents VALUES (%s, %s)", documents)
        rows = [r for (r,) in conn.execute("SELECT nextval('selfcrag_kb_chunks_row_seq') FROM generate_series(1, %s)",
                                           (len(chunks),)).fetchall()]
        tokens = [keyword_tokens(t) for t in texts]
        with conn.cursor().copy("COPY selfcrag_kb_chunks (row, doc_id, chunk_index, title, source, text, search_key, "
                                "length, embedding, metadata) FROM STDIN") as copy:
            for row, chunk, text, words, vector in zip(rows, chunks, texts, tokens, vectors, strict=True):
                copy.write_row((row, chunk.doc_id, chunk.chunk_index, chunk.title, chunk.source, chunk.text,
                                text_key(text), len(words), vector, chunk.metadata))
        with conn.cursor().copy("COPY selfcrag_kb_postings (term, chunk, tf, length) FROM STDIN") as copy:
            for row, words in zip(rows, tokens, strict=True):
                for term, tf in Counter(words).items():
                    copy.write_row((term, row, tf, len(words)))
        conn.execute("""INSERT INTO selfcrag_kb_terms (term, df)
                        SELECT term, count(*) FROM selfcrag_kb_postings WHERE chunk = ANY(%s) GROUP BY term
                        ON CONFLICT (term) DO UPDATE SET df = selfcrag_kb_terms.df + excluded.df""", (rows,))
        conn.execute("UPDATE selfcrag_kb_stats SET chunks = chunks + %s, tokens = tokens + %s",
                     (len(chunks), sum(len(w) for w in tokens)))
        conn.execute("CREATE TEMP TABLE incoming (LIKE selfcrag_kb_text_vectors) ON COMMIT DROP")
        with conn.cursor().copy("COPY incoming (key, doc_id, embedding) FROM STDIN") as copy:
            for hashed, owner, vector in stored:
                copy.write_row((hashed, owner, vector))
        conn.execute("INSERT INTO selfcrag_kb_text_vectors SELECT * FROM incoming ON CONFLICT (key) DO NOTHING")
