"""Okapi BM25 over pre-tokenised documents (tokens from `text.keyword_tokens`), held in flat numpy arrays.

Postings are grouped by term, CSR-style: term t's documents are `rows[start[t]:start[t+1]]` (ascending), each with
its term frequency and its BM25 weight precomputed at load. A query gathers its terms' slices and sums them per row
with one `np.bincount`, so it costs time in its postings, not in Python objects: the dict of lists before this took
17 ms per query at 9,200 chunks and grew linearly (benchmarks/retrieval_scale.py measures both).
The weights are computed in the same order of float operations as that version, so the scores are identical.
Persisted as plain arrays (`to_arrays`/`from_arrays`, no pickle), checked before they are believed; the JSON
state of indexes saved before (`from_dict`) still loads.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

FORMAT = 1  # of the legacy JSON state (bm25.json)
# The arrays of a saved BM25 and their dtypes (little-endian, so a file means the same on any machine).
# `top` scores every row of an index up to this size: pruning's bookkeeping costs more there (10k synthetic chunks:
# 0.33 ms a query pruned against 0.15 ms scoring all; 100k: 0.78 against 1.19).
DIRECT_UP_TO = 32_768
# `top`: postings summed by sorting while there are at most this many (or this share of the index), over an
# array the size of the index beyond; and rows scored by lookups up to the same count, by `score_all` beyond.
CANDIDATE_FLOOR, CANDIDATE_SHARE = 4096, 16
# `top`'s threshold: the best rows of each of the query's SAMPLED_TERMS highest-impact terms, SAMPLE_ROWS a term.
SAMPLED_TERMS, SAMPLE_ROWS = 2, 256
SAMPLE_STRIDED = 8  # of a long posting list, the strongest SAMPLE_ROWS among 8 * SAMPLE_ROWS evenly spaced
# Float sums of the same weights in another order can differ in the last bits: a bound must clear the threshold
# by more than that before it prunes.
BOUND_MARGIN = 1e-9
ARRAYS = {"params": "<f8", "doc_len": "<i8", "term_bytes": "|u1", "term_end": "<i8", "start": "<i8",
          "rows": "<i4", "tf": "<i4"}


class BM25:
    def __init__(self, documents: list[list[str]] | None = None, k1: float = 1.5, b: float = 0.75) -> None:
        vocab: dict[str, int] = {}
        term_ids: list[int] = []
        rows: list[int] = []
        tfs: list[int] = []
        doc_len: list[int] = []
        for row, tokens in enumerate(documents or []):
            doc_len.append(len(tokens))
            for term, tf in Counter(tokens).items():
                term_ids.append(vocab.setdefault(term, len(vocab)))
                rows.append(row)
                tfs.append(tf)
        order = np.argsort(np.asarray(term_ids, dtype=np.int64), kind="stable")  # by term; rows stay ascending
        counts = np.bincount(np.asarray(term_ids, dtype=np.int64), minlength=len(vocab))
        self._set(k1, b, list(vocab), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                  np.asarray(rows, dtype=np.int32)[order], np.asarray(tfs, dtype=np.int32)[order],
                  np.asarray(doc_len, dtype=np.int64))

    def _set(self, k1: float, b: float, terms: list[str], start: np.ndarray, rows: np.ndarray, tf: np.ndarray,
             doc_len: np.ndarray) -> None:
        self.k1, self.b = float(k1), float(b)
        self.terms = terms
        self.vocab = {term: i for i, term in enumerate(terms)}
        self.start, self.rows, self.tf, self.doc_len = start, rows, tf, doc_len
        n = len(doc_len)
        df = np.diff(start)
        # The "+1" (Lucene's variant) keeps idf positive: Okapi's original goes negative for a term in more than
        # half the documents, which would punish a chunk for matching a common query word. math.log per term, not
        # np.log: numpy's vectorised log may differ in the last bit, and the scores are meant to be identical.
        self._idf = np.fromiter((math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in df.tolist()), np.float64,
                                len(terms))
        avgdl = max(float(doc_len.sum()) / n, 1e-9) if n else 1.0
        tf64 = tf.astype(np.float64)
        norm = self.k1 * (1 - self.b + self.b * doc_len[rows].astype(np.float64) / avgdl)
        self._weights = np.repeat(self._idf, df) * tf64 * (self.k1 + 1) / (tf64 + norm)
        # Each term's largest weight: what it can add to any document's score at most (`top` prunes with it).
        self._bound = np.maximum.reduceat(self._weights, start[:-1]) if len(terms) else np.zeros(0)

    def __len__(self) -> int:
        return len(self.doc_len)

    def idf(self, term: str) -> float:
        t = self.vocab.get(term)
        n = len(self.doc_len)
        return float(self._idf[t]) if t is not None else math.log(1.0 + (n + 0.5) / 0.5)

    def contains(self, term: str, row: int) -> bool:
        t = self.vocab.get(term)
        if t is None:
            return False
        postings = self.rows[self.start[t] : self.start[t + 1]]
        at = int(np.searchsorted(postings, row))
        return at < len(postings) and int(postings[at]) == row

    def _term_ids(self, query_tokens: list[str]) -> list[int]:
        """The query's known terms in query order, each once (a word repeated in the question counts once)."""
        return [t for t in (self.vocab.get(term) for term in dict.fromkeys(query_tokens)) if t is not None]

    def score_all(self, query_tokens: list[str]) -> np.ndarray:
        """The BM25 score of every document (0 for those sharing no term with the query), as one array."""
        found = self._term_ids(query_tokens)
        if not found:
            return np.zeros(len(self.doc_len))
        slices = [slice(self.start[t], self.start[t + 1]) for t in found]
        rows = np.concatenate([self.rows[s] for s in slices])
        weights = np.concatenate([self._weights[s] for s in slices])
        # bincount adds each row's weights in query-term order from 0.0, as the loop before it did: same floats.
        return np.bincount(rows, weights=weights, minlength=len(self.doc_len))

    def score_rows(self, query_tokens: list[str], rows: np.ndarray | list[int]) -> np.ndarray:
        """`score_all(query_tokens)[rows]` without scoring the whole index: each term's postings are looked up
        for the given rows only. The same floats: each row's weights added from 0.0 in query-term order."""
        return self._score_rows(self._term_ids(query_tokens), np.asarray(rows, dtype=np.int64))

    def _score_rows(self, found: list[int], rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows))
        if not len(rows):
            return out
        order = np.argsort(rows, kind="stable")  # searchsorted walks sorted keys fastest
        ordered = rows[order]
        for t in found:
            begin, end = int(self.start[t]), int(self.start[t + 1])
            at = np.searchsorted(self.rows[begin:end], ordered)
            inside = at < end - begin
            hit = np.zeros(len(rows), dtype=bool)
            hit[inside] = self.rows[begin + at[inside]] == ordered[inside]
            out[order[hit]] += self._weights[begin + at[hit]]
        return out

    def scores(self, query_tokens: list[str]) -> dict[int, float]:
        """BM25 score of every document sharing at least one term with the query."""
        dense = self.score_all(query_tokens)
        hits = np.flatnonzero(dense)
        return dict(zip(hits.tolist(), dense[hits].tolist(), strict=True))

    @staticmethod
    def best(scores: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The `n` best (row, score) pairs of a `score_all` array among rows that matched, best first; ties broken
        by row for determinism. argpartition, not a sort of everything: linear in the corpus."""
        rows = np.flatnonzero(scores)
        return BM25._best_of(rows, scores[rows], n)

    @staticmethod
    def _best_of(rows: np.ndarray, values: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The `n` best of `rows` (ascending) by their `values`, best first, ties by row."""
        n = min(max(n, 0), len(rows))
        if n == 0:
            return []
        if n < len(rows):
            kth = values[np.argpartition(-values, n - 1)[n - 1]]
            above = np.flatnonzero(values > kth)
            keep = np.concatenate([above, np.flatnonzero(values == kth)[: n - len(above)]])
            rows, values = rows[keep], values[keep]
        order = np.lexsort((rows, -values))
        return list(zip(rows[order].tolist(), values[order].tolist(), strict=True))

    def top(self, query_tokens: list[str], n: int) -> list[tuple[int, float]]:
        """The `n` best (row, score) pairs, best first; ties broken by row for determinism: the same pairs as
        `best(score_all(...), n)`, found without touching most postings of the query's common words.

        Pruning in the manner of MaxScore. A lower bound on the n-th best score comes first: the n-th best exact
        score among the rows where the query's highest-impact terms weigh most. A term's largest weight bounds
        what it adds to any row, so a row holding only low-impact terms whose bounds sum below that threshold
        cannot reach the top n: only the postings of the other ("essential") terms are summed. Rows whose partial
        sum, plus all the low-impact terms could add, still reaches the threshold are scored exactly (every term,
        in query order: `_score_rows`) and ranked. On the synthetic 1M-chunk index a query touches a few percent
        of the postings `score_all` sums (benchmarks/retrieval_scale.py)."""
        found = self._term_ids(query_tokens)
        if n <= 0 or not found:
            return []
        if len(self.doc_len) <= DIRECT_UP_TO:
            return self.best(self.score_all(query_tokens), n)
        impact = sorted(found, key=lambda t: -float(self._bound[t]))
        threshold = self._sampled_threshold(found, impact[:SAMPLED_TERMS], n)
        cut, rest = len(impact), 0.0
        while cut > 1 and (rest + float(self._bound[impact[cut - 1]])) * (1 + BOUND_MARGIN) < threshold:
            cut -= 1
            rest += float(self._bound[impact[cut]])
        essential = set(impact[:cut])
        slices = [self._slice(t) for t in found if t in essential]  # in query order: see the dense case
        size = sum(s.stop - s.start for s in slices)
        pruned = sum(self._slice(t).stop - self._slice(t).start for t in impact[cut:])
        budget = max(CANDIDATE_FLOOR, len(self.doc_len) // CANDIDATE_SHARE)
        if size > budget and pruned < size:  # pruning saves little: exact scores of every row
            return self._best_above(self.score_all(query_tokens), threshold, n)
        rows = np.concatenate([self.rows[s] for s in slices])
        weights = np.concatenate([self._weights[s] for s in slices])
        if size <= budget:  # few postings: summed per distinct row
            rows, inverse = np.unique(rows, return_inverse=True)
            partial = np.bincount(inverse, weights=weights, minlength=len(rows))
        else:  # many: one pass over an array the size of the index costs less than sorting them
            dense = np.bincount(rows, weights=weights, minlength=len(self.doc_len))
            rows = np.flatnonzero(dense)
            partial = dense[rows]
        # A row's partial sum plus all the pruned terms can add must reach the threshold. Partial sums are added
        # in another order than the exact scores (last bits may differ): the margin keeps a row on the edge.
        floor = threshold - rest * (1 + BOUND_MARGIN) - BOUND_MARGIN * threshold
        if floor > 0:
            rows = rows[partial >= floor]
        if len(rows) > budget:  # a weak threshold: exact scores of everything cost less than lookups
            return self._best_above(self.score_all(query_tokens), threshold, n)
        return self._best_of(rows, self._score_rows(found, rows), n)

    def top_among(self, query_tokens: list[str], rows: np.ndarray, n: int) -> list[tuple[int, float]]:
        """`top`, among `rows` (ascending) only: the `n` best of them that share a term with the query, best first,
        ties by row (a metadata filter's candidates: retrieval.HybridIndex.retrieve)."""
        scores = self.score_rows(query_tokens, rows)
        matched = np.flatnonzero(scores)
        return self._best_of(np.asarray(rows)[matched], scores[matched], n)

    def _slice(self, term: int) -> slice:
        return slice(int(self.start[term]), int(self.start[term + 1]))

    def _best_above(self, scores: np.ndarray, threshold: float, n: int) -> list[tuple[int, float]]:
        """`best(scores, n)` knowing that the n-th best score is at least `threshold`."""
        rows = np.flatnonzero(scores >= threshold) if threshold > 0 else np.flatnonzero(scores)
        return self._best_of(rows, scores[rows], n)

    def _sampled_threshold(self, found: list[int], terms: list[int], n: int) -> float:
        """The n-th best exact score among the rows where each of `terms` weighs most (0 if fewer than n rows):
        at most the n-th best score of the whole index, so a safe threshold to prune with."""
        picked = []
        for t in terms:
            begin, end = int(self.start[t]), int(self.start[t + 1])
            # A long posting list is looked at every `stride`-th posting: the threshold stays a true lower bound
            # (exact scores of real rows), found in time independent of the term's frequency.
            stride = max(1, (end - begin) // (SAMPLE_STRIDED * SAMPLE_ROWS))
            seen = np.arange(begin, end, stride)
            if len(seen) > SAMPLE_ROWS:
                seen = seen[np.argpartition(-self._weights[seen], SAMPLE_ROWS - 1)[:SAMPLE_ROWS]]
            picked.append(self.rows[seen])
        sample = np.unique(np.concatenate(picked)).astype(np.int64)
        if len(sample) < n:
            return 0.0
        scored = self._score_rows(found, sample)
        return float(np.partition(scored, len(scored) - n)[len(scored) - n])

    # --- persistence ---------------------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        encoded = [term.encode("utf-8", "surrogatepass") for term in self.terms]
        return {
            "params": np.asarray([self.k1, self.b], dtype=ARRAYS["params"]),
            "doc_len": self.doc_len.astype(ARRAYS["doc_len"]),
            "term_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            "term_end": np.cumsum([len(e) for e in encoded], dtype=np.int64).astype(ARRAYS["term_end"]),
            "start": self.start.astype(ARRAYS["start"]),
            "rows": self.rows.astype(ARRAYS["rows"]),
            "tf": self.tf.astype(ARRAYS["tf"]),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BM25:
        """The arrays `to_arrays` wrote (dtypes already checked by the reader), checked for consistency first: a
        damaged file gives a ValueError naming the array, not an IndexError at the first query."""
        for name, dtype in ARRAYS.items():
            if name not in arrays or arrays[name].dtype != np.dtype(dtype) or arrays[name].ndim != 1:
                raise ValueError(f'"{name}" must be a one-dimensional {np.dtype(dtype).name} array')
        params, doc_len, term_bytes, term_end, start, rows, tf = (arrays[name] for name in ARRAYS)
        if len(params) != 2:
            raise ValueError('"params" must hold k1 and b')
        k1, b = params.tolist()
        _check_params(k1, b)
        if (doc_len < 0).any():
            raise ValueError('"doc_len" has a negative length')
        vocabulary = len(term_end)
        if len(start) != vocabulary + 1 or start[0] != 0 or start[-1] != len(rows):
            raise ValueError(f'"start" must hold {vocabulary + 1} offsets from 0 to {len(rows)}')
        if (np.diff(start) <= 0).any():
            raise ValueError('"start": every term needs at least one posting, in order')
        if len(tf) != len(rows):
            raise ValueError(f'"tf" has {len(tf)} entries for {len(rows)} postings')
        if len(rows) and (rows.min() < 0 or rows.max() >= len(doc_len)):
            raise ValueError(f'"rows" holds a row out of range ({len(doc_len)} documents)')
        rising = np.diff(rows) > 0
        rising[start[1:-1] - 1] = True  # a new term starts over from a low row
        if not rising.all():
            raise ValueError('"rows": a row is repeated or out of order within a term')
        if len(tf) and tf.min() < 1:
            raise ValueError('"tf" holds a frequency below 1')
        if not np.array_equal(np.bincount(rows, weights=tf, minlength=len(doc_len)), doc_len):
            raise ValueError('"doc_len" does not match the term frequencies')
        bounds = np.concatenate([[0], term_end])
        if (np.diff(bounds) <= 0).any() or bounds[-1] != len(term_bytes):
            raise ValueError(f'"term_end" must rise to {len(term_bytes)} (the bytes of the terms)')
        blob = term_bytes.tobytes()
        try:
            terms = [blob[s:e].decode("utf-8", "surrogatepass") for s, e in zip(bounds[:-1].tolist(),
                                                                                 bounds[1:].tolist(), strict=True)]
        except UnicodeDecodeError:
            raise ValueError('"term_bytes" is not UTF-8') from None
        if len(set(terms)) != len(terms):
            raise ValueError('"term_bytes" names a term twice')
        bm25 = cls.__new__(cls)
        bm25._set(k1, b, terms, start.astype(np.int64), rows.astype(np.int32), tf.astype(np.int32),
                  doc_len.astype(np.int64))
        return bm25

    @classmethod
    def from_dict(cls, state: Any) -> BM25:
        """The JSON state (bm25.json) of an index saved before the arrays, checked first: a damaged file gives a
        ValueError saying where, not a KeyError here or an IndexError at the first query."""
        if not isinstance(state, dict):
            raise ValueError("expected a JSON object")
        if state.get("format") != FORMAT:
            raise ValueError(f"unsupported BM25 state format {state.get('format')!r}")
        _check_params(state.get("k1"), state.get("b"))
        doc_len = state.get("doc_len")
        if not isinstance(doc_len, list) or not all(_count(n) for n in doc_len):
            raise ValueError('"doc_len" must be a list of non-negative integers')
        postings = state.get("postings")
        if not isinstance(postings, dict):
            raise ValueError('"postings" must be an object')
        count = len(doc_len)
        terms, starts, rows, tfs = [], [0], [], []
        for term, plist in postings.items():
            if not isinstance(plist, list):
                raise ValueError(f'"postings" {term!r} must be a list')
            if not plist:
                continue  # a term no document holds scores nothing
            last = -1
            for entry in plist:
                if not (isinstance(entry, list) and len(entry) == 2 and _count(entry[0]) and _count(entry[1])):
                    raise ValueError(f'"postings" {term!r}: {str(entry)[:40]} is not a [row, frequency] pair')
                row, tf = entry
                if row >= count:
                    raise ValueError(f'"postings" {term!r}: row {row} is out of range ({count} documents)')
                if row <= last:  # the old `add` wrote rows in ascending order, once each
                    raise ValueError(f'"postings" {term!r}: row {row} is repeated or out of order')
                if tf == 0:
                    raise ValueError(f'"postings" {term!r}: row {row} has frequency 0')
                last = row
                rows.append(row)
                tfs.append(tf)
            terms.append(term)
            starts.append(len(rows))
        bm25 = cls.__new__(cls)
        bm25._set(float(state["k1"]), float(state["b"]), terms, np.asarray(starts, dtype=np.int64),
                  np.asarray(rows, dtype=np.int32), np.asarray(tfs, dtype=np.int32), np.asarray(doc_len, np.int64))
        return bm25


def _check_params(k1: object, b: object) -> None:
    for name, value, top, wanted in (("k1", k1, math.inf, "a non-negative number"),
                                     ("b", b, 1.0, "a number from 0 to 1")):  # b > 1: long documents score < 0
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not (number and 0 <= value <= top):  # type: ignore[operator]
            raise ValueError(f'"{name}" must be {wanted}')


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
