"""The directory index's keyword engine against bm25.py and bare tantivy, on real text at 100k-1M chunks (issue 46).

    .venv/bin/python benchmarks/keyword_engine.py [--sizes 100000,1000000] [--queries 300]

Corpus: the real passages on disk (the SQuAD 2.0 dev set's 1,204 paragraphs and the HotpotQA, PopQA and HaluEval
corpora under ../shared/datasets/) cut by the project's own tokenisation (`text.keyword_tokens`) into one stream of
terms; chunk i is a window of 30-95 consecutive terms (mean 62.5, as the issue's 62M tokens at 1M) starting at a
seeded random place in that stream. The words, their frequencies and their neighbours are real text; the stream
is only ~0.5M terms long, so at 1M chunks each passage recurs in many chunks (said in the results: `stream_terms`).
Queries: SQuAD dev questions (seeded sample), tokenised the same way: what `HybridIndex.retrieve` asks, the best
`depth` (20) rows.

Arms, run on the same index and queries in one process, interleaved query by query (the order rotating):
- `bm25`: bm25.py's `BM25.top` (the engine before issue 46), loaded from the arrays `bm25.npz` holds;
- `keywords`: keywords.py's `Keywords.top` (tantivy proposes 4x20 candidates, the forward index rescores them);
- `tantivy`: tantivy alone on the same terms, its own BM25 (the anchor): the query built and searched, 20 hits.
`identical`: how many queries `keywords` gave bm25's (row, score) pairs for, to the last bit; `proven`: for how many
the bound in keywords.py proves it (the others are measured, not guaranteed). `recall`: the mean share of bm25's
20 rows that `keywords` found.
Process CPU time per query (`time.process_time`), p50 and p95, and ratios of medians to tantivy's.
Memory: each engine opened in a fresh process (`--memory`), then every query asked once; the growth of its RSS
(and of its anonymous part: what cannot be paged back to the files) over the process before loading.
Prints a table and writes benchmarks/results/keyword_engine.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from data_files import DEFAULT_DATASETS
from provenance import provenance

ROOT = Path(__file__).resolve().parent.parent
DATA = DEFAULT_DATASETS  # --datasets sets it
DEPTH = 20
CORPORA = ["hotpotqa/dev_distractor_100_corpus.jsonl", "popqa/longtail_100_corpus.jsonl",
           "halueval/qa_500_corpus.jsonl"]


def passages() -> list[str]:
    squad = json.loads((DATA / "squad2" / "dev-v2.0.json").read_text())
    texts = [p["context"] for a in squad["data"] for p in a["paragraphs"]]
    for name in CORPORA:
        with (DATA / name).open() as lines:
            texts += [json.loads(line)["text"] for line in lines if line.strip()]
    return texts


def questions(count: int) -> list[list[str]]:
    from selfcrag.text.text import keyword_tokens

    squad = json.loads((DATA / "squad2" / "dev-v2.0.json").read_text())
    asked = [q["question"] for a in squad["data"] for p in a["paragraphs"] for q in p["qas"]]
    rng = np.random.default_rng(46)
    tokens = [keyword_tokens(asked[i]) for i in rng.permutation(len(asked))]
    return [t for t in tokens if t][:count]


def documents(size: int) -> tuple[list[list[str]], int]:
    """`size` windows of the real-text term stream, and the stream's length."""
    from selfcrag.text.text import keyword_tokens

    stream = [t for text in passages() for t in keyword_tokens(text)]
    rng = np.random.default_rng(size)
    lengths = rng.integers(30, 96, size)
    starts = rng.integers(0, len(stream), size)
    doubled = stream + stream  # a window past the end wraps round
    return [doubled[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)], len(stream)


