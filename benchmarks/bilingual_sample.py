"""The offline graph on the bundled sample, Chinese and English side by side.

    .venv/bin/python benchmarks/bilingual_sample.py

Question sets: tests/data/sample_questions.jsonl (English) and tests/data/sample_questions_zh.jsonl (Chinese),
hand-written for this project, answerable and unanswerable. A hit is an answer (with or without a caveat)
that cites the expected document; an abstention is the decision `abstain`. Where the expected answer holds a
number or an id ("30 天", "$14.99", "E1042"), the answer must hold it too to count as "has the fact" (numbers
compare by value: 三十 = 30). Prints a table, writes benchmarks/results/bilingual_sample.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SETS = {"en": DATA / "sample_questions.jsonl", "zh": DATA / "sample_questions_zh.jsonl"}


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def facts(text: str) -> set[str]:
    """The numbers and ids in a text, comparable across languages."""
    from selfcrag.text.rules import is_identifier
    from selfcrag.text.text import numbers, words

    return {f"{n:g}" for n in numbers(text)} | {w for w in words(text) if w.isascii() and is_identifier(w)}


def run(questions: list[dict]) -> tuple[dict, list[dict]]:
    from selfcrag import ask

    rows = []
    for q in questions:
        started = time.perf_counter()
        out = ask(q["question"])
        cited = [c["doc_id"] for c in out["citations"]]
        answered = out["decision"] != "abstain"
        rows.append({
            "question": q["question"], "answerable": q["answerable"], "expected": q["doc_id"],
            "decision": out["decision"], "cited": cited, "hit": answered and q["doc_id"] in cited,
            "answer": out["answer"], "seconds": round(time.perf_counter() - started, 3),
            "facts": sorted(facts(q["answer"] or "")),
            "has_fact": answered and bool(q["answer"]) and facts(q["answer"]) <= facts(out["answer"]),
        })
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    summary = {
        "answerable": len(answerable),
        "hit": sum(r["hit"] for r in answerable),
        "with_fact": sum(bool(r["facts"]) for r in answerable),
        "has_fact": sum(r["has_fact"] for r in answerable if r["facts"]),
        "answerable_abstained": sum(r["decision"] == "abstain" for r in answerable),
        "unanswerable": len(unanswerable),
        "abstained": sum(r["decision"] == "abstain" for r in unanswerable),
        "median_ms": round(1000 * statistics.median(r["seconds"] for r in rows), 1),
    }
    return summary, rows


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bilingual_sample.json")
    args = cli.parse_args()
    from provenance import provenance

    from selfcrag import ask

    origin = provenance()

    ask("warm up: load the model and the sample index")
    results = {lang: run(load_jsonl(path)) for lang, path in SETS.items()}
    print(f"{'':<28}{'English':>12}{'Chinese':>12}")
    en, zh = results["en"][0], results["zh"][0]
    for label, part, whole in (("answerable: hit", "hit", "answerable"),
                               ("  answer has the fact", "has_fact", "with_fact"),
                               ("answerable: abstained", "answerable_abstained", "answerable"),
                               ("unanswerable: abstained", "abstained", "unanswerable")):
        cells = [f"{s[part]}/{s[whole]} {100 * s[part] / max(s[whole], 1):.0f}%" for s in (en, zh)]
        print(f"{label:<28}{cells[0]:>12}{cells[1]:>12}")
    print(f"{'median latency (ms)':<28}{en['median_ms']:>12}{zh['median_ms']:>12}")
    for lang, (_, rows) in results.items():
        for r in rows:
            if r["hit"] != r["answerable"] or (not r["answerable"] and r["decision"] != "abstain"):
                print(f"  miss [{lang}] {r['question']} -> {r['decision']} {r['cited']}", file=sys.stderr)
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**origin, **{lang: {"summary": s, "rows": r} for lang, (s, r) in results.items()}},
                              ensure_ascii=False, indent=2))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
