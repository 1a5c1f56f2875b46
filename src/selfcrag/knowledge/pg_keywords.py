"""Okapi BM25 over the PostgreSQL knowledge base's postings (pg_index.py), ranking as bm25.py: the same k1, b,
Lucene idf and length normalisation, each chunk's weights summed in query-term order, ties by row.

The best n chunks without reading whole posting lists (Fagin's threshold algorithm over impact-ordered lists).
Every posting list is indexed by its term's density in the chunk, tf / length (`IMPACT_INDEX`): at a given density
a posting's weight grows with tf towards a limit, whatever the corpus's average length, so every posting below the
last one read weighs at most that limit at that density. `top` reads each query term's densest postings (its
head), weighs them, and stops when the n-th best partial sum beats the sum of the open terms' bounds: a chunk in
no head cannot reach the top n. Otherwise it reads deeper, to MAX_DEPTH postings a term at most: a cost bounded by
index lookups, whatever the corpus's size; past it the best found is the answer, which may differ from BM25's
(measured: benchmarks/pg_retrieval_scale.py). The chunks found that can still reach the top n are completed by
primary-key lookups of their missing terms and ranked by their exact scores.
"""

from __future__ import annotations

import math
from typing import Any

from selfcrag.knowledge.bm25 import BM25

K1, B = BM25().k1, BM25().b  # the directory index's parameters: both backends rank keywords alike
# Postings in order of density, with what a weight needs: reading a term's densest postings is one index range.
# Ties by chunk, so that every plan reads a list in one order and a head read on from an offset misses nothing.
IMPACT_INDEX = """CREATE INDEX IF NOT EXISTS selfcrag_kb_postings_impact ON selfcrag_kb_postings
    (term, (tf::float8 / length) DESC, chunk) INCLUDE (tf, length)"""
# Postings read per term in the first round, the factor each further round reads more, and the most a term reads.
FIRST_DEPTH, DEEPER, MAX_DEPTH = 64, 4, 1024
RESCORED = 8  # past MAX_DEPTH, the chunks completed per result asked: those that could score the most
BOUND_MARGIN = 1e-9  # float sums in another order differ in the last bits: a bound must clear them

# Each term's densest postings from the `skip`-th to the `depth`-th (the impact index's head, past what was read).
_HEADS = """SELECT t.term, p.chunk, p.tf, p.length FROM unnest(%(terms)s::text[]) AS t(term) CROSS JOIN LATERAL (
    SELECT chunk, tf, length FROM selfcrag_kb_postings WHERE term = t.term
    ORDER BY tf::float8 / length DESC, chunk LIMIT %(depth)s - %(skip)s OFFSET %(skip)s) p"""
_LOOKUP = "SELECT chunk, term, tf, length FROM selfcrag_kb_postings WHERE term = ANY(%(terms)s) AND chunk = ANY(%(rows)s)"


