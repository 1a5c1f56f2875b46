"""False routes of the offline `route_question` (offline/router.py) on the tuning questions.

    .venv/bin/python benchmarks/route_questions.py [--datasets ../shared/datasets]

Each set's questions are routed against its own knowledge base, with web search counted as configured (the web
route is only possible then): SQuAD 2.0's dev sample and every other question of its 8 articles (dev-v2.0.json),
HaluEval's 500 over its knowledge texts, and the sample knowledge base's English and Chinese questions. Every one
of them is a knowledge question: one routed `direct` is a lost answer (the goal is 0), one routed `web_search`
skips the knowledge base for its first round. The conversation set (tests/data/route_conversation.jsonl:
greetings, thanks, questions about the assistant, English and Chinese) should all be `direct`. The cross rows
ask one set's questions of another's knowledge base: there the web route is the right one, and its share is how
often the router sees that the knowledge base cannot cover a question.

Only the knowledge base's vocabulary matters to the router (`knows`): for the dataset corpora it is read from
the corpus text as the index tokenises it (title and text, `keyword_tokens`), the bundled sample from its index.
Prints a table and writes benchmarks/results/route_questions.json with the commit and the command.
Data: SQuAD 2.0 (Rajpurkar et al. 2018, CC BY-SA 4.0); HaluEval (Li et al. 2023, MIT).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_files import DEFAULT_DATASETS, require  # noqa: E402
from provenance import provenance  # noqa: E402

from selfcrag.offline.router import route_offline  # noqa: E402
from selfcrag.text.text import keyword_tokens  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "route_questions.json"
TESTS = ROOT / "tests" / "data"


class Vocabulary:
    """A corpus's keyword vocabulary, as the built-in index's `knows` reads it."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.tokens = {t for row in rows for t in keyword_tokens(f"{row.get('title', '')}\n{row.get('text', '')}")}
        self.all_titles = list(dict.fromkeys(str(row["title"]) for row in rows if row.get("title")))

    def knows(self, token: str) -> bool:
        return token in self.tokens

    def titles(self, limit: int) -> list[str]:  # contract.Vocabulary: the router checks an index has both
        return self.all_titles[:limit]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def squad_others(folder: Path) -> list[dict[str, Any]]:
    """Every question of the dev sample's 8 articles that is not in the sample."""
    titles = {row["title"] for row in load_jsonl(folder / "dev_sample_corpus.jsonl")}
    taken = {q["id"] for q in load_jsonl(folder / "dev_sample_200.jsonl")}
    articles = json.loads((folder / "dev-v2.0.json").read_text(encoding="utf-8"))["data"]
    return [{"question": qa["question"], "answerable": not qa["is_impossible"]}
            for a in articles if a["title"] in titles for p in a["paragraphs"] for qa in p["qas"]
            if qa["id"] not in taken]  # fmt: skip


def route_all(questions: list[dict[str, Any]], index: Any) -> dict[str, Any]:
    routes: Counter[str] = Counter()
    answerable: Counter[str] = Counter()
    examples: dict[str, list[str]] = {"direct": [], "web_search": []}
    for q in questions:
        route = route_offline(q["question"], index, web=True).route
        routes[route] += 1
        if q.get("answerable", True):
            answerable[route] += 1
        if route in examples and len(examples[route]) < 5:
            examples[route].append(q["question"])
    answerable_n = sum(q.get("answerable", True) for q in questions)
    return {"n": len(questions), "routes": dict(routes), "answerable": answerable_n,
            "answerable_routes": dict(answerable), "examples": examples}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    args = parser.parse_args(argv)
    origin = provenance(argv)  # the code as the run began
    squad, halu = args.datasets / "squad2", args.datasets / "halueval"
    require(args.datasets, "squad2/dev_sample_200.jsonl", "squad2/dev_sample_corpus.jsonl", "squad2/dev-v2.0.json",
            "halueval/qa_500.jsonl", "halueval/qa_500_corpus.jsonl")  # fmt: skip

    from selfcrag import Context
    from selfcrag.knowledge.loaded_indexes import index_for

    sample_kb = index_for(Context())  # the bundled sample, as a run without settings searches it
    squad_kb = Vocabulary(load_jsonl(squad / "dev_sample_corpus.jsonl"))
    halu_kb = Vocabulary(load_jsonl(halu / "qa_500_corpus.jsonl"))
    sample_dev = [{"question": q["question"], "answerable": not q["is_impossible"]}
                  for q in load_jsonl(squad / "dev_sample_200.jsonl")]  # fmt: skip
    halu_qs = [{"question": q["question"]} for q in load_jsonl(halu / "qa_500.jsonl")]
    kb_qs = load_jsonl(TESTS / "sample_questions.jsonl") + load_jsonl(TESTS / "sample_questions_zh.jsonl")
    conversation = load_jsonl(TESTS / "route_conversation.jsonl")
    sets = [  # (name, kind, questions, knowledge base, its name)
        ("squad dev sample", "knowledge", sample_dev, squad_kb, "squad dev corpus"),
        ("squad other questions", "knowledge", squad_others(squad), squad_kb, "squad dev corpus"),
        ("halueval", "knowledge", halu_qs, halu_kb, "halueval corpus"),
        ("sample kb questions", "knowledge", kb_qs, sample_kb, "sample kb"),
        ("conversation", "conversation", conversation, sample_kb, "sample kb"),
        ("squad dev sample", "cross", sample_dev, sample_kb, "sample kb"),
        ("halueval", "cross", halu_qs, squad_kb, "squad dev corpus"),
        ("sample kb questions", "cross", kb_qs, squad_kb, "squad dev corpus"),
    ]
    results = []
    print(f"{'set':<24}{'kind':<14}{'knowledge base':<18}{'n':>6}{'direct':>8}{'web':>7}{'retrieve':>10}"
          f"{'answerable routed away':>24}")  # fmt: skip
    for name, kind, questions, index, kb in sets:
        found = route_all(questions, index)
        results.append({"set": name, "kind": kind, "knowledge_base": kb, **found})
        r, a = found["routes"], found["answerable_routes"]
        away = f"{a.get('direct', 0) + a.get('web_search', 0)} of {found['answerable']}" if kind == "knowledge" else "-"
        print(f"{name:<24}{kind:<14}{kb:<18}{found['n']:>6}{r.get('direct', 0):>8}{r.get('web_search', 0):>7}"
              f"{r.get('retrieve', 0):>10}{away:>24}")  # fmt: skip
    lost = sum(r["routes"].get("direct", 0) for r in results if r["kind"] == "knowledge")
    print(f"knowledge questions routed direct (lost answers): {lost}; HaluEval's questions are all answerable")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({**origin, "knowledge_routed_direct": lost,
                               "results": results}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
