"""Which FAISS index holds an index's chunk vectors: exact (flat) for small corpora, HNSW past a size.

A flat index compares the query with every vector: exact, nothing to tune, and fast while the corpus is small,
but its cost grows with the corpus (benchmarks/retrieval_scale.py: p50 per query at 10k, 100k and 1M chunks).
HNSW walks a neighbour graph instead, at a recall below 1 and a build cost paid once at ingest. The operator
setting `vector_index` picks one (`auto`: flat up to `AUTO_HNSW_FROM` chunks); the manifest records the choice.
Both answer `search`, `reconstruct_batch` (the retriever's exact cosine of every candidate) and `d`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

KINDS = ("flat", "hnsw")
# A flat search over 250,000 vectors of 384 dimensions is ~40 ms of CPU a query on the 2-core machine
# (retrieval_scale.py measures 10k/100k/1M); past it HNSW answers in about a millisecond.
AUTO_HNSW_FROM = 250_000
HNSW_NEIGHBOURS = 32  # M: links per vector; faiss's usual default for sentence embeddings
# efConstruction. 40 left the graph too sparse past a few hundred thousand vectors: at 1M clustered vectors recall@10
# stopped at 0.935 however deep the search; 64 reaches 0.988 at efSearch 128 for ~30% more build CPU, 128 reaches
# 1.0 for 4x (benchmarks/vector_scale.py, results/vector_scale.json). Indexes built before keep their graph.
HNSW_BUILD_DEPTH = 64
# A filter that allows this many rows or fewer is answered by comparing them all: exact, and cheaper than a walk
# (4,096 vectors of 384 dimensions are a ~6 MB copy and one product). HNSW with a selector over few allowed rows
# walks mostly past rows it may not return and can return allowed rows that are not the nearest ones.
EXACT_AMONG_UP_TO = 4096
HNSW_SEARCH_DEPTH = 128  # efSearch, stored with the index: well above the 4*k candidates the retriever asks for


def chosen(setting: str, count: int) -> str:
    """The kind of index to build for `count` vectors under the `vector_index` setting."""
    if setting == "auto":
        return "hnsw" if count >= AUTO_HNSW_FROM else "flat"
    if setting not in KINDS:
        raise ValueError(f"unknown vector_index {setting!r}; use auto, {', '.join(KINDS)}")
    return setting


def build(vectors: Any, kind: str) -> Any:
    """A FAISS inner-product index of `kind` over unit `vectors` (float32, n x d)."""
    import faiss

    dim = int(vectors.shape[1])
    index: Any
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_NEIGHBOURS, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_BUILD_DEPTH
        index.hnsw.efSearch = HNSW_SEARCH_DEPTH
    else:
        index = faiss.IndexFlatIP(dim)
    index.add(vectors)
    return index


def search(index: Any, query: Any, depth: int, rows: Any = None) -> Any:
    """Rows of the `depth` nearest vectors to one query (1 x d), best first (-1 pads a short index); with `rows`
    (ascending int64), the nearest among those rows only (a metadata filter: metadata_filter.py). Flat: exact,
    with a FAISS IDSelector. HNSW: up to EXACT_AMONG_UP_TO allowed rows are compared exactly; more are walked
    with a selector, and a walk that comes back short is answered exactly too.
    One OpenMP thread: faiss splits a search by query, so the other threads of a one-query search only spin
    (10k flat vectors: 9.4 ms of CPU a query with the default threads, 1.4 ms with one). Set per call and put
    back: it is the calling thread's setting, and LangGraph runs nodes on pool threads."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        if rows is None:
            return index.search(query, depth)[1][0]
        hnsw = kind_of(index) == "hnsw"
        if hnsw and len(rows) <= EXACT_AMONG_UP_TO:
            return _exact_among(index, query, depth, rows)
        library: Any = faiss  # its stubs lack the selector parameters
        selector = library.IDSelectorBatch(rows)
        params = (library.SearchParametersHNSW(sel=selector, efSearch=max(HNSW_SEARCH_DEPTH, depth)) if hnsw
                  else library.SearchParameters(sel=selector))
        found = index.search(query, depth, params=params)[1][0]
        if hnsw and int((found >= 0).sum()) < min(depth, len(rows)):
            return _exact_among(index, query, depth, rows)
        return found
    finally:  # a build later on this thread (HNSW at ingest) keeps its threads
        faiss.omp_set_num_threads(threads)


def _exact_among(index: Any, query: Any, depth: int, rows: Any) -> Any:
    cosines = index.reconstruct_batch(rows) @ query[0]
    return rows[np.argsort(-cosines, kind="stable")[:depth]]


def kind_of(index: Any) -> str:
    return "hnsw" if type(index).__name__.startswith("IndexHNSW") else "flat"
