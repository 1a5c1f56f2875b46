"""The offline graph on the SQuAD 2.0 dev sample (100 answerable + 100 unanswerable questions, 285 paragraphs).

    .venv/bin/python benchmarks/squad_offline.py [--limit N] [--datasets ../shared/datasets]

Prints: ingestion chunks/s; answerable questions whose answer contains a gold answer; unanswerable
questions abstained; median latency per question. Writes benchmarks/results/squad_offline.json.
Data: SQuAD 2.0 (Rajpurkar et al. 2018), CC BY-SA 4.0 — the dev sample that shared/datasets allows for tuning.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASETS = ROOT.parent / "shared" / "datasets"


def normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def contains_gold(answer: str, golds: list[str]) -> bool:
    answer = normalise(answer)
    return any(normalise(g) and normalise(g) in answer for g in golds)


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--limit", type=int, default=0, help="questions per class (0 = all)")
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "squad_offline.json")
    args = cli.parse_args()

    from selfcrag import build_graph
    from selfcrag.components.embeddings import default_embedder
    from selfcrag.components.retrieval import HybridIndex, chunk_documents, load_documents

    folder = args.datasets / "squad2"
    questions = load_jsonl(folder / "dev_sample_200.jsonl")
    if args.limit:
        answerable = [q for q in questions if not q["is_impossible"]][: args.limit]
        impossible = [q for q in questions if q["is_impossible"]][: args.limit]
        questions = answerable + impossible

    embedder = default_embedder()
    embedder.embed_documents(["warm up"])
    started = time.perf_counter()
    chunks = chunk_documents(load_documents([folder / "dev_sample_corpus.jsonl"]))
    index = HybridIndex.build(chunks, embedder)
    ingest_seconds = time.perf_counter() - started
    index_dir = Path(tempfile.mkdtemp(prefix="selfcrag-squad-"))
    index.save(index_dir)
    graph = build_graph(settings={"index_dir": str(index_dir)})

    rows = []
    for q in questions:
        t0 = time.perf_counter()
        out = graph.invoke({"question": q["question"]})
        seconds = time.perf_counter() - t0
        answered = out["decision"] in ("answer", "answer_with_caveat")
        rows.append(
            {
                "id": q["id"],
                "impossible": q["is_impossible"],
                "decision": out["decision"],
                "correct": answered and contains_gold(out["answer"], q["answers"]),
                "seconds": seconds,
                "llm_calls": out["llm_calls"],
                "confidence": out["confidence"],
                "scores": out["scores"],
                "rounds": sum(1 for s in out["trace"] if s["node"] == "retrieve"),
            }
        )

    answerable = [r for r in rows if not r["impossible"]]
    impossible = [r for r in rows if r["impossible"]]

    def pct(part: list[dict], total: list[dict]) -> float:
        return round(100.0 * len(part) / max(len(total), 1), 1)

    summary = {
        "questions": len(rows),
        "answerable_contains_gold_pct": pct([r for r in answerable if r["correct"]], answerable),
        "answerable_abstained_pct": pct([r for r in answerable if r["decision"] == "abstain"], answerable),
        "unanswerable_abstained_pct": pct([r for r in impossible if r["decision"] == "abstain"], impossible),
        "median_latency_ms": round(1000 * statistics.median(r["seconds"] for r in rows), 1),
        "p90_latency_ms": round(1000 * statistics.quantiles([r["seconds"] for r in rows], n=10)[-1], 1),
        "mean_retrieval_rounds": round(statistics.mean(r["rounds"] for r in rows), 2),
        "llm_calls_total": sum(r["llm_calls"] for r in rows),
        "ingest_chunks": len(chunks),
        "ingest_chunks_per_s": round(len(chunks) / ingest_seconds, 1),
        "embedder": embedder.name,
    }
    width = max(len(k) for k in summary)
    print(f"{'metric':<{width}}  value")
    for key, value in summary.items():
        print(f"{key:<{width}}  {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
