"""What only the PostgreSQL knowledge base has, on a real PostgreSQL 16 + pgvector: BM25 computed in SQL ranks
exactly as bm25.py, the engine's HNSW index is what searches (and agrees with exact search on a small corpus), the
schema records its version, the pool is bounded, and a database that goes away ends a run in one line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from support.knowledge_base import new_database
from support.postgres import pgvector_server

from selfcrag import Context, ingest, load_index
from selfcrag.errors import IngestError
from selfcrag.knowledge import pg_index, pg_keywords, pg_schema
from selfcrag.knowledge.bm25 import BM25
from selfcrag.knowledge.documents import chunk_documents, read_documents
from selfcrag.knowledge.retrieval import index_text
from selfcrag.text.text import keyword_tokens

pytestmark = pytest.mark.system  # PostgreSQL + pgvector

WORDS = ("harbour tide ferry bridge lighthouse ticket river amsel quellport ostholm sunday march metre euro "
         "minute visitor island storm pier crane cargo anchor sail dock").split()


class Hashing:
    """A deterministic embedder (a word-hash bag of 32 dimensions): vectors without loading a model, for tests of
    what the engine does with them."""

    name = "test-hashing"
    languages = None

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 32), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 32] += 1.0
        return out + 1e-3

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def corpus(n: int = 300) -> list[Document]:
    rng = np.random.default_rng(7)
    return [Document(page_content=" ".join(rng.choice(WORDS, size=int(rng.integers(3, 40)))) + f" code X{i}Y.",
                     id=f"d{i}", metadata={"title": f"Doc {i}"}) for i in range(n)]


@pytest.fixture
def hashed_kb(pgvector_url: str) -> tuple[str, list[Document]]:
    docs = corpus()
    url = new_database(pgvector_url)
    ingest(docs, url, embeddings=Hashing())
    return url, docs


def test_keyword_ranking_in_sql_equals_bm25(hashed_kb: tuple[str, list[Document]]) -> None:
    url, docs = hashed_kb
    index = load_index(url, Hashing())
    texts = [index_text(c) for c in chunk_documents(read_documents(docs).documents)]
    bm25 = BM25([keyword_tokens(t) for t in texts])
    ids = [f"d{i}#0" for i in range(len(docs))]
    with index.snapshot() as conn:
        rows = dict(conn.execute("SELECT row, doc_id || '#' || chunk_index FROM selfcrag_kb_chunks").fetchall())
        # Common words only, rare codes with common words, a code alone, a word no chunk holds.
        for query, n in (("harbour tide", 10), ("ferry ticket euro", 10), ("X17Y", 10), ("sail", 10),
                         ("storm pier crane cargo anchor", 10), ("harbour X17Y", 1), ("X17Y X23Y X99Y tide", 2),
                         ("zebra", 3)):
            terms = list(dict.fromkeys(keyword_tokens(query)))
            want = [(ids[r], s) for r, s in bm25.top(keyword_tokens(query), n)]
            got = [(rows[r], s) for r, s in pg_keywords.top(conn, pg_keywords.Scorer(conn, terms), n, {})]
            assert got == want, query  # the same chunks, in the same order, with the same floats


class Reads:
    """A connection that counts the postings `pg_keywords.top` reads from the heads of its terms' lists."""

    def __init__(self, conn) -> None:  # noqa: ANN001
        self.conn, self.postings = conn, 0

    def execute(self, sql: str, params=None):  # noqa: ANN001, ANN201
        result = self.conn.execute(sql, params)
        if sql is pg_keywords._HEADS:  # each term's count of postings read, then the verdict and chunks
            rows = result.fetchall()
            self.postings += sum(int(value) for term, _, value, _ in rows if term is not None)
            return ListResult(rows)
        return result


class ListResult:
    def __init__(self, rows: list) -> None:
        self.rows = rows

    def fetchall(self) -> list:
        return self.rows


