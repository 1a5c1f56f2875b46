"""The self-corrective graph vs plain retrieve-then-generate, same retriever and generator, SQuAD 2.0.

    .venv/bin/python benchmarks/squad_graph_vs_plain.py [--split sample|allowed|reserved] [--per-class N]
                                                        [--domain general] [--risk normal]

Splits: `sample` (default) is dev_sample_200 over its 285 paragraphs. `allowed` draws N answerable + N
unanswerable of the other questions on the same 8 articles (dev-v2.0.json; tuning allowed there too).
`reserved` draws them from the 27 articles shared/datasets reserves for acceptance, indexed on their own
paragraphs: a measurement only, never a place to tune (results/squad_graph_vs_plain_reserved.json).

Plain RAG: retrieve k passages from the same hybrid index, hand them all to the same extractive generator,
return its answer (the generator itself declines when no sentence supports one). The graph adds grading,
refinement, the checks, rewrites and the decision. Prints answerable accuracy (answer contains a gold
answer), unanswerable answered (the hallucination rate: SQuAD 2.0's unanswerable questions are written to
look answerable), abstentions, median latency; writes benchmarks/results/squad_graph_vs_plain.json.
Data: SQuAD 2.0 (Rajpurkar et al. 2018, CC BY-SA 4.0), the dev sample shared/datasets allows for tuning.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from squad_offline import DEFAULT_DATASETS, ROOT, contains_gold, load_jsonl  # noqa: E402


def load_split(folder: Path, split: str, per_class: int, seed: int) -> tuple[list[dict], Path]:
    """The questions of a split and the corpus file to index for them."""
    sample = load_jsonl(folder / "dev_sample_200.jsonl")
    if split == "sample":
        if per_class:
            sample = ([q for q in sample if not q["is_impossible"]][:per_class]
                      + [q for q in sample if q["is_impossible"]][:per_class])
        return sample, folder / "dev_sample_corpus.jsonl"
    allowed = {doc["title"] for doc in load_jsonl(folder / "dev_sample_corpus.jsonl")}
    taken = {q["id"] for q in sample}
    articles = [a for a in json.loads((folder / "dev-v2.0.json").read_text())["data"]
                if (a["title"] in allowed) == (split == "allowed")]
    pool = [{"id": qa["id"], "question": qa["question"], "answers": [x["text"] for x in qa["answers"]],
             "is_impossible": qa["is_impossible"]}
            for article in articles for paragraph in article["paragraphs"] for qa in paragraph["qas"]
            if qa["id"] not in taken]
    draw = random.Random(seed)
    per_class = per_class or 100
    questions = [q for impossible in (False, True)
                 for q in draw.sample([q for q in pool if q["is_impossible"] == impossible], per_class)]
    corpus = Path(tempfile.mkdtemp(prefix="selfcrag-squad-corpus-")) / "corpus.jsonl"
    corpus.write_text("".join(
        json.dumps({"id": f"{article['title']}#p{i}", "title": article["title"], "text": paragraph["context"]}) + "\n"
        for article in articles for i, paragraph in enumerate(article["paragraphs"])), encoding="utf-8")
    return questions, corpus


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--split", choices=("sample", "allowed", "reserved"), default="sample")
    cli.add_argument("--per-class", type=int, default=0, help="questions per class (0 = all of the sample, "
                     "100 for the other splits)")
    cli.add_argument("--seed", type=int, default=0, help="which questions the other splits draw")
    cli.add_argument("--domain", default="general")
    cli.add_argument("--risk", default="normal")
    cli.add_argument("--out", type=Path, default=None)
    args = cli.parse_args()
    suffix = "" if args.split == "sample" else f"_{args.split}"
    out = args.out or ROOT / "benchmarks" / "results" / f"squad_graph_vs_plain{suffix}.json"

    from selfcrag import Context, build_graph
    from selfcrag.components.embeddings import default_embedder
    from selfcrag.components.extractive import ExtractiveGenerator
    from selfcrag.components.retrieval import HybridIndex, chunk_documents, load_documents

    questions, corpus = load_split(args.datasets / "squad2", args.split, args.per_class, args.seed)
    embedder = default_embedder()
    index = HybridIndex.build(chunk_documents(load_documents([corpus])), embedder)
    index_dir = Path(tempfile.mkdtemp(prefix="selfcrag-squad-"))
    index.save(index_dir)
    context = Context.from_env(index_dir=str(index_dir), domain=args.domain, risk=args.risk)
    graph = build_graph(settings={"index_dir": str(index_dir)})  # the index is the operator's; the preset a run's
    generator = ExtractiveGenerator(embedder)

    def plain(question: str) -> tuple[str, bool, dict]:
        passages = index.retrieve(question, context)
        strips = [{"id": p["id"], "doc_id": p["doc_id"], "title": p["title"], "source": p["source"],
                   "text": p["text"], "score": p["score"]} for p in passages]
        draft = generator.generate(question, strips, context)  # type: ignore[arg-type]
        return draft.answer, bool(draft.answer), {}

    def selfcorrective(question: str) -> tuple[str, bool, dict]:
        out = graph.invoke({"question": question}, context={"domain": args.domain, "risk": args.risk})
        seen = {"decision": out["decision"], "confidence": out["confidence"], "scores": out["scores"]}
        return out["answer"], out["decision"] in ("answer", "answer_with_caveat"), seen

    rows = []
    for q in questions:
        row = {"id": q["id"], "impossible": q["is_impossible"]}
        for name, run in (("plain", plain), ("graph", selfcorrective)):
            started = time.perf_counter()
            answer, answered, seen = run(q["question"])
            row[name] = {"answered": answered, "correct": answered and contains_gold(answer, q["answers"]),
                         "seconds": round(time.perf_counter() - started, 4), **seen}
        rows.append(row)

    answerable = [r for r in rows if not r["impossible"]]
    impossible = [r for r in rows if r["impossible"]]

    def pct(n: int, total: list) -> float:
        return round(100.0 * n / max(len(total), 1), 1)

    summary = {}
    for name in ("plain", "graph"):
        summary[name] = {
            "answerable_accuracy_pct": pct(sum(r[name]["correct"] for r in answerable), answerable),
            "unanswerable_answered_pct": pct(sum(r[name]["answered"] for r in impossible), impossible),
            "abstained_pct": pct(sum(not r[name]["answered"] for r in rows), rows),
            "median_latency_ms": round(1000 * statistics.median(r[name]["seconds"] for r in rows), 1),
        }
    ratio = summary["graph"]["unanswerable_answered_pct"] / max(summary["plain"]["unanswerable_answered_pct"], 1e-9)
    print(f"SQuAD 2.0 {args.split}: {len(answerable)} answerable + {len(impossible)} unanswerable; "
          f"domain {args.domain}, risk {args.risk}")
    print(f"{'metric':<28}{'plain RAG':>12}{'selfcrag':>12}")
    for metric in summary["plain"]:
        print(f"{metric:<28}{summary['plain'][metric]:>12}{summary['graph'][metric]:>12}")
    print(f"hallucination rate, selfcrag / plain: {ratio:.2f}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"split": args.split, "seed": args.seed, "summary": summary,
                               "hallucination_ratio": round(ratio, 3), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
