"""Vector search at scale: which HNSW build and search depths reach recall@10 >= 0.95 at <= 2 ms a query
(issue 46, item 3), and at what build cost.

For each size, one set of unit vectors (clustered around size/100 centres, as retrieval_scale.py makes them: a
vector's neighbours are nearer than the rest, as in text embeddings; `--noise` for pure random-normal vectors,
where no index does well) and 200 queries near a stored vector. The truth is the exact top 10 (flat inner
product). Each HNSW build (M, efConstruction) is timed once (CPU seconds of the whole process: faiss builds on
every core), then searched at every efSearch through `vector_index.search`, the retriever's own call (one
thread a query), CPU ms per query: p50 and p95; recall@10 against the truth. The row marked `shipped` uses
vector_index.py's constants.

    python benchmarks/vector_scale.py --sizes 250000,1000000
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from provenance import provenance  # noqa: E402

DIM = 384  # all-MiniLM-L6-v2's width, the default embedder
K = 10


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def unit_vectors(rng: np.random.Generator, size: int, clustered: bool) -> np.ndarray:
    data = rng.standard_normal((size, DIM), dtype=np.float32)
    if clustered:
        centres = rng.standard_normal((max(size // 100, 1), DIM), dtype=np.float32)
        data = data * 0.7 + centres[rng.integers(0, len(centres), size)]
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def searched(index, queries: np.ndarray) -> tuple[list[float], list[np.ndarray]]:  # type: ignore[no-untyped-def]
    from selfcrag.knowledge.vector_index import search

    cpu_ms, found = [], []
    for query in queries:
        start = time.process_time()
        rows = search(index, query.reshape(1, -1), K)
        cpu_ms.append((time.process_time() - start) * 1000)
        found.append(rows)
    return cpu_ms, found


def recall(found: list[np.ndarray], truth: np.ndarray) -> float:
    return round(statistics.mean(len(set(f[:K].tolist()) & set(t[:K].tolist())) / K
                                 for f, t in zip(found, truth, strict=True)), 3)


def percentile(values: list[float], share: float) -> float:
    return round(sorted(values)[min(len(values) - 1, int(share * len(values)))], 3)


def measure(size: int, queries: int, clustered: bool, builds: list[tuple[int, int]], depths: list[int]) -> dict:
    import faiss

    from selfcrag.knowledge import vector_index

    rng = np.random.default_rng(size)
    data = unit_vectors(rng, size, clustered)
    asked = data[rng.choice(size, queries, replace=False)] + 0.1 * unit_vectors(rng, queries, False)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    flat = faiss.IndexFlatIP(DIM)
    flat.add(data)
    truth = flat.search(asked, K)[1]  # all threads at once: only the truth, not a timed arm
    del flat
    out: dict = {"chunks": size, "vectors": "clustered" if clustered else "random-normal", "queries": queries,
                 "builds": []}
    shipped = (vector_index.HNSW_NEIGHBOURS, vector_index.HNSW_BUILD_DEPTH)
    for neighbours, build_depth in builds:
        before = rss_mb()
        cpu, wall = time.process_time(), time.perf_counter()
        index = faiss.IndexHNSWFlat(DIM, neighbours, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = build_depth
        index.add(data)
        row: dict = {"M": neighbours, "efConstruction": build_depth, "shipped": (neighbours, build_depth) == shipped,
                     "build_cpu_s": round(time.process_time() - cpu, 1),
                     "build_wall_s": round(time.perf_counter() - wall, 1),
                     "rss_growth_mb": round(rss_mb() - before, 1),
                     "index_mb": round(len(faiss.serialize_index(index)) / 2**20, 1),
                     "searches": []}
        for depth in depths:
            index.hnsw.efSearch = depth
            cpu_ms, found = searched(index, asked)
            row["searches"].append({"efSearch": depth, "p50_ms": percentile(cpu_ms, 0.5),
                                    "p95_ms": percentile(cpu_ms, 0.95), "recall_at_10": recall(found, truth)})
            print(f"{size:>9,} {out['vectors']:>13} {neighbours:>3} {build_depth:>5} {row['build_cpu_s']:>8} "
                  f"{depth:>5} {row['searches'][-1]['p50_ms']:>8} {row['searches'][-1]['p95_ms']:>8} "
                  f"{row['searches'][-1]['recall_at_10']:>7}", flush=True)
        out["builds"].append(row)
        del index
    return out


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--sizes", default="250000,1000000")
    cli.add_argument("--queries", type=int, default=200)
    cli.add_argument("--builds", default="32:40,32:128", help="M:efConstruction pairs, comma-separated")
    cli.add_argument("--search-depths", default="64,128,256")
    cli.add_argument("--noise", action="store_true", help="random-normal vectors instead of clustered ones")
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vector_scale.json")
    args = cli.parse_args()
    builds = [(int(m), int(ef)) for m, ef in (pair.split(":") for pair in args.builds.split(","))]
    depths = [int(d) for d in args.search_depths.split(",")]
    results: dict = {**provenance(), "k": K, "rows": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"{'chunks':>9} {'vectors':>13} {'M':>3} {'efC':>5} {'build s':>8} {'efS':>5} {'p50 ms':>8} "
          f"{'p95 ms':>8} {'recall':>7}  (CPU per query, one thread; recall@10 vs exact)")
    for size in (int(s) for s in args.sizes.split(",")):
        results["rows"].append(measure(size, args.queries, not args.noise, builds, depths))
        args.out.write_text(json.dumps(results, indent=2) + "\n")  # after every size: a 1M build takes long
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
