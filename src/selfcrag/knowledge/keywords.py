"""The directory index's keyword half: tantivy proposes, a memory-mapped forward index scores (issue 46).

Scores are bm25.py's to the last bit (same k1, b, Lucene idf, length normalisation, float operations in the same
order, each row's weights summed in query-term order from 0.0); bm25.py stays the reference they are tested
against. What changed is where the postings live and who walks them:

- `tantivy/`: a tantivy index of the project's own terms (`text.keyword_tokens`, joined by spaces and cut again by
  tantivy's whitespace tokenizer, so tantivy never tokenises text itself), one document per chunk with its row in
  a fast field. Rust, memory-mapped, block-max WAND: it finds a query's best candidates without summing the long
  posting lists of common words, which numpy had to gather (bm25.py at 1M chunks: 2.2-2.4x tantivy's p50, +960 MB).
- the forward index: each chunk's term ids (ascending) and frequencies, `.npy` files opened memory-mapped, so a
  chunk's exact score costs a few lookups and loading costs no postings in memory.

tantivy's own BM25 is not ours (k1 = 1.2, lengths quantised to a byte, float32), so its ranking only proposes:
`top(n)` rescores tantivy's best 4n candidates exactly and returns the best n of them, each with bm25.py's exact
score. Up to EXACT_UP_TO chunks tantivy returns every chunk holding a query term, so `top` is bm25.py's `top`.
Beyond, it is bm25.py's top n unless a chunk tantivy ranked below its 4n-th beats bm25.py's n-th; `ranked` says
when a bound proves that none can: each per-term weight of ours is at most RATIO times tantivy's (see RATIO), so
such a chunk scores at most RATIO times the last candidate's tantivy score. The bound is loose (it proved 120 of
300 SQuAD questions at 1M chunks), the candidates are not: benchmarks/keyword_engine.py counts how often `top`
equals bm25.py's top 20 and how often it is proven. Asking tantivy again for more until proven kept it exact and
cost 2.6x tantivy's p50 at 1M chunks, against 1.4x without (the same run).
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import mmap
import os
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from selfcrag.errors import DamagedFile

FORMAT = 1
DIRECTORY = "keywords"  # in an index directory
TANTIVY = "tantivy"  # the tantivy index, in DIRECTORY
META = "keywords.json"
K1, B = 1.5, 0.75  # bm25.py's defaults: the scores must be its scores
# tantivy's Bm25Weight: k1 = 1.2, b = 0.75 (fixed), Lucene idf as ours, a document's length stored as a one-byte
# code that decodes to at most its real length, the average length from the real token counts. Per term our
# weight / tantivy's = (K1 + 1) / (1.2 + 1) * (tf + 1.2 N') / (tf + K1 N), N = 1 - b + b * len / avglen and N'
# the same with the decoded length (N' <= N): the second factor is at most 1 since 1.2 <= K1. float32 rounding in
# tantivy's score is covered by the margin.
TANTIVY_K1 = 1.2
RATIO = (K1 + 1) / (TANTIVY_K1 + 1) * (1 + 1e-4)
EXACT_UP_TO = 4096  # chunks: up to this size `top` rescores every chunk holding a query term (exact by definition)
CANDIDATES, MIN_CANDIDATES = 4, 64  # beyond: tantivy's best 4n (at least 64) are rescored
PREAD_UP_TO = 4096  # rows read with one pread each; more (a metadata filter's) through the mapping
# A chunk's postings: term id and frequency packed in one uint64 (term << 16 | tf), so scoring a chunk touches one
# page of the mapped file, not two (at 1M chunks, two arrays read ahead grew RSS by 387 MB over 300 questions). Not
# a 6-byte record: numpy copies a whole unaligned array before indexing it, which read every page.
POSTING, TF_BITS = np.dtype("<u8"), 16
# The arrays (little-endian: a file means the same on any machine) and their lengths: "rows" per chunk, "rows+1"
# (offsets), "postings", "terms" (per distinct term) or "bytes" (of the terms' UTF-8).
ARRAYS: dict[str, tuple[np.dtype, str]] = {
    "doc_len": (np.dtype("<i4"), "rows"), "start": (np.dtype("<i8"), "rows+1"), "postings": (POSTING, "postings"),
    "df": (np.dtype("<i4"), "terms"), "term_end": (np.dtype("<i8"), "terms"), "term_bytes": (np.dtype("|u1"), "bytes"),
    # tantivy's documents in its (segment, document) order: where each segment starts, and each one's row
    "segment_start": (np.dtype("<i8"), "segments+1"), "doc_rows": (np.dtype("<i8"), "rows")}
WRITER_HEAP = 256_000_000


def _analyzer() -> Any:
    import tantivy

    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()


def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("t", tokenizer_name="terms", index_option="freq")  # no positions: no phrase queries
    builder.add_unsigned_field("row", fast=True)
    return builder.build()


class _Terms:
    """The vocabulary, sorted, as one UTF-8 blob and end offsets (memory-mapped): `bisect` finds a term in ~20
    probes without a dict of every term in memory."""

    def __init__(self, blob: np.ndarray, ends: np.ndarray) -> None:
        self.blob, self.ends = blob, ends
        self._bytes = memoryview(blob.data)  # slicing a memoryview costs a tenth of slicing the array
        # Questions share their common words: the last 65,536 looked up are remembered (a few MB at most).
        self._cached = functools.lru_cache(maxsize=65_536)(self._id)

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, i: int) -> str:
        begin = int(self.ends[i - 1]) if i else 0
        return str(self._bytes[begin : int(self.ends[i])], "utf-8", "surrogatepass")

    def id(self, term: str) -> int | None:
        return self._cached(term)

    def _id(self, term: str) -> int | None:
        at = bisect.bisect_left(self, term)
        return at if at < len(self) and self[at] == term else None


class Keywords:
    """BM25 over one index's chunks (rows), with bm25.BM25's query methods; `open` a directory `build` wrote."""

    def __init__(self, directory: Path, arrays: dict[str, np.ndarray], index: Any) -> None:
        self.directory = directory
        self.k1, self.b = K1, B
        self.doc_len, self.start, self.postings, self.df = (arrays[n] for n in ("doc_len", "start", "postings", "df"))
        self.segment_start, self.doc_rows = arrays["segment_start"], arrays["doc_rows"]
        self.terms = _Terms(arrays["term_bytes"], arrays["term_end"])
        n = len(self.doc_len)
        avgdl = max(float(self.doc_len.sum(dtype=np.int64)) / n, 1e-9) if n else 1.0
        # bm25.py's `norm`, per chunk: the same float operations, so the same bits
        self._norm = self.k1 * (1 - self.b + self.b * self.doc_len.astype(np.float64) / avgdl)
        self._index = index
        self._searcher = index.searcher()
        self._file: int | None = None
        if hasattr(os, "pread"):  # not on Windows: there the mapping serves every read
            self._file = os.open(directory / "postings.npy", os.O_RDONLY)
            weakref.finalize(self, os.close, self._file)
            self._data_offset = _data_offset(directory / "postings.npy")

    def __len__(self) -> int:
        return len(self.doc_len)

    # --- writing ------------------------------------------------------------------------------------

    @classmethod
    def build(cls, documents: list[list[str]], directory: Path) -> Keywords:
        """Write the keyword index of `documents` (row i: the terms of chunk i) into `directory` (new), and open it."""
        import tantivy

        directory.mkdir(parents=True)
        vocab: dict[str, int] = {}
        ids: list[int] = []
        tfs: list[int] = []
        lengths = np.zeros(len(documents), dtype=np.int64)
        counts = np.zeros(len(documents), dtype=np.int64)
        for row, tokens in enumerate(documents):
            lengths[row] = len(tokens)
            counted = Counter(tokens)
            counts[row] = len(counted)
            for term, tf in counted.items():
                ids.append(vocab.setdefault(term, len(vocab)))
                tfs.append(tf)
        terms = sorted(vocab)  # code-point order: `_Terms.id` bisects it
        rank = np.empty(len(terms), dtype=np.int64)
        rank[[vocab[t] for t in terms]] = np.arange(len(terms))
        term_ids = rank[np.asarray(ids, dtype=np.int64)]
        owner = np.repeat(np.arange(len(documents), dtype=np.int64), counts)
        order = np.lexsort((term_ids, owner))  # by chunk, then term: `contains` bisects a chunk's terms
        frequencies = np.asarray(tfs, dtype=np.int64)[order]
        if len(frequencies) and frequencies.max() > np.iinfo(np.uint16).max:
            raise ValueError("a chunk repeats a term more than 65,535 times")  # chunks are a few KB: impossible
        encoded = [t.encode("utf-8", "surrogatepass") for t in terms]
        postings = (term_ids[order].astype(np.uint64) << np.uint64(TF_BITS)) | frequencies.astype(np.uint64)
        arrays: dict[str, np.ndarray] = {"doc_len": lengths, "start": np.concatenate([[0], np.cumsum(counts)]),
                  "postings": postings, "df": np.bincount(term_ids, minlength=len(terms)),
                  "term_end": np.cumsum([len(e) for e in encoded], dtype=np.int64),
                  "term_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8)}
        for name, (dtype, _) in list(ARRAYS.items())[:-2]:  # the last two once tantivy has committed
            np.save(directory / f"{name}.npy", np.ascontiguousarray(arrays[name], dtype=dtype))
        (directory / TANTIVY).mkdir()
        index = tantivy.Index(_schema(), path=str(directory / TANTIVY), reuse=False)
        index.register_tokenizer("terms", _analyzer())
        writer = index.writer(WRITER_HEAP, num_threads=min(4, os.cpu_count() or 1))
        for row, tokens in enumerate(documents):
            doc = tantivy.Document()
            doc.add_text("t", " ".join(tokens))
            doc.add_unsigned("row", row)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        segment_start, doc_rows = _doc_rows(index.searcher(), len(documents))
        np.save(directory / "segment_start.npy", segment_start.astype("<i8"))
        np.save(directory / "doc_rows.npy", doc_rows.astype("<i8"))
        meta = {"format": FORMAT, "k1": K1, "b": B, "rows": len(documents), "postings": len(frequencies),
                "terms": len(terms), "bytes": len(arrays["term_bytes"]), "segments": len(segment_start) - 1}
        (directory / META).write_text(json.dumps(meta) + "\n")
        return cls.open(directory, len(documents))

    # --- reading ------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, rows: int) -> Keywords:
        """The keyword index in `directory`, for `rows` chunks; every array checked against the others first (a
        DamagedFile naming the file), none read into memory but the chunk lengths."""
        import tantivy

        where = f"{DIRECTORY}/{META}"
        try:
            meta = json.loads((directory / META).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DamagedFile(f"{where}: unreadable ({type(exc).__name__})") from None
        sizes = {"rows": rows, "rows+1": rows + 1}
        segments = meta.get("segments") if isinstance(meta, dict) else None
        sizes["segments+1"] = segments + 1 if isinstance(segments, int) and not isinstance(segments, bool) else -1
        for name in ("postings", "terms", "bytes", "segments"):
            value = meta.get(name) if isinstance(meta, dict) else None
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise DamagedFile(f'{where}: "{name}" must be a count')
            sizes[name] = value
        if meta.get("format") != FORMAT or meta.get("k1") != K1 or meta.get("b") != B or meta.get("rows") != rows:
            raise DamagedFile(f"{where}: not format {FORMAT} with k1 {K1}, b {B} for {rows} chunks")
        arrays = {name: _array(directory, name, dtype, sizes[size]) for name, (dtype, size) in ARRAYS.items()}
        _check(arrays)
        try:
            index = tantivy.Index.open(str(directory / TANTIVY))
            index.register_tokenizer("terms", _analyzer())
            searcher = index.searcher()
        except (OSError, ValueError) as exc:
            raise DamagedFile(f"{DIRECTORY}/{TANTIVY}: unreadable ({' '.join(str(exc).split())[:120]})") from None
        if (searcher.num_docs, searcher.num_segments) != (rows, sizes["segments"]):
            raise DamagedFile(f"{DIRECTORY}/{TANTIVY}: {searcher.num_docs} documents in {searcher.num_segments} "
                              f"segments for {rows} chunks in {sizes['segments']}")
        return cls(directory, arrays, index)

    # --- queries ------------------------------------------------------------------------------------

    def term_id(self, term: str) -> int | None:
        return self.terms.id(term)

    def knows(self, term: str, rows: np.ndarray | None = None) -> bool:
        """Whether any chunk (of `rows`, if given) holds `term`."""
        t = self.terms.id(term)
        if t is None or rows is None:
            return t is not None
        ids, _, _ = self._gather(np.asarray(rows, dtype=np.int64))
        return bool((ids == t).any())

    def contains(self, term: str, row: int) -> bool:
        t = self.terms.id(term)
        if t is None:
            return False
        held = self._postings_of(np.asarray([row], dtype=np.int64))[0] >> np.uint64(TF_BITS)
        at = int(np.searchsorted(held, t))
        return at < len(held) and int(held[at]) == t

    def _found(self, query_tokens: list[str]) -> list[tuple[str, int, float]]:
        """(term, id, idf) of the query's known terms in query order, each once, idf as bm25.py computes it."""
        n = len(self.doc_len)
        found = []
        for term in dict.fromkeys(query_tokens):
            t = self.terms.id(term)
            if t is not None:
                d = int(self.df[t])
                found.append((term, t, math.log(1.0 + (n - d + 0.5) / (d + 0.5))))
        return found

    def _gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The forward postings of `rows`: (term ids, frequencies, position in `rows` of each)."""
        found, lengths = self._postings_of(rows)
        owner = np.repeat(np.arange(len(rows)), lengths)
        return found >> np.uint64(TF_BITS), found & np.uint64((1 << TF_BITS) - 1), owner

    def _postings_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The packed postings of `rows`, end to end, and how many each row has. Read with pread, not through the
        mapping: a page fault maps pages around it too (the kernel's fault-around, whatever madvise says),
        so at 1M chunks 300 questions grew RSS by 487 MB of mapped file. Many rows (a filter's): the mapping."""
        begin, end = self.start[rows], self.start[rows + 1]
        lengths = end - begin
        if self._file is None or len(rows) > PREAD_UP_TO:
            offsets = np.cumsum(lengths) - lengths
            return self.postings[np.arange(int(lengths.sum())) - np.repeat(offsets - begin, lengths)], lengths
        fd, at, size = self._file, self._data_offset, POSTING.itemsize
        data = b"".join([os.pread(fd, size * (e - b), at + size * b) for b, e in zip(begin.tolist(), end.tolist(),
                                                                                      strict=True)])
        if len(data) != size * int(lengths.sum()):
            raise DamagedFile(f"{DIRECTORY}/postings.npy: shorter than when it was opened")
        return np.frombuffer(data, dtype=POSTING), lengths

    def score_rows(self, query_tokens: list[str], rows: np.ndarray | list[int]) -> np.ndarray:
        """bm25.BM25.score_rows: the exact scores of `rows`, from their forward postings only."""
        return self._score(self._found(query_tokens), np.asarray(rows, dtype=np.int64))

    def _score(self, found: list[tuple[str, int, float]], rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows))
        if not len(rows) or not found:
            return out
        ids, tfs, owner = self._gather(rows)
        for _, t, idf in found:  # in query-term order, from 0.0: bm25.py's sums
            hit = ids == t
            who = owner[hit]
            tf = tfs[hit].astype(np.float64)
            out[who] += idf * tf * (self.k1 + 1) / (tf + self._norm[rows[who]])
        return out

    def top(self, query_tokens: list[str], n: int) -> list[tuple[int, float]]:
        """The `n` best (row, score) pairs, best first, ties by row: bm25.BM25.top's pairs, proven or measured (see
        the module doc)."""
        return self.ranked(query_tokens, n)[0]

    def ranked(self, query_tokens: list[str], n: int) -> tuple[list[tuple[int, float]], bool]:
        """`top`, and whether the bound proves it is bm25.py's top n (always, up to EXACT_UP_TO chunks)."""
        import tantivy

        found = self._found(query_tokens)
        if n <= 0 or not found:
            return [], True
        schema = self._index.schema
        parts = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "t", term, index_option="freq"))
                 for term, _, _ in found]
        query = parts[0][1] if len(parts) == 1 else tantivy.Query.boolean_query(parts)
        limit = len(self.doc_len) if len(self.doc_len) <= EXACT_UP_TO else max(CANDIDATES * n, MIN_CANDIDATES)
        hits = self._searcher.search(query, limit, count=False).hits
        rows = np.sort(self._rows_of(hits))
        best = _best_of(rows, self._score(found, rows), n)
        # every chunk holding a query term is among the candidates, or none that tantivy ranked lower can reach
        # the n-th best score
        proven = len(hits) < limit or (len(best) == n and best[-1][1] > RATIO * float(hits[-1][0]))
        return best, proven

    def _rows_of(self, hits: list[Any]) -> np.ndarray:
        """The rows of tantivy's hits, from their (segment, document) addresses: the table build() made, as
        reading the row's fast field back costs 2 us a hit (0.16 ms of a query at 1M chunks)."""
        segment = np.fromiter((address.segment_ord for _, address in hits), np.int64, len(hits))
        doc = np.fromiter((address.doc for _, address in hits), np.int64, len(hits))
        if len(hits) and ((segment >= len(self.segment_start) - 1).any()
                          or (doc >= np.diff(self.segment_start)[segment]).any()):
            raise DamagedFile(f"{DIRECTORY}/segment_start.npy: does not match the tantivy index")
        return self.doc_rows[self.segment_start[segment] + doc]

    def top_among(self, query_tokens: list[str], rows: np.ndarray, n: int) -> list[tuple[int, float]]:
        """bm25.BM25.top_among: the `n` best of `rows` (ascending) that share a term with the query."""
        rows = np.asarray(rows, dtype=np.int64)
        scores = self.score_rows(query_tokens, rows)
        matched = np.flatnonzero(scores)
        return _best_of(rows[matched], scores[matched], n)


