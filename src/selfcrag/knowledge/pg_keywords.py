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
from selfcrag.knowledge.metadata_filter import MetadataFilter

K1, B = BM25().k1, BM25().b  # the directory index's parameters: both backends rank keywords alike
# Postings in order of density, with what a weight needs: reading a term's densest postings is one index range.
# Ties by chunk, so that every plan reads a list in one order and a head read on from an offset misses nothing.
IMPACT_INDEX = """CREATE INDEX IF NOT EXISTS selfcrag_kb_postings_impact ON selfcrag_kb_postings
    (term, (tf::float8 / length) DESC, chunk) INCLUDE (tf, length)"""
# Postings read per term in the first round, the factor each further round reads more, and the most a term reads.
# Two rounds (256, then 4,096): at 1M chunks a quarter of the queries settle at 256 and most of the rest need 4,096,
# so a 1,024 round in between cost more than it saved (heads 14.0 -> 12.3 ms of server CPU a query without it).
FIRST_DEPTH, DEEPER, MAX_DEPTH = 256, 16, 4096
KEPT = 2048  # chunks of a round's heads returned, those that could score the most: the rest are bounded by them
RESCORED = 32  # past MAX_DEPTH, the chunks completed per result asked: those that could score the most
BOUND_MARGIN = 1e-9  # float sums in another order differ in the last bits: a bound must clear them

# A round, in the server: the heads of the terms' lists (`depth` postings each) and their weights (as bm25.py's,
# bounds only: the exact scores are computed in Python). Then each term's count and bound: what a posting it has
# not read can weigh (at a given density a weight grows with tf towards a limit, so the last density read bounds
# the rest; a list read whole bounds nothing). Of the chunks found, the KEPT that could score the most: each one's
# partial score and what it can reach (its partial score plus the bounds of the terms it was not found under).
# The round's verdict is decided there too, so that only the last round returns chunks, and only the contenders:
# the n-th best partial score (the threshold: the n-th best score is at least this), whether the top n is proven
# (a chunk in no head scores at most the bounds summed, one in a head but not kept at most what the last one kept
# can reach: below the threshold, neither can enter the top n), and whether any term's list is still open. The
# last round (proven, every list read whole, or at MAX_DEPTH: %(last)s) returns the kept chunks that can still
# reach the threshold, best first; past MAX_DEPTH without a proof, the RESCORED x n likeliest (a bounded step).
# Rows: (term, NULL, count, bound) per term, (NULL, NULL, threshold, proven) once, (NULL, chunk, partial, reach).


def _F(value: float) -> str:
    """A float8 literal: a bare 2.2 is numeric in SQL, whose arithmetic per posting cost ~20% of a round."""
    return f"{value!r}::float8"


_FLOOR = f"threshold * {_F(1 - BOUND_MARGIN)} - {_F(BOUND_MARGIN)}"  # a threshold, lowered by the float margin
_HEADS = f"""WITH q AS (SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS q(term, idf)),
h AS MATERIALIZED (
    SELECT q.term, p.chunk, p.tf::float8 / p.length AS density,
           q.idf * p.tf * {_F(K1 + 1)} / (p.tf + {_F(K1)} * ({_F(1 - B)} + {_F(B)} * p.length / %(avgdl)s)) AS w
    FROM q CROSS JOIN LATERAL (SELECT chunk, tf, length FROM selfcrag_kb_postings WHERE term = q.term
                               ORDER BY tf::float8 / length DESC, chunk LIMIT %(depth)s) p),
t AS MATERIALIZED (
    SELECT q.term, count(h.chunk) AS n, CASE WHEN count(h.chunk) < %(depth)s THEN 0.0::float8
        ELSE q.idf * {_F(K1 + 1)} / (1 + {_F(K1 * B)} / (min(h.density) * %(avgdl)s)) END AS bound
    FROM q LEFT JOIN h ON h.term = q.term GROUP BY q.term, q.idf),
c AS (SELECT h.chunk, sum(h.w) AS partial, sum(t.bound) AS held FROM h JOIN t ON t.term = h.term GROUP BY h.chunk),
k AS MATERIALIZED (SELECT chunk, partial, partial + (SELECT sum(bound) FROM t) - held AS reach FROM c
                   ORDER BY reach DESC, chunk LIMIT {KEPT}),
v AS MATERIALIZED (SELECT threshold, greatest((SELECT sum(bound) FROM t), CASE WHEN (SELECT count(*) FROM k) = {KEPT}
                                              THEN (SELECT min(reach) FROM k) ELSE 0.0 END) < {_FLOOR} AS proven,
                          EXISTS (SELECT 1 FROM t WHERE n = %(depth)s) AS open
    FROM (SELECT coalesce((SELECT partial FROM k ORDER BY partial DESC LIMIT 1 OFFSET %(n)s - 1), 0.0) AS threshold
         ) AS n_th)
(SELECT term, NULL::bigint, n::float8, bound FROM t)
UNION ALL
(SELECT NULL, NULL, threshold, proven::int FROM v)
UNION ALL
(SELECT NULL, chunk, partial, reach FROM k, v WHERE (proven OR NOT open OR %(last)s) AND reach >= {_FLOOR}
 ORDER BY reach DESC, chunk
 LIMIT (SELECT CASE WHEN proven OR NOT open THEN {KEPT} ELSE {RESCORED} * %(n)s END FROM v))"""
