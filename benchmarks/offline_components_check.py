"""Sanity numbers for the offline components (no model) on the tuning data that shared/datasets allows.

    .venv/bin/python benchmarks/offline_components_check.py [--datasets ../shared/datasets] [--limit N]

HaluEval QA (500): against the same knowledge, how often the groundedness score of the right answer is higher
than that of a hallucinated one, and how often each is judged grounded.
SQuAD 2.0 dev sample (100 answerable + 100 unanswerable), the gold paragraph as the single passage: refine ->
extractive answer; how often the answer contains a gold answer, how often unanswerable questions get no
answer, and how well the relevance / answer-grader / sentence-support scores separate the two classes (AUC).
The bundled sample (tests/data/sample_questions.jsonl): one retrieval round through the components.
Prints a table; writes benchmarks/results/offline_components_check.json.
Data: HaluEval (Li et al. 2023, MIT), SQuAD 2.0 (Rajpurkar et al. 2018, CC BY-SA 4.0). Never run this on the
reserved SQuAD dev-v2.0.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_files import require  # noqa: E402
from provenance import provenance  # noqa: E402
from squad_offline import DEFAULT_DATASETS, ROOT, contains_gold, load_jsonl  # noqa: E402


def auc(positives: list[float], negatives: list[float]) -> float:
    """P(score of a positive > score of a negative), ties count half."""
    if not positives or not negatives:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def passage(record: dict, text: str | None = None) -> dict:
    doc_id = record.get("context_id") or record["id"]
    return {"id": f"{doc_id}#0", "doc_id": doc_id, "chunk_index": 0, "title": record.get("context_title") or "",
            "source": "dataset", "text": text if text is not None else record["context"], "score": 1.0,
            "origin": "kb"}


def halueval(records: list[dict], embedder, settings) -> dict:  # noqa: ANN001
    from selfcrag.offline.groundedness import OfflineGroundednessChecker

    checker = OfflineGroundednessChecker(embedder)
    better = ties = pairs = right_grounded = hallucinated_rejected = hallucinated_total = 0
    for record in records:
        p = passage(record)
        strip = {k: p[k] for k in ("id", "doc_id", "title", "source", "text")} | {"score": 1.0}
        right = checker.check(record["answers"][0], [strip], settings)
        right_grounded += right.grounded
        for wrong_answer in record["hallucinated_answers"]:
            wrong = checker.check(wrong_answer, [strip], settings)
            pairs += 1
            better += right.score > wrong.score
            ties += right.score == wrong.score
            hallucinated_total += 1
            hallucinated_rejected += not wrong.grounded
    return {
        "questions": len(records),
        "pairs": pairs,
        "right_scores_higher": round(better / pairs, 4),
        "ties": round(ties / pairs, 4),
        "right_or_tie": round((better + ties) / pairs, 4),
        "right_answer_grounded": round(right_grounded / len(records), 4),
        "hallucinated_rejected": round(hallucinated_rejected / hallucinated_total, 4),
    }


def _run(record: dict, grader, refiner, generator, answer_grader, settings) -> tuple:  # noqa: ANN001
    """The offline pipeline on the gold paragraph: grade, refine, generate, grade the answer."""
    p = passage(record)
    grade = grader.grade(record["question"], [p], settings).grades[0]
    strips = refiner.refine(record["question"], [p], settings).strips
    draft = generator.generate(record["question"], strips, settings)
    return grade, strips, draft, answer_grader.grade(record["question"], draft.answer, settings)


def squad(records: list[dict], embedder, settings) -> dict:  # noqa: ANN001
    from selfcrag.offline.extractive import ExtractiveGenerator
    from selfcrag.offline.groundedness import OfflineGroundednessChecker
    from selfcrag.offline.offline_grading import OfflineAnswerGrader, OfflineRelevanceGrader
    from selfcrag.offline.refine import StripRefiner

    grader, refiner = OfflineRelevanceGrader(embedder), StripRefiner(embedder)
    generator, checker, answer_grader = (ExtractiveGenerator(embedder), OfflineGroundednessChecker(embedder),
                                         OfflineAnswerGrader(embedder))
    rows, times, cached_times = [], [], []
    for record in records:
        # Second pass on the same inputs: every embedding is cached, so it times the components' own work.
        for timing in (times, cached_times):
            started = time.perf_counter()
            grade, strips, draft, answer_grade = _run(record, grader, refiner, generator, answer_grader, settings)
            timing.append(time.perf_counter() - started)
        ranked = generator.candidates(record["question"], strips)
        grounded = checker.check(draft.answer, strips, settings) if draft.answer else None
        rows.append({
            "impossible": record["is_impossible"],
            "relevance": grade["score"],
            "label": grade["label"],
            "support": ranked[0].score if ranked else 0.0,
            "answer_relevance": answer_grade.score,
            "answered": bool(draft.answer),
            "hit": bool(draft.answer) and contains_gold(draft.answer, record["answers"]),
            "strips_hold_gold": contains_gold(" ".join(s["text"] for s in strips), record["answers"]),
            "grounded": grounded.grounded if grounded else None,
        })
    answerable = [r for r in rows if not r["impossible"]]
    impossible = [r for r in rows if r["impossible"]]
    answered = [r for r in answerable if r["answered"]]

    def share(items: list[dict], key: str) -> float:
        return round(sum(bool(r[key]) for r in items) / len(items), 4) if items else float("nan")

    def separation(key: str) -> float:
        return round(auc([r[key] for r in answerable], [r[key] for r in impossible]), 4)

    return {
        "answerable": len(answerable),
        "impossible": len(impossible),
        "answer_contains_gold": share(answerable, "hit"),
        "answered_answerable": share(answerable, "answered"),
        "gold_when_answered": share(answered, "hit"),
        "strips_keep_gold": share(answerable, "strips_hold_gold"),
        "abstained_impossible": round(1 - share(impossible, "answered"), 4),
        "answers_grounded": round(sum(r["grounded"] is True for r in rows) / max(1, sum(r["answered"] for r in rows)),
                                  4),
        "auc_relevance": separation("relevance"),
        "auc_sentence_support": separation("support"),
        "auc_answer_relevance": separation("answer_relevance"),
        "relevance_correct_answerable": round(sum(r["label"] == "correct" for r in answerable) / len(answerable), 4),
        "relevance_correct_impossible": round(sum(r["label"] == "correct" for r in impossible) / len(impossible), 4),
        "median_ms_per_question": round(1000 * statistics.median(times), 2),
        "median_ms_embeddings_cached": round(1000 * statistics.median(cached_times), 2),
    }


def sample_kb(path: Path, embedder, settings) -> dict:  # noqa: ANN001
    """The bundled help-center sample with its own retrieval: one round, no rewrite, no web."""
    from selfcrag.knowledge.loaded_indexes import sample_index
    from selfcrag.offline.extractive import ExtractiveGenerator
    from selfcrag.offline.offline_grading import OfflineAnswerGrader, OfflineRelevanceGrader
    from selfcrag.offline.refine import StripRefiner

    index, grader, refiner = sample_index(embedder), OfflineRelevanceGrader(embedder), StripRefiner(embedder)
    generator, answer_grader = ExtractiveGenerator(embedder), OfflineAnswerGrader(embedder)
    answerable, unanswerable = [], []
    for q in load_jsonl(path):
        passages = index.retrieve(q["question"], settings)
        grades = grader.grade(q["question"], passages, settings).grades
        kept = [p for p, g in zip(passages, grades, strict=True) if g["label"] != "incorrect"]
        strips = refiner.refine(q["question"], kept, settings).strips
        draft = generator.generate(q["question"], strips, settings)
        useful = answer_grader.grade(q["question"], draft.answer, settings).useful
        cited = {c["doc_id"].rsplit("/", 1)[-1] for c in draft.citations}
        (answerable if q["answerable"] else unanswerable).append((bool(draft.answer), q.get("doc_id") in cited, useful))
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "answerable_cites_right_doc": round(sum(c for _, c, _ in answerable) / len(answerable), 4),
        "answerable_judged_useful": round(sum(u for _, _, u in answerable) / len(answerable), 4),
        "unanswerable_no_draft": round(sum(not a for a, _, _ in unanswerable) / len(unanswerable), 4),
        "unanswerable_no_useful_answer": round(sum(not u for _, _, u in unanswerable) / len(unanswerable), 4),
    }


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--limit", type=int, default=0, help="records per dataset (0 = all)")
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "offline_components_check.json")
    args = cli.parse_args()
    require(args.datasets, "halueval/qa_500.jsonl", "squad2/dev_sample_200.jsonl")

    from selfcrag.context import Context
    from selfcrag.knowledge.embeddings import default_embedder

    embedder, settings = default_embedder(), Context()
    halu = load_jsonl(args.datasets / "halueval" / "qa_500.jsonl")
    squad_records = load_jsonl(args.datasets / "squad2" / "dev_sample_200.jsonl")
    if args.limit:
        halu = halu[: args.limit]
        squad_records = ([r for r in squad_records if not r["is_impossible"]][: args.limit]
                         + [r for r in squad_records if r["is_impossible"]][: args.limit])
    results = {**provenance(), "embedder": embedder.name, "halueval_qa": halueval(halu, embedder, settings),
               "squad2_dev_sample": squad(squad_records, embedder, settings),
               "sample_kb": sample_kb(ROOT / "tests" / "data" / "sample_questions.jsonl", embedder, settings)}
    for section in ("halueval_qa", "squad2_dev_sample", "sample_kb"):
        print(f"\n{section}")
        for key, value in results[section].items():
            print(f"  {key:<32} {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