def _best_of(rows: np.ndarray, values: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The `n` best of `rows` (ascending) by `values` (0: not matched, dropped), best first, ties by row."""
    from selfcrag.knowledge.bm25 import BM25

    kept = np.flatnonzero(values)
    return BM25._best_of(rows[kept], values[kept], n)


def _array(directory: Path, name: str, dtype: np.dtype, length: int) -> np.ndarray:
    where = f"{DIRECTORY}/{name}.npy"
    try:
        array = np.load(directory / f"{name}.npy", mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:  # missing, not an array, or shorter than its header claims
        raise DamagedFile(f"{where}: unreadable ({' '.join(str(exc).split())[:120]})") from None
    if array.dtype != dtype or array.ndim != 1 or len(array) != length:
        raise DamagedFile(f"{where}: must be {length:,} values of {dtype}, not {len(array):,} of {array.dtype}")
    if isinstance(array, np.memmap) and hasattr(mmap, "MADV_RANDOM"):  # no readahead (fault-around still maps more)
        array._mmap.madvise(mmap.MADV_RANDOM)  # type: ignore[attr-defined]
    return np.asarray(array)  # a plain array over the mapped file: indexing an np.memmap costs ~4 us more a call


def _doc_rows(searcher: Any, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(where each segment starts, the row of each document in segment order) of a committed index."""
    import tantivy

    hits = searcher.search(tantivy.Query.all_query(), max(rows, 1), count=False, order_by_field="row",
                           order=tantivy.Order.Asc).hits
    segment = np.fromiter((address.segment_ord for _, address in hits), np.int64, len(hits))
    doc = np.fromiter((address.doc for _, address in hits), np.int64, len(hits))
    sizes = np.zeros(searcher.num_segments, dtype=np.int64)
    np.maximum.at(sizes, segment, doc + 1)
    start = np.concatenate([[0], np.cumsum(sizes)])
    doc_rows = np.full(int(start[-1]), -1, dtype=np.int64)
    doc_rows[start[segment] + doc] = np.asarray([key for key, _ in hits], dtype=np.int64)
    return start, doc_rows


def _data_offset(path: Path) -> int:
    """Where the array's values start in its .npy file (after the header)."""
    with path.open("rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        read(f)
        return f.tell()


def _check(arrays: dict[str, np.ndarray]) -> None:
    """What a query relies on, in time linear in the chunks and the terms (not the postings: a damaged term id or
    frequency can only mis-score, never index out of range, since they are compared and multiplied, never used
    as offsets)."""
    start, doc_len, term_end = arrays["start"], arrays["doc_len"], arrays["term_end"]
    if start[0] != 0 or start[-1] != len(arrays["postings"]) or (np.diff(start) < 0).any():
        raise DamagedFile(f"{DIRECTORY}/start.npy: offsets must rise from 0 to {len(arrays['postings'])}")
    if (doc_len < 0).any():
        raise DamagedFile(f"{DIRECTORY}/doc_len.npy: a negative length")
    if len(term_end) and (term_end[-1] != len(arrays["term_bytes"]) or (np.diff(term_end) <= 0).any()
                          or term_end[0] <= 0):
        raise DamagedFile(f"{DIRECTORY}/term_end.npy: must rise to {len(arrays['term_bytes'])} (the terms' bytes)")
    if (arrays["df"] < 1).any():
        raise DamagedFile(f"{DIRECTORY}/df.npy: a term in no chunk")
    segments, doc_rows = arrays["segment_start"], arrays["doc_rows"]
    if segments[0] != 0 or segments[-1] != len(doc_rows) or (np.diff(segments) < 0).any():
        raise DamagedFile(f"{DIRECTORY}/segment_start.npy: offsets must rise from 0 to {len(doc_rows)}")
    if len(doc_rows) and (doc_rows.min() < 0 or doc_rows.max() >= len(doc_rows)):
        raise DamagedFile(f"{DIRECTORY}/doc_rows.npy: a row out of range")
