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

    def score_all(self, query_tokens: list[str]) -> np.ndarray:
        """The BM25 score of every document (0 for those sharing no term with the query), as one array."""
        found = [t for t in (self.vocab.get(term) for term in dict.fromkeys(query_tokens)) if t is not None]
        if not found:  # a word repeated in the question counts once (dict.fromkeys)
            return np.zeros(len(self.doc_len))
        slices = [slice(self.start[t], self.start[t + 1]) for t in found]
        rows = np.concatenate([self.rows[s] for s in slices])
        weights = np.concatenate([self._weights[s] for s in slices])
        # bincount adds each row's weights in query-term order from 0.0, as the loop before it did: same floats.
        return np.bincount(rows, weights=weights, minlength=len(self.doc_len))

    def scores(self, query_tokens: list[str]) -> dict[int, float]:
        """BM25 score of every document sharing at least one term with the query."""
        dense = self.score_all(query_tokens)
        hits = np.flatnonzero(dense)
        return dict(zip(hits.tolist(), dense[hits].tolist(), strict=True))

    @staticmethod
    def best(scores: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The `n` best (row, score) pairs of a `score_all` array among rows that matched, best first; ties broken
        by row for determinism. argpartition, not a sort of everything: linear in the corpus."""
        matched = int(np.count_nonzero(scores))
        n = min(max(n, 0), matched)
        if n == 0:
            return []
        if n == matched:
            picked = np.flatnonzero(scores)
        else:
            kth = scores[np.argpartition(-scores, n - 1)[n - 1]]
            above = np.flatnonzero(scores > kth)
            picked = np.concatenate([above, np.flatnonzero(scores == kth)[: n - len(above)]])
        picked = picked[np.lexsort((picked, -scores[picked]))]
        return list(zip(picked.tolist(), scores[picked].tolist(), strict=True))

    def top(self, query_tokens: list[str], n: int) -> list[tuple[int, float]]:
        """The `n` best (row, score) pairs, best first; ties broken by row for determinism."""
        return self.best(self.score_all(query_tokens), n)

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
