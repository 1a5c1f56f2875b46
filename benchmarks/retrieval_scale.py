"""Keyword and vector search at 10k, 100k and 1M synthetic chunks: latency per query, build time, memory, recall.

    .venv/bin/python benchmarks/retrieval_scale.py [--sizes 10000,100000,1000000] [--queries 200] [--old-up-to 100000]

Keyword part: a corpus of chunks whose tokens follow a Zipf law over a 200,000-term vocabulary (seeded), 40-120
tokens a chunk; queries of 2-5 terms drawn from the same law (common terms included: their long postings are the
expensive case). Per query, what `HybridIndex.retrieve` asks of BM25: the best `depth` (20) rows with their
scores. `new` is `BM25.top` (pruned, MaxScore-style); `array` is what it replaced, every row scored with one
bincount then the best picked (`best(score_all(...))`), run side by side at every size: both must give the same
(row, score) pairs, scores to the last bit (checked). `old` is the dict-of-lists BM25 before the arrays (its
scoring loop, kept below), run where affordable: the same top rows (checked). Build: the array BM25 built from
token lists at 10k/100k; at 1M its arrays are made with numpy and loaded through `from_arrays` (the load path,
checks included).
Vector part: random-normal unit vectors (384 dimensions, no embedding model), and the same clustered around
size/100 centres (text embeddings have neighbourhoods; pure noise has none); queries near a chunk; single-query
search as the retriever
does (`vector_index.search`, one OpenMP thread): FAISS flat (exact) vs HNSW as `vector_index.build` makes it
(M=32, efSearch 128) and IVF (4*sqrt(n) lists, nprobe 16, for comparison), recall@5 against flat. Pure noise is
the worst case for an approximate index (every vector nearly equidistant), so its recall is a lower bound.
Process CPU time per query (`time.process_time`), p50 and p95; memory: the keyword arrays' bytes and the growth
of max RSS while building them, each FAISS index's serialised size.
Prints a table and writes benchmarks/results/retrieval_scale.json.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from provenance import provenance

ROOT = Path(__file__).resolve().parent.parent
VOCABULARY = 200_000
DEPTH = 20  # CANDIDATES_PER_K * k at the default k = 5
DIM = 384


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class OldBM25:
    """The previous BM25: postings as Python lists, scored term by term into a dict, sorted whole."""

    def __init__(self, documents: list[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.doc_len = [len(d) for d in documents]
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for row, tokens in enumerate(documents):
            for term, tf in Counter(tokens).items():
                self.postings.setdefault(term, []).append((row, tf))

    def top(self, query: list[str], n: int) -> list[tuple[int, float]]:
        avgdl = max(sum(self.doc_len) / len(self.doc_len), 1e-9)
        out: dict[int, float] = {}
        for term in dict.fromkeys(query):
            postings = self.postings.get(term)
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1.0 + (len(self.doc_len) - df + 0.5) / (df + 0.5))
            for row, tf in postings:
                norm = self.k1 * (1 - self.b + self.b * self.doc_len[row] / avgdl)
                out[row] = out.get(row, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        return sorted(out.items(), key=lambda item: (-item[1], item[0]))[:n]


def zipf(rng: np.random.Generator, size: int) -> np.ndarray:
    ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
    cumulative = np.cumsum(1.0 / ranks**1.07)
    return np.searchsorted(cumulative, rng.random(size) * cumulative[-1]).astype(np.int32)


def corpus(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(term ids of all chunks end to end, each chunk's length)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(40, 121, size)
    return zipf(rng, int(lengths.sum())), lengths


def arrays_of(ids: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays `BM25.to_arrays` writes, made with numpy: the 1M-chunk index without 1M Python lists."""
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    pairs, tf = np.unique(ids.astype(np.int64) * len(lengths) + rows, return_counts=True)  # sorted by term, row
    term_of, row_of = np.divmod(pairs, len(lengths))
    used, start = np.unique(term_of, return_index=True)
    encoded = [f"t{t}".encode() for t in used.tolist()]
    return {"params": np.asarray([1.5, 0.75]), "doc_len": lengths.astype("<i8"),
            "term_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            "term_end": np.cumsum([len(e) for e in encoded]).astype("<i8"),
            "start": np.concatenate([start, [len(pairs)]]).astype("<i8"),
            "rows": row_of.astype("<i4"), "tf": tf.astype("<i4")}