_LOOKUP = ("SELECT chunk, term, tf, length FROM selfcrag_kb_postings "
           "WHERE term = ANY(%(terms)s) AND chunk = ANY(%(rows)s)")


class Scorer:
    """The corpus statistics a query's weights need, read once per query in its snapshot."""

    def __init__(self, conn: Any, terms: list[str]) -> None:
        # One statement (a retrieval's statements each cost a round trip): the totals, and each known term's df.
        rows = conn.execute("SELECT s.chunks, s.tokens, t.term, t.df FROM selfcrag_kb_stats s "
                            "LEFT JOIN selfcrag_kb_terms t ON t.term = ANY(%s)", (terms,)).fetchall()
        chunks, tokens = rows[0][:2]
        self.chunks = int(chunks)  # the knowledge base's size, in this snapshot
        self.avgdl = max(float(tokens) / max(int(chunks), 1), 1e-9)
        dfs = {term: df for _, _, term, df in rows if term is not None}
        # bm25.py's Lucene idf, with math.log as there: the same floats
        self.idf = {t: math.log(1.0 + (int(chunks) - int(df) + 0.5) / (int(df) + 0.5)) for t, df in dfs.items()}
        self.terms = [t for t in terms if t in self.idf]

    def weight(self, term: str, tf: int, length: int) -> float:
        """Okapi BM25's weight of `term` in a chunk: bm25.py's float operations in bm25.py's order."""
        return self.idf[term] * float(tf) * (K1 + 1) / (float(tf) + K1 * (1 - B + B * float(length) / self.avgdl))

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
    depth = min(FIRST_DEPTH, MAX_DEPTH)
    while True:
        counts: dict[str, int] = {}
        proven = False
        contenders: list[int] = []  # the chunks that can still reach the threshold, the likeliest first
        for term, row, value, bound in conn.execute(_HEADS, {
                "terms": scorer.terms, "idf": [scorer.idf[t] for t in scorer.terms], "avgdl": scorer.avgdl,
                "depth": depth, "n": n, "last": depth >= MAX_DEPTH}).fetchall():
            if term is not None:
                counts[term] = int(value)
            elif row is None:
                proven = bool(bound)
            else:
                contenders.append(int(row))
        open_terms = [t for t in scorer.terms if counts[t] == depth]  # a shorter head was the whole list
        if proven or not open_terms or depth >= MAX_DEPTH:  # as the server decided: this round returned the chunks
            break
        depth = min(depth * DEEPER, MAX_DEPTH)
    # The contenders are scored exactly, every term looked up. (Looking them up in batches, the likeliest first, to
    # skip those the n-th best exact score so far rules out, looked up a third as many at 1M chunks but cost the
    # server as much: measured, not kept.)
    weights: dict[int, dict[str, float]] = {}
    scorer.look_up(conn, contenders, weights)  # every term, weighed as bm25.py weighs it
    known.update(weights)
    ranked = sorted(((scorer.score(w), row) for row, w in weights.items()), key=lambda item: (-item[0], item[1]))
    return [(row, score) for score, row in ranked[:n] if score > 0]


def top_among(conn: Any, scorer: Scorer, n: int, known: dict[int, dict[str, float]],
              where: MetadataFilter) -> list[tuple[int, float]]:
    """`top` among the chunks whose metadata matches `where` (the corpus statistics stay the whole knowledge base's,
    as the directory index's do): the matching chunks' postings of the query's terms, summed in the server to pick
    the contenders (twice `n`: float sums in another order differ only in the last bits), then scored exactly."""
    if n <= 0 or not scorer.terms:
        return []
    condition, params = where.sql("c.meta")
    contenders = [int(row) for (row,) in conn.execute(f"""
        WITH q AS (SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS q(term, idf))
        SELECT p.chunk FROM q JOIN selfcrag_kb_postings p ON p.term = q.term
            JOIN selfcrag_kb_chunks c ON c.row = p.chunk
        WHERE {condition}
        GROUP BY p.chunk
        ORDER BY sum(q.idf * p.tf * {_F(K1 + 1)} / (p.tf + {_F(K1)} * ({_F(1 - B)} + {_F(B)} * p.length / %(avgdl)s)))
                 DESC, p.chunk
        LIMIT %(limit)s""", params | {"terms": scorer.terms, "idf": [scorer.idf[t] for t in scorer.terms],
                                      "avgdl": scorer.avgdl, "limit": 2 * n}).fetchall()]
    weights: dict[int, dict[str, float]] = {}
    scorer.look_up(conn, contenders, weights)
    known.update(weights)
    ranked = sorted(((scorer.score(w), row) for row, w in weights.items()), key=lambda item: (-item[0], item[1]))
    return [(row, score) for score, row in ranked[:n] if score > 0]
