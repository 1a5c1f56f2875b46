"""Chinese tokenisation for keyword retrieval: character pairs (the default) against other segmenters.

    .venv/bin/python benchmarks/chinese_tokenisation.py [--graph]

Each tokeniser indexes the bundled sample (English and Chinese documents together) and answers the Chinese
questions: the answerable ones of tests/data/sample_questions_zh.jsonl plus the retrieval-only questions
below, each with the document that answers it. Prints recall@1, recall@3 and MRR (document level) for BM25
alone, for BM25 fused with MiniLM's cosine, and for the index as shipped (MiniLM does not read Chinese, so
the share of query terms in a chunk takes the cosine's place), the time to tokenise the sample, and the
segmenter's load time; `--graph` also runs the whole offline graph on the Chinese question set with each
tokeniser.
jieba is compared when it is installed (`pip install jieba`). Writes benchmarks/results/chinese_tokenisation.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "tests" / "data" / "sample_questions_zh.jsonl"
# Written for this benchmark: more questions than the graph tests need, so one query does not decide.
RETRIEVAL_ONLY = [
    ("退货标签打印以后多久会失效？", "zh/returns_policy"),
    ("因为不想要了而退货，要付多少标签费？", "zh/returns_policy"),
    ("剃须刀拆封了还能退吗？", "zh/returns_policy"),
    ("仓库检查退回的商品需要几天？", "zh/refunds"),
    ("用礼品卡付的钱会退到哪里？", "zh/refunds"),
    ("原来订单的运费能退吗？", "zh/refunds"),
    ("标准配送几天能送到？", "zh/shipping_rates"),
    ("次日达要在几点之前下单？", "zh/shipping_rates"),
    ("一个订单分成几个包裹寄，要付几次运费？", "zh/shipping_rates"),
    ("快递单号什么时候能查到？", "zh/order_tracking"),
    ("订单已经发货了还能改收货地址吗？", "zh/order_tracking"),
    ("物流信息五天没有更新怎么办？", "zh/order_tracking"),
    ("出现 E1050 应该怎么处理？", "zh/error_codes"),
    ("购物车里的商品缺货时会显示哪个代码？", "zh/error_codes"),
    ("两个优惠码可以叠加使用吗？", "zh/error_codes"),
    ("E4031 是什么错误？", "zh/error_codes"),
    ("API 密钥在哪里创建？", "zh/developer_api"),
    ("怎么获取 order_98765 的物流信息？", "zh/developer_api"),
    ("page_size 最大可以设成多少？", "zh/developer_api"),
    ("请求太多超过限制会返回什么状态码？", "zh/developer_api"),
    ("Basic 会员包含哪些权益？", "zh/membership_plans"),
    ("按年付费的会员价格怎么算？", "zh/membership_plans"),
    ("降级会员什么时候生效？", "zh/membership_plans"),
    ("发邮件给客服多久会回复？", "zh/support_contact"),
    ("Pro 会员的专线电话是多少？", "zh/support_contact"),
    ("周日有人工客服吗？", "zh/support_contact"),
]


def character_pairs() -> Callable[[str], list[str]]:
    from selfcrag.text.text import segment_chinese

    return segment_chinese


def characters() -> Callable[[str], list[str]]:
    """One token per character: what selfcrag did before this benchmark."""
    return list


def characters_and_pairs() -> Callable[[str], list[str]]:
    """Both (Lucene's CJK bigram filter with unigrams): a one-character query word still meets a pair."""
    pairs = character_pairs()
    return lambda run: list(run) + [t for t in pairs(run) if len(t) > 1]


def _jieba(search: bool) -> Callable[[str], list[str]]:
    import jieba  # not a dependency: installed only to run this comparison

    jieba.setLogLevel(60)
    jieba.initialize()
    return jieba.lcut_for_search if search else jieba.lcut


TOKENISERS: dict[str, Callable[[], Callable[[str], list[str]]]] = {
    "characters": characters,
    "character pairs": character_pairs,
    "characters + pairs": characters_and_pairs,
    "jieba": lambda: _jieba(search=False),
    "jieba (search mode)": lambda: _jieba(search=True),
}


class CachedEmbedder:
    """Embeds each text once across all tokenisers (the vectors do not depend on tokenisation). `languages=None`
    claims to read every language, so the index fuses MiniLM's cosine even for Chinese."""

    def __init__(self, inner, languages: frozenset[str] | None, cache: dict) -> None:  # noqa: ANN001
        self.inner, self.name, self.languages, self._cache = inner, inner.name, languages, cache

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            self._cache.update(zip(todo, self.inner.embed_documents(todo), strict=True))
        return np.stack([self._cache[t] for t in texts]) if texts else self.inner.embed_documents([])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def ranks(ranked_docs: list[list[str]], expected: list[str]) -> dict[str, float]:
    positions = [docs.index(e) + 1 if e in docs else 0 for docs, e in zip(ranked_docs, expected, strict=True)]
    return {
        "recall@1": round(sum(0 < p <= 1 for p in positions) / len(positions), 3),
        "recall@3": round(sum(0 < p <= 3 for p in positions) / len(positions), 3),
        "mrr": round(statistics.mean(1 / p if p else 0.0 for p in positions), 3),
    }


def doc_order(chunk_ids: list[str]) -> list[str]:
    return list(dict.fromkeys(cid.split("#", 1)[0] for cid in chunk_ids))


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--graph", action="store_true", help="also run the offline graph on the Chinese question set")
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "chinese_tokenisation.json")
    args = cli.parse_args()

    from importlib import resources

    from provenance import provenance

    from selfcrag import Context, build_graph, offline_components
    from selfcrag.knowledge.bm25 import BM25
    from selfcrag.knowledge.documents import chunk_documents, load_documents
    from selfcrag.knowledge.embeddings import default_embedder
    from selfcrag.knowledge.retrieval import HybridIndex, index_text
    from selfcrag.text import text

    origin = provenance()  # the code as the run began
    records = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    queries = [(r["question"], r["doc_id"]) for r in records if r["answerable"]] + RETRIEVAL_ONLY
    expected = [doc for _, doc in queries]
    with resources.as_file(resources.files("selfcrag") / "data" / "sample_kb") as folder:
        chunks = chunk_documents(load_documents([folder]))
    model, vectors = default_embedder(), {}
    embedder = CachedEmbedder(model, model.languages, vectors)
    fused_embedder = CachedEmbedder(model, None, vectors)
    settings = Context()
    original = text.segment_chinese
    results: dict[str, dict] = {}
    for name, make in TOKENISERS.items():
        started = time.perf_counter()
        try:
            segment = make()
        except ImportError:
            print(f"skipped {name}: not installed (pip install jieba)", file=sys.stderr)
            continue
        load_seconds = time.perf_counter() - started
        text.segment_chinese = segment  # words(), and so BM25, coverage and the graders, now use it
        try:
            started = time.perf_counter()
            tokens = [text.keyword_tokens(index_text(c)) for c in chunks]
            tokenise_ms = 1000 * (time.perf_counter() - started)
            bm25 = BM25(tokens)
            keyword = [doc_order([chunks[row].id for row, _ in bm25.top(text.keyword_tokens(q), 20)])
                       for q, _ in queries]
            fused_index = HybridIndex.build(chunks, fused_embedder)
            fused = [doc_order([p["id"] for p in fused_index.retrieve(q, settings)]) for q, _ in queries]
            index = HybridIndex.build(chunks, embedder)
            shipped = [doc_order([p["id"] for p in index.retrieve(q, settings)]) for q, _ in queries]
            row = {"bm25": ranks(keyword, expected), "fused": ranks(fused, expected),
                   "shipped": ranks(shipped, expected),
                   "vocabulary": len(bm25.terms), "tokenise_ms": round(tokenise_ms, 1),
                   "load_ms": round(1000 * load_seconds, 1)}
            if args.graph:
                graph = build_graph(offline_components(retriever=index, embedder=embedder))
                outs = [(r, graph.invoke({"question": r["question"]}, context=settings)) for r in records]
                answerable = [(r, o) for r, o in outs if r["answerable"]]
                cites = [(r["doc_id"], [c["doc_id"] for c in o["citations"]]) for r, o in answerable
                         if o["decision"] != "abstain"]
                row["graph_hit"] = sum(doc in cited for doc, cited in cites)
                row["graph_answerable"] = len(answerable)
                row["graph_abstained"] = sum(o["decision"] == "abstain" for r, o in outs if not r["answerable"])
                row["graph_unanswerable"] = len(outs) - len(answerable)
            results[name] = row
        finally:
            text.segment_chinese = original

    print(f"{len(queries)} Chinese questions over {len(chunks)} chunks (English and Chinese sample together)")
    print(f"{'':<22}{'BM25 alone':<21}{'BM25 + MiniLM cosine':<21}{'as shipped':<21}")
    header = f"{'tokeniser':<22}" + f"{'R@1':>7}{'R@3':>7}{'MRR':>7}" * 3
    header += f"{'terms':>7}{'tok ms':>8}{'load ms':>9}" + (f"{'graph hit':>11}{'abstain':>9}" if args.graph else "")
    print(header)
    for name, r in results.items():
        line = f"{name:<22}" + "".join(f"{r[k]['recall@1']:>7.3f}{r[k]['recall@3']:>7.3f}{r[k]['mrr']:>7.3f}"
                                       for k in ("bm25", "fused", "shipped"))
        line += f"{r['vocabulary']:>7}{r['tokenise_ms']:>8.1f}{r['load_ms']:>9.1f}"
        if args.graph:
            line += (f"{r['graph_hit']:>6}/{r['graph_answerable']:<4}"
                     f"{r['graph_abstained']:>5}/{r['graph_unanswerable']:<3}")
        print(line)
    print("load ms: jieba builds its dictionary once per process, so only the first jieba row pays it.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**origin, "questions": len(queries), "chunks": len(chunks), "tokenisers": results},
                                   ensure_ascii=False, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