def timed(fn, queries) -> tuple[list[float], list]:  # type: ignore[no-untyped-def]
    cpu, results = [], []
    for q in queries:
        start = time.process_time()
        results.append(fn(q))
        cpu.append(1000 * (time.process_time() - start))
    return cpu, results


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(statistics.quantiles(ms, n=20)[-1], 3)}


def keyword(size: int, queries: int, with_old: bool) -> dict:
    from selfcrag.knowledge.bm25 import BM25

    ids, lengths = corpus(size, seed=size)
    rng = np.random.default_rng(7)
    asked = [[f"t{t}" for t in zipf(rng, int(rng.integers(2, 6)))] for _ in range(queries)]
    out: dict = {"chunks": size, "postings": None}
    before, cpu = rss_mb(), time.process_time()
    if size <= 100_000:
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        documents = [[f"t{t}" for t in ids[s:e].tolist()] for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
        cpu = time.process_time()
        new = BM25(documents)
        out["build"] = "BM25(token lists)"
    else:
        documents = []
        arrays = arrays_of(ids, lengths)
        cpu = time.process_time()
        new = BM25.from_arrays(arrays)
        out["build"] = "BM25.from_arrays (numpy-made arrays: the load path)"
    out["build_cpu_s"] = round(time.process_time() - cpu, 2)
    out["postings"] = len(new.rows)
    out["rss_growth_mb"] = round(rss_mb() - before, 1)
    out["index_mb"] = round(sum(a.nbytes for a in (new.rows, new.tf, new.doc_len, new.start, new._weights,
                                                    new._idf, new._bound)) / 2**20, 1)
    new_ms, new_top = timed(lambda q: new.top(q, DEPTH), asked)
    out["new"] = summary(new_ms)
    array_ms, array_top = timed(lambda q: BM25.best(new.score_all(q), DEPTH), asked)
    out["array"] = summary(array_ms)
    out["identical_to_array"] = new_top == array_top
    out["array_over_new_p50"] = round(out["array"]["p50_ms"] / max(out["new"]["p50_ms"], 1e-6), 1)
    if with_old and documents:
        cpu = time.process_time()
        old = OldBM25(documents)
        out["old_build_cpu_s"] = round(time.process_time() - cpu, 2)
        old_ms, old_top = timed(lambda q: old.top(q, DEPTH), asked)
        out["old"] = summary(old_ms)
        out["same_top_rows"] = all([r for r, _ in a] == [r for r, _ in b] for a, b in zip(new_top, old_top,
                                                                                          strict=True))
        out["old_over_new_p50"] = round(out["old"]["p50_ms"] / max(out["new"]["p50_ms"], 1e-6), 1)
    return out


def unit_vectors(rng: np.random.Generator, size: int, clustered: bool) -> np.ndarray:
    """Random-normal unit vectors; `clustered`: around size/100 random centres (noise of the same scale as the
    centres), so that a vector's neighbours are nearer than the rest, as in text embeddings."""
    data = rng.standard_normal((size, DIM), dtype=np.float32)
    if clustered:
        centres = rng.standard_normal((max(size // 100, 1), DIM), dtype=np.float32)
        data = data * 0.7 + centres[rng.integers(0, len(centres), size)]
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def vectors(size: int, queries: int, kinds: list[str], clustered: bool) -> dict:
    import faiss

    from selfcrag.knowledge.vector_index import HNSW_BUILD_DEPTH, HNSW_NEIGHBOURS, HNSW_SEARCH_DEPTH, search

    rng = np.random.default_rng(size)
    data = unit_vectors(rng, size, clustered)
    asked = data[rng.choice(size, queries, replace=False)] + 0.1 * unit_vectors(rng, queries, False)  # near a chunk
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    out: dict = {"chunks": size, "vectors": "clustered" if clustered else "random-normal"}
    truth = None
    for kind in ["flat", *kinds]:
        cpu = time.process_time()
        if kind == "flat":
            index = faiss.IndexFlatIP(DIM)
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(DIM, HNSW_NEIGHBOURS, faiss.METRIC_INNER_PRODUCT)  # as vector_index.build
            index.hnsw.efConstruction, index.hnsw.efSearch = HNSW_BUILD_DEPTH, HNSW_SEARCH_DEPTH
        else:
            lists = int(4 * math.sqrt(size))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, lists, faiss.METRIC_INNER_PRODUCT)
            index.train(data[rng.choice(size, min(size, 40 * lists), replace=False)])
            index.nprobe = 16
        index.add(data)
        row = {"build_cpu_s": round(time.process_time() - cpu, 2),
               "index_mb": round(len(faiss.serialize_index(index)) / 2**20, 1)}
        ms, found = timed(lambda q, index=index: search(index, q.reshape(1, -1), DEPTH), asked)
        row.update(summary(ms))
        if kind == "flat":
            truth = found
        else:
            hits = [len(set(f[:5].tolist()) & set(t[:5].tolist())) / 5 for f, t in zip(found, truth, strict=True)]
            row["recall_at_5"] = round(statistics.mean(hits), 3)
        out[kind] = row
    return out


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--sizes", default="10000,100000,1000000")
    cli.add_argument("--queries", type=int, default=200)
    cli.add_argument("--old-up-to", type=int, default=100_000, help="run the old BM25 up to this many chunks")
    cli.add_argument("--hnsw-up-to", type=int, default=100_000, help="HNSW up to this size (its build is slow)")
    cli.add_argument("--kinds", default="hnsw,ivf", help="approximate FAISS indexes to compare with flat")
    cli.add_argument("--no-vectors", action="store_true", help="keyword search only (keeps --out's vector rows)")
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "retrieval_scale.json")
    args = cli.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results: dict = {**provenance(), "keyword": [], "vector": [], "queries": args.queries, "depth": DEPTH}
    if args.no_vectors and args.out.is_file():  # a keyword-only run keeps the vector rows measured before
        before = json.loads(args.out.read_text())
        results["vector"] = before.get("vector", [])
        # ... and says which run measured them, since this run's commit and command are not theirs
        results["vector_rows_from"] = before.get("vector_rows_from") or {
            key: before.get(key, "unknown (not recorded)") for key in ("commit", "dirty", "command")}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every row: the 1M HNSW build takes many minutes, and what came before is kept
        args.out.write_text(json.dumps(results, indent=2) + "\n")

    print(f"{'chunks':>9} {'postings':>11} {'build s':>8} {'new p50':>8} {'new p95':>8} {'arr p50':>8} "
          f"{'arr p95':>8} {'x':>6} {'same':>5} {'old p50':>8} {'old p95':>8} {'x':>6}  (keyword search, CPU ms "
          "per query)")
    for size in sizes:
        row = keyword(size, args.queries, size <= args.old_up_to)
        results["keyword"].append(row)
        save()
        old = row.get("old", {})
        print(f"{size:>9,} {row['postings']:>11,} {row['build_cpu_s']:>8} {row['new']['p50_ms']:>8} "
              f"{row['new']['p95_ms']:>8} {row['array']['p50_ms']:>8} {row['array']['p95_ms']:>8} "
              f"{row['array_over_new_p50']:>6} {'yes' if row['identical_to_array'] else 'NO':>5} "
              f"{old.get('p50_ms', '-'):>8} {old.get('p95_ms', '-'):>8} "
              f"{row.get('old_over_new_p50', '-'):>6}", flush=True)
    if not args.no_vectors:
        print(f"{'chunks':>9} {'vectors':>13} {'kind':>5} {'build s':>8} {'MB':>7} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'recall@5':>9}")
        for size in sizes:
            for clustered in (False, True):
                kinds = [k for k in args.kinds.split(",") if k and (k != "hnsw" or size <= args.hnsw_up_to)]
                row = vectors(size, args.queries, kinds, clustered)
                results["vector"].append(row)
                save()
                for kind in ("flat", *kinds):
                    r = row[kind]
                    print(f"{size:>9,} {row['vectors']:>13} {kind:>5} {r['build_cpu_s']:>8} {r['index_mb']:>7} "
                          f"{r['p50_ms']:>8} {r['p95_ms']:>8} {r.get('recall_at_5', '-'):>9}", flush=True)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