def bm25_arrays(kw) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    from selfcrag.knowledge.keywords import TF_BITS

    """The arrays bm25.npz would hold for the same chunks, by transposing the forward index (no second tokenising)."""
    owner = np.repeat(np.arange(len(kw.doc_len), dtype=np.int64), np.diff(kw.start))
    ids = (kw.postings >> np.uint64(TF_BITS)).astype(np.int64)
    tf = (kw.postings & np.uint64((1 << TF_BITS) - 1)).astype("<i4")
    order = np.lexsort((owner, ids))  # by term, then row
    return {"params": np.asarray([kw.k1, kw.b]), "doc_len": np.asarray(kw.doc_len, dtype="<i8"),
            "term_bytes": np.asarray(kw.terms.blob), "term_end": np.asarray(kw.terms.ends, dtype="<i8"),
            "start": np.concatenate([[0], np.cumsum(np.asarray(kw.df, dtype=np.int64))]).astype("<i8"),
            "rows": owner[order].astype("<i4"), "tf": tf[order]}


class Tantivy:
    """tantivy by itself: the anchor."""

    def __init__(self, index) -> None:  # type: ignore[no-untyped-def]
        self.index, self.searcher = index, index.searcher()

    def top(self, tokens: list[str], n: int) -> list:
        import tantivy

        schema = self.index.schema
        parts = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "t", t, index_option="freq"))
                 for t in dict.fromkeys(tokens)]
        return self.searcher.search(tantivy.Query.boolean_query(parts), n, count=False).hits


def status_kb() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0])
    return fields


def memory(engine: str, directory: Path, rows: int, queries: int) -> dict:
    """In this (fresh) process: open `engine` from `directory`, ask every query, report the growth in MB."""
    import tantivy

    from selfcrag.knowledge import index_files
    from selfcrag.knowledge.bm25 import ARRAYS, BM25
    from selfcrag.knowledge.keywords import TANTIVY, Keywords

    asked = questions(queries)
    before = status_kb()
    if engine == "bm25":
        _, state = index_files.read_keywords(directory, ARRAYS)
        opened = BM25.from_arrays(state)
        del state
    elif engine == "keywords":
        opened = Keywords.open(directory / "keywords", rows)
    else:
        opened = Tantivy(tantivy.Index.open(str(directory / "keywords" / TANTIVY)))
    loaded = status_kb()
    for q in asked:
        opened.top(q, DEPTH)
    after = status_kb()
    mb = lambda a, key: round((a[key] - before[key]) / 1024, 1)  # noqa: E731
    return {"loaded_rss_mb": mb(loaded, "VmRSS"), "rss_mb": mb(after, "VmRSS"), "anon_mb": mb(after, "RssAnon"),
            "file_mb": mb(after, "RssFile")}


def timed(fn, q) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    start = time.process_time()
    out = fn(q, DEPTH)
    return 1000 * (time.process_time() - start), out


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(statistics.quantiles(ms, n=20)[-1], 3)}