class Scorer:
    """The corpus statistics a query's weights need, read once per query in its snapshot."""

    def __init__(self, conn: Any, terms: list[str]) -> None:
        chunks, tokens = conn.execute("SELECT chunks, tokens FROM selfcrag_kb_stats").fetchone()
        self.avgdl = max(float(tokens) / max(int(chunks), 1), 1e-9)
        dfs = dict(conn.execute("SELECT term, df FROM selfcrag_kb_terms WHERE term = ANY(%s)", (terms,)).fetchall())
        # bm25.py's Lucene idf, with math.log as there: the same floats
        self.idf = {t: math.log(1.0 + (int(chunks) - int(df) + 0.5) / (int(df) + 0.5)) for t, df in dfs.items()}
        self.terms = [t for t in terms if t in self.idf]

    def weight(self, term: str, tf: int, length: int) -> float:
        """Okapi BM25's weight of `term` in a chunk: bm25.py's float operations in bm25.py's order."""
        return self.idf[term] * float(tf) * (K1 + 1) / (float(tf) + K1 * (1 - B + B * float(length) / self.avgdl))

    def bound(self, term: str, density: float) -> float:
        """The largest weight `term` can have in a chunk where it is at most this dense (tf / length): the weight
        grows with tf at a given density, so its limit, (k1 + 1) / (1 + k1 b / (density avgdl)), bounds it."""
        return self.idf[term] * (K1 + 1) / (1 + K1 * B / (density * self.avgdl))

    def look_up(self, conn: Any, rows: list[int], into: dict[int, dict[str, float]]) -> None:
        """Each of `rows`' weights for the query's terms it holds, into `into` (a row holding none: empty)."""
        for row in rows:
            into.setdefault(row, {})
        if self.terms and rows:
            for row, term, tf, length in conn.execute(_LOOKUP, {"terms": self.terms, "rows": rows}).fetchall():
                into[int(row)][term] = self.weight(term, tf, length)

    def score(self, weights: dict[str, float]) -> float:
        return sum(weights.get(t, 0.0) for t in self.terms)  # in query-term order from 0.0, as bm25.py sums


def top(conn: Any, scorer: Scorer, n: int, known: dict[int, dict[str, float]]) -> list[tuple[int, float]]:
    """The `n` best (chunk row, BM25 score) for the scorer's terms, best first, ties by row; `known` receives the
    complete weights of the chunks scored (the caller's other candidates need them too)."""
    if n <= 0 or not scorer.terms:
        return []
    seen: dict[int, dict[str, float]] = {}  # weights read in the heads: complete where no open term is missing
    open_terms = list(scorer.terms)  # terms whose postings have not all been read
    bound: dict[str, float] = {}
    skip, depth = 0, FIRST_DEPTH
    while True:
        last: dict[str, float] = {}
        read: dict[str, int] = {}
        for term, row, tf, length in conn.execute(_HEADS, {"terms": open_terms, "depth": depth,
                                                           "skip": skip}).fetchall():
            seen.setdefault(row, {})[term] = scorer.weight(term, tf, length)
            last[term] = tf / length
            read[term] = read.get(term, 0) + 1
        open_terms = [t for t in open_terms if read.get(t, 0) == depth - skip]  # a shorter head ended the list
        bound = {t: scorer.bound(t, last[t]) for t in open_terms}
        # Partial sums in any order: a lower bound, compared with a margin.
        partial = sorted((sum(w.values()) for w in seen.values()), reverse=True)
        threshold = partial[n - 1] if len(partial) >= n else 0.0  # the n-th best is at least this
        # A chunk in no head scores at most the open terms' bounds summed: below the threshold, it cannot enter.
        proven = sum(bound.values()) < threshold * (1 - BOUND_MARGIN) - BOUND_MARGIN
        if proven or not open_terms or depth >= MAX_DEPTH:
            break
        skip, depth = depth, min(depth * DEEPER, MAX_DEPTH)
    # A seen chunk is scored exactly unless what its missing open terms could add leaves it below the threshold.
    floor = threshold * (1 - BOUND_MARGIN) - BOUND_MARGIN
    upper = {row: sum(w.values()) + sum(bound[t] for t in open_terms if t not in w) for row, w in seen.items()}
    contenders = {row: w for row, w in seen.items() if upper[row] >= floor}
    if not proven and open_terms:  # the top n is not certain anyway: the likeliest are completed, a bounded step
        contenders = {row: contenders[row] for row in sorted(contenders, key=lambda r: -upper[r])[:RESCORED * n]}
    incomplete = [row for row, w in contenders.items() if any(t not in w for t in open_terms)]
    scorer.look_up(conn, incomplete, contenders)
    known.update(contenders)
    ranked = sorted(((scorer.score(w), row) for row, w in contenders.items()), key=lambda item: (-item[0], item[1]))
    return [(row, score) for score, row in ranked[:n] if score > 0]