def test_common_words_the_threshold_algorithm_is_exact_and_the_capped_search_is_bounded(
        pgvector_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six words in most chunks, a few times each: their long posting lists dominate. Read as deep as it needs,
    `top` gives BM25's top n exactly (its proof over the densest postings); capped at MAX_DEPTH postings a term,
    it reads no more than that, and every chunk it returns carries its exact BM25 score."""
    rng = np.random.default_rng(11)
    common = WORDS[:6]
    docs = []
    for i in range(2000):
        words = [w for w in common for _ in range(int(rng.geometric(0.4)) - 1)] + list(
            rng.choice(WORDS[6:], int(rng.integers(5, 60))))
        rng.shuffle(words)
        docs.append(Document(page_content=" ".join(words) + f" code X{i}Y.", id=f"c{i}"))
    url = new_database(pgvector_url)
    ingest(docs, url, embeddings=Hashing())
    texts = [index_text(c) for c in chunk_documents(read_documents(docs).documents)]
    bm25 = BM25([keyword_tokens(t) for t in texts])
    ids = [f"c{i}#0" for i in range(len(docs))]
    index = load_index(url, Hashing())
    queries = ("harbour tide", "harbour tide ferry bridge", " ".join(common), "tide X17Y", "X17Y X18Y bridge",
               "X17Y harbour tide ferry bridge lighthouse")
    with index.snapshot() as conn:
        rows = dict(conn.execute("SELECT row, doc_id || '#' || chunk_index FROM selfcrag_kb_chunks").fetchall())
        for cap in (1 << 30, 64):
            monkeypatch.setattr(pg_keywords, "MAX_DEPTH", cap)
            for query in queries:
                terms = list(dict.fromkeys(keyword_tokens(query)))
                counted = Reads(conn)
                got = [(rows[r], s) for r, s in pg_keywords.top(counted, pg_keywords.Scorer(conn, terms), 20, {})]
                want = [(ids[r], s) for r, s in bm25.top(keyword_tokens(query), 20)]
                exact = dict(zip(ids, bm25.score_all(keyword_tokens(query)).tolist(), strict=True))
                assert len(got) == 20 and all(s == exact[chunk] for chunk, s in got), query
                if cap > len(docs):
                    assert got == want, query  # the same chunks, in the same order, with the same floats
                else:
                    assert counted.postings <= cap * len(terms), query
            if cap > len(docs):  # a rare word settles the top at once: a few postings of the common word's list
                held = sum(int(bm25.contains(t, row)) for t in ("tide", "x17y") for row in range(len(docs)))
                counted = Reads(conn)
                pg_keywords.top(counted, pg_keywords.Scorer(conn, ["tide", "x17y"]), 1, {})
                assert counted.postings < held / 4


def test_the_operators_hnsw_settings_build_and_search_the_index(pgvector_url: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    monkeypatch.setenv("SELFCRAG_PG_HNSW_M", "8")
    monkeypatch.setenv("SELFCRAG_PG_HNSW_EF_CONSTRUCTION", "24")
    url = new_database(pgvector_url)
    ingest(corpus(40), url, embeddings=Hashing())
    with psycopg.connect(url) as conn:
        definition = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'selfcrag_kb_chunks_hnsw'"
                                  ).fetchone()[0]
    assert "m='8'" in definition and "ef_construction='24'" in definition
    index = load_index(url, Hashing())
    for setting, depth, applied in ((300, 20, "300"), (5, 20, "20")):  # never fewer than the rows asked for
        with index.snapshot() as conn:
            pg_index.search_depth(conn, Context(pg_hnsw_ef_search=setting), depth)
            assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == applied
            assert conn.execute("SHOW enable_seqscan").fetchone()[0] == "off"


def test_a_version_1_knowledge_base_gets_the_impact_index_at_the_next_ingest(pgvector_url: str) -> None:
    import psycopg

    url = new_database(pgvector_url)
    docs = corpus(30)
    ingest(docs, url, embeddings=Hashing())
    with psycopg.connect(url, autocommit=True) as conn:  # as version 1 left it
        conn.execute("DROP INDEX selfcrag_kb_postings_impact")
        conn.execute("UPDATE selfcrag_kb_meta SET value = '1' WHERE name = 'version'")
    assert load_index(url, Hashing()).retrieve("harbour tide", Context(k=2))  # read as it is
    ingest(docs[:1], url, append=True, embeddings=Hashing())
    with psycopg.connect(url) as conn:
        version = conn.execute("SELECT value FROM selfcrag_kb_meta WHERE name = 'version'").fetchone()[0]
        assert version == str(pg_schema.SCHEMA_VERSION)  # every later migration ran too
        assert conn.execute("SELECT to_regclass('selfcrag_kb_postings_impact') IS NOT NULL").fetchone()[0]


def test_the_engine_searches_with_hnsw_and_agrees_with_exact(hashed_kb: tuple[str, list[Document]]) -> None:
    url, _ = hashed_kb
    index = load_index(url, Hashing())
    query = np.asarray(Hashing().embed_query("storm over the pier"), dtype=np.float32)
    query /= np.linalg.norm(query)
    with index.snapshot() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")  # as retrieve() does for HNSW
        plans = {name: "\n".join(r[0] for r in conn.execute(f"EXPLAIN {sql}", {"q": query, "n": 20}).fetchall())
                 for name, sql in (("hnsw", pg_index._VECTOR_HNSW), ("exact", pg_index._VECTOR_EXACT))}
    assert "selfcrag_kb_chunks_hnsw" in plans["hnsw"] and "selfcrag_kb_chunks_hnsw" not in plans["exact"]
    exact = index.retrieve("storm over the pier", Context(k=5))
    approximate = index.retrieve("storm over the pier", Context(k=5, exact_search_below=0))
    assert exact and [p["id"] for p in exact] == [p["id"] for p in approximate]


def test_the_schema_records_its_version_and_a_newer_one_is_refused(hashed_kb: tuple[str, list[Document]]) -> None:
    import psycopg

    url, _ = hashed_kb
    with psycopg.connect(url, autocommit=True) as conn:
        meta = dict(conn.execute("SELECT name, value FROM selfcrag_kb_meta").fetchall())
        assert meta == {"version": str(pg_schema.SCHEMA_VERSION), "embedder": "test-hashing",
                        "tokenizer": meta["tokenizer"], "dim": "32"}
        conn.execute("UPDATE selfcrag_kb_meta SET value = '99' WHERE name = 'version'")
    refused = f"has schema version 99; this selfcrag reads up to {pg_schema.SCHEMA_VERSION}: upgrade selfcrag"
    with pytest.raises(IngestError, match=refused):
        pg_index.PgIndex.open(url, Hashing())


def test_the_pool_is_bounded_and_dropped_connections_are_replaced(hashed_kb: tuple[str, list[Document]]) -> None:
    import psycopg

    url, _ = hashed_kb
    index = load_index(url, Hashing())
    errors: list[BaseException] = []

    def ask_many() -> None:
        try:
            for _ in range(5):
                assert index.retrieve("harbour ferry", Context(k=3))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask_many) for _ in range(3 * pg_index.POOL_SIZE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    name = url.split("/")[3].split("?")[0]
    with psycopg.connect(url, autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> "
                             "pg_backend_pid()", (name,)).fetchone()[0]
        assert 1 <= count <= pg_index.POOL_SIZE
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> "
                     "pg_backend_pid()", (name,))  # as a restarted server or a failover does to them
    assert index.retrieve("harbour ferry", Context(k=3))  # the next run works


def test_a_database_that_goes_away_ends_the_run_in_one_line(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tides.md").write_text("# Tides\n\nThe highest tide reaches 7.5 metres in March.", encoding="utf-8")
    with pgvector_server() as url:
        ingest(docs, url)
        index = load_index(url)
        assert index.retrieve("How high is the tide?", Context(k=1))
    with pytest.raises(IngestError, match=r"^the knowledge base at postgresql://\S* cannot be used: ") as raised:
        index.retrieve("How high is the tide?", Context(k=1))  # the server is gone
    assert "\n" not in str(raised.value)
    pg_index.close_pools()
    proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ask", "How high is the tide?", "--index", url],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "postgresql://" in proc.stderr and "cannot be used" in proc.stderr


def test_eval_builds_a_postgresql_knowledge_base_from_its_corpus_then_reads_it(pgvector_url: str,
                                                                             tmp_path: Path) -> None:
    """`selfcrag eval --index postgresql://... --corpus` ingests the corpus into an empty database (as `ingest`
    does) and evaluates on it; a second run finds it and does not index again. A database that cannot be reached
    is one line, and no folder is made of the URL."""
    url = new_database(pgvector_url)
    questions = Path(__file__).parents[1] / "data" / "sample_questions.jsonl"
    corpus = Path(__file__).parents[2] / "src" / "selfcrag" / "data" / "sample_kb"

    def evaluate(index: str, out: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "selfcrag.cli", "eval", str(questions), "--limit", "2",
                               "--index", index, "--corpus", str(corpus), "--out", str(tmp_path / out)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)

    first = evaluate(url, "first")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "indexed 23 documents" in first.stderr
    metrics = json.loads((tmp_path / "first" / "metrics.json").read_text())
    assert metrics["systems"]["selfcrag"]["questions"] == 2
    assert metrics["run"]["index"].startswith("postgresql://")
    second = evaluate(url, "second")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "already holds a knowledge base: using it" in second.stderr
    gone = evaluate("postgresql://reader@/kb?host=/nonexistent-socket-dir&port=5", "gone")
    assert gone.returncode != 0
    assert len(gone.stderr.strip().splitlines()) == 1 and "cannot be used" in gone.stderr, gone.stderr
    assert not (tmp_path / "postgresql:").exists() and not (tmp_path / "gone").exists()


def test_readers_never_see_a_half_replaced_document_while_another_ingest_runs(pgvector_url: str) -> None:
    from selfcrag.knowledge import pg_ingest

    url = new_database(pgvector_url)

    def version(v: str) -> list[Document]:  # several chunks a document, every chunk naming its version
        return [Document(page_content=" ".join(f"Sentence {i} of harbour log {n} is {v}." for i in range(60)),
                         id=f"log{n}", metadata={"title": f"Log {n}"}) for n in range(6)]

    ingest(version("vone"), url, embeddings=Hashing())
    index = load_index(url, Hashing())
    writing = threading.Event()
    writing.set()
    seen: list[dict[str, set[str]]] = []
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for v in ("vtwo", "vthree", "vfour", "vfive"):
                ingest(version(v), url, append=True, embeddings=Hashing())
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            writing.clear()

    old_batch, pg_ingest.BATCH_CHUNKS = pg_ingest.BATCH_CHUNKS, 1  # a transaction per document
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while writing.is_set() or not seen:
            versions: dict[str, set[str]] = {}
            for passage in index.retrieve("Sentence of harbour log", Context(k=20, min_similarity=0.0)):
                versions.setdefault(passage["doc_id"], set()).update(
                    w.strip(".") for w in passage["text"].split() if w.startswith("v"))
            seen.append(versions)
    finally:
        thread.join()
        pg_ingest.BATCH_CHUNKS = old_batch
    assert failures == []
    assert all(len(found) == 1 for versions in seen for found in versions.values()), seen
    final = index.retrieve("Sentence of harbour log", Context(k=20, min_similarity=0.0))
    assert final and {w.strip(".") for p in final for w in p["text"].split() if w.startswith("v")} == {"vfive"}


def test_a_first_bulk_load_builds_the_hnsw_index_after_it_and_later_ingests_keep_it(
        pgvector_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from selfcrag.knowledge import pg_ingest

    monkeypatch.setattr(pg_ingest, "BULK_FROM", 100)
    monkeypatch.setattr(pg_ingest, "BATCH_CHUNKS", 64)
    url = new_database(pgvector_url)
    during: list[bool] = []
    write = pg_ingest._write

    def watched(conn, *args):  # noqa: ANN001, ANN202
        during.append(conn.execute("SELECT to_regclass('selfcrag_kb_chunks_hnsw') IS NOT NULL").fetchone()[0])
        return write(conn, *args)

    monkeypatch.setattr(pg_ingest, "_write", watched)
    docs = corpus()
    ingest(docs, url, embeddings=Hashing())
    assert len(during) > 1 and not any(during)  # no index kept up chunk by chunk during the first load ...
    with psycopg.connect(url) as conn:  # ... and built once after it
        assert conn.execute("SELECT to_regclass('selfcrag_kb_chunks_hnsw') IS NOT NULL").fetchone()[0]
    during.clear()
    more = [Document(page_content=f"storm pier code Z{i}Z.", id=f"more{i}") for i in range(150)]
    ingest(more, url, append=True, embeddings=Hashing())
    assert during and all(during)  # a knowledge base with chunks keeps its index while it grows
    with psycopg.connect(url, autocommit=True) as conn:  # a bulk load killed before the build: the next one builds
        conn.execute("DROP INDEX selfcrag_kb_chunks_hnsw")
    ingest(docs[:1], url, append=True, embeddings=Hashing())
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('selfcrag_kb_chunks_hnsw') IS NOT NULL").fetchone()[0]
    found = load_index(url, Hashing()).retrieve("storm pier code Z7Z.", Context(k=1, exact_search_below=0))
    assert [p["id"] for p in found] == ["more7#0"]


def test_two_folders_readmes_both_stay_in_postgres_and_a_replace_needs_the_flag(pgvector_url: str,
                                                                                 tmp_path: Path) -> None:
    import psycopg

    url = new_database(pgvector_url)
    for name, text in (("alpha", "harbour tide"), ("beta", "ferry bridge"), ("gamma", "lighthouse pier")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# {name}\n\nThe {text}.\n", encoding="utf-8")
    ingest(tmp_path / "alpha", url, embeddings=Hashing())
    report = ingest(tmp_path / "beta", url, append=True, embeddings=Hashing())
    assert (report.added, report.replaced, report.kept) == (1, 0, 1)
    assert report.clashes == ["beta/README.md goes in as 'beta/README': the index holds 'README' from "
                              "alpha/README.md (--replace replaces that instead)"]
    report = ingest(tmp_path / "gamma", url, append=True, replace=True, embeddings=Hashing())
    assert (report.added, report.replaced, report.replaced_ids) == (0, 1, ["README"])
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT doc_id, source FROM selfcrag_kb_chunks ORDER BY doc_id").fetchall()
    assert rows == [("README", "gamma/README.md"), ("beta/README", "beta/README.md")]