def measure(size: int, queries: int, work: Path) -> dict:
    import faulthandler

    import tantivy

    from selfcrag.knowledge.bm25 import BM25
    from selfcrag.knowledge.keywords import TANTIVY, Keywords

    faulthandler.enable()
    cpu = time.process_time()
    docs, stream = documents(size)
    out: dict = {"chunks": size, "stream_terms": stream, "corpus_cpu_s": round(time.process_time() - cpu, 1)}
    out["terms"] = sum(len(d) for d in docs)
    out["distinct_chunks"] = len({tuple(d) for d in docs})
    directory = work / f"index-{size}"
    cpu, wall = time.process_time(), time.time()
    kw = Keywords.build(docs, directory / "keywords")
    out["keywords_build_cpu_s"] = round(time.process_time() - cpu, 1)  # tantivy's writer threads not included
    out["keywords_build_wall_s"] = round(time.time() - wall, 1)
    del docs
    out["postings"] = len(kw.postings)
    out["vocabulary"] = len(kw.df)
    disk = lambda p: round(sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 2**20, 1)  # noqa: E731
    out["keywords_disk_mb"] = disk(directory / "keywords")
    out["tantivy_disk_mb"] = disk(directory / "keywords" / TANTIVY)
    arrays = bm25_arrays(kw)
    with (directory / "bm25.npz").open("wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    bm25 = BM25.from_arrays(arrays)
    del arrays
    bare = Tantivy(tantivy.Index.open(str(directory / "keywords" / TANTIVY)))
    asked = questions(queries)
    arms = {"bm25": bm25.top, "keywords": kw.ranked, "tantivy": bare.top}
    ms: dict[str, list[float]] = {name: [] for name in arms}
    identical = proven = 0
    recall = []
    for i, q in enumerate(asked):
        names = list(arms)[i % 3:] + list(arms)[: i % 3]
        found = {}
        for name in names:
            spent, found[name] = timed(arms[name], q)
            ms[name].append(spent)
        best, sure = found["keywords"]  # type: ignore[misc]
        identical += best == found["bm25"]
        proven += sure
        truth = {row for row, _ in found["bm25"]}  # type: ignore[attr-defined]
        recall.append(len(truth & {row for row, _ in best}) / max(len(truth), 1))
    for name in arms:
        out[name] = summary(ms[name])
    out["identical"] = f"{identical}/{len(asked)}"
    out["proven"] = f"{proven}/{len(asked)}"
    out["recall"] = round(statistics.mean(recall), 4)
    for name in ("bm25", "keywords"):
        out[f"{name}_over_tantivy_p50"] = round(out[name]["p50_ms"] / out["tantivy"]["p50_ms"], 2)
        out[f"{name}_over_tantivy_p95"] = round(out[name]["p95_ms"] / out["tantivy"]["p95_ms"], 2)
    for engine in arms:
        done = subprocess.run([sys.executable, __file__, "--datasets", str(DATA), "--memory", engine, str(directory),
                               str(size), str(queries)], capture_output=True, text=True, check=True)
        out[f"{engine}_memory"] = json.loads(done.stdout)
    return out


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--sizes", default="100000,1000000")
    cli.add_argument("--queries", type=int, default=300)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--work", type=Path, help="where the indexes are built (default: a temporary directory)")
    cli.add_argument("--memory", nargs=4, metavar=("ENGINE", "DIR", "ROWS", "QUERIES"), help=argparse.SUPPRESS)
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "keyword_engine.json")
    args = cli.parse_args()
    global DATA
    DATA = args.datasets
    if args.memory:
        engine, directory, rows, queries = args.memory
        print(json.dumps(memory(engine, Path(directory), int(rows), int(queries))))
        return 0
    results: dict = {**provenance(), "depth": DEPTH, "queries": args.queries, "sizes": []}
    print(f"{'chunks':>9} {'postings':>11} {'bm25 p50':>9} {'p95':>7} {'kw p50':>7} {'p95':>7} {'tv p50':>7} "
          f"{'p95':>7} {'kw/tv':>6} {'bm/tv':>6} {'same':>8} {'kw MB':>6} {'bm MB':>6} {'tv MB':>6}  (CPU ms a query)")
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
            row = measure(size, args.queries, Path(work))
            results["sizes"].append(row)
            args.out.write_text(json.dumps(results, indent=2) + "\n")
            print(f"{size:>9,} {row['postings']:>11,} {row['bm25']['p50_ms']:>9} {row['bm25']['p95_ms']:>7} "
                  f"{row['keywords']['p50_ms']:>7} {row['keywords']['p95_ms']:>7} {row['tantivy']['p50_ms']:>7} "
                  f"{row['tantivy']['p95_ms']:>7} {row['keywords_over_tantivy_p50']:>6} "
                  f"{row['bm25_over_tantivy_p50']:>6} {row['identical']:>8} {row['keywords_memory']['rss_mb']:>6} "
                  f"{row['bm25_memory']['rss_mb']:>6} {row['tantivy_memory']['rss_mb']:>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
