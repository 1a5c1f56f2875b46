"""The model backend's retrieval evaluator (`grade_documents`), replayed on the tuning questions' retrieved passages.

    OPENAI_BASE_URL=http://127.0.0.1:8098/v1 OPENAI_API_KEY=local \\
    .venv/bin/python benchmarks/grader_replay.py --model openai:qwen2.5-coder-1.5b [--server-pid PID] \\
        [--arm NAME=SETTING=VALUE[,SETTING=VALUE] ...] [--squad 30] [--halueval 20] [--out FILE]

Tuning data only: the first questions of `calibration_fit.py`'s draws (SQuAD dev sample, HaluEval), each retrieved
once with the default settings; every arm's grader then labels those same passages. A passage holds the answer
when a gold answer appears in it as whole words (`contains_gold`). Per source and arm:
- `rejected`: answerable questions with an answer-bearing passage retrieved whose passages the grader labelled
  incorrect, every one (the graph then drafts nothing from this retrieval) — of `reachable`;
- `kept_answer`: of those questions, how many had an answer-bearing passage labelled correct or ambiguous;
- `auroc`: the grader's score ranking answer-bearing passages above the others;
- labels given, passages left without a verdict, calls, tokens, wall seconds and (with --server-pid) the model
  server's CPU seconds.
Prints a table, writes benchmarks/results/grader_replay.json (or --out), each arm under the model's name so runs
with two models sit side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_fit import halueval_questions, squad_questions  # noqa: E402
from eval_datasets import DEFAULT_DATASETS, RESULTS, index_dir  # noqa: E402
from refiner_replay import arm_of  # noqa: E402

DEFAULT_ARMS = ("batch=grading=batch", "parallel=grading=parallel")


def retrieved(questions: list[dict[str, Any]], corpus: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    from selfcrag.cli import _questions_index
    from selfcrag.context import Context
    from selfcrag.knowledge.langchain_objects import load_index

    _questions_index(argparse.Namespace(index=str(index_dir(corpus)), corpus=str(corpus), model="", verifier="",
                                        verifier_url=""))  # builds the index once, as calibration_fit.py does
    index = load_index(index_dir(corpus))
    return [(q, index.retrieve(q["question"], Context())) for q in questions]


def grade_arm(cases: list[tuple[dict[str, Any], list[dict[str, Any]]]], model: str, settings: dict[str, str],
              server_cpu: Any) -> dict[str, Any]:  # fmt: skip
    from selfcrag.context import Context
    from selfcrag.evaluation.metrics import auroc
    from selfcrag.evaluation.questions import contains_gold
    from selfcrag.llm.models import ChatModels
    from selfcrag.llm.relevance import LLMRelevanceGrader

    context = Context(backend="model", generator_model=model, **settings)
    grader = LLMRelevanceGrader(ChatModels())
    labels: Counter[str] = Counter()
    scores: list[float] = []
    bearing: list[bool] = []
    reachable = rejected = kept_answer = unjudged = calls = tokens = 0
    started, cpu_before = time.perf_counter(), server_cpu() if server_cpu else 0.0
    for question, passages in cases:
        grading = grader.grade(question["question"], passages, context)
        holds = [not question["is_impossible"] and contains_gold(p["text"], question["answers"]) for p in passages]
        for grade, held in zip(grading.grades, holds, strict=True):
            labels[grade["label"]] += 1
            unjudged += "grader failed" in grade["reason"]
            scores.append(grade["score"])
            bearing.append(held)
        calls, tokens = calls + grading.llm_calls, tokens + grading.tokens
        if any(holds):
            reachable += 1
            rejected += all(g["label"] == "incorrect" for g in grading.grades)
            kept_answer += any(h and g["label"] != "incorrect" for g, h in zip(grading.grades, holds, strict=True))
    return {"questions": len(cases), "reachable": reachable, "rejected": rejected, "kept_answer": kept_answer,
            "auroc": round(auroc(scores, bearing) or 0.0, 3), "labels": dict(labels), "unjudged": unjudged,
            "calls": calls, "tokens": tokens, "seconds": round(time.perf_counter() - started, 1),
            "server_cpu_s": round(server_cpu() - cpu_before, 1) if server_cpu else None}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--model", default="openai:qwen2.5-coder-1.5b", help="provider:model of the grader")
    cli.add_argument("--server-pid", type=int, help="the local model server's process, for its CPU seconds")
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--squad", type=int, default=30, help="the SQuAD dev sample's first N questions")
    cli.add_argument("--halueval", type=int, default=20, help="HaluEval's first N questions")
    cli.add_argument("--arm", action="append", type=arm_of, help="an arm's settings (repeatable); default: "
                     + ", ".join(DEFAULT_ARMS))  # fmt: skip
    cli.add_argument("--out", type=Path, default=RESULTS / "grader_replay.json")
    args = cli.parse_args(argv)
    arms = args.arm or [arm_of(a) for a in DEFAULT_ARMS]

    from provenance import provenance

    from selfcrag.evaluation.run import process_cpu

    origin = provenance(argv, __file__)
    server_cpu = process_cpu(args.server_pid) if args.server_pid else None
    work = Path(tempfile.mkdtemp(prefix="selfcrag-grader-replay-"))
    squad, squad_corpus = squad_questions(args.datasets / "squad2", 0, 1, work, args.squad)
    halueval, halueval_corpus = halueval_questions(args.datasets / "halueval", work, args.halueval)
    cases = {"squad": retrieved(squad, squad_corpus), "halueval": retrieved(halueval, halueval_corpus)}
    rows = {source: {name: grade_arm(found, args.model, settings, server_cpu) for name, settings in arms}
            for source, found in cases.items()}  # fmt: skip
    print(f"{'source':9} {'arm':10} {'rejected':>9} {'kept ans.':>9} {'AUROC':>6} {'unjudged':>8} {'calls':>5} "
          f"{'tokens':>7} {'srv CPU s':>9}  labels")  # fmt: skip
    for source, results in rows.items():
        for name, r in results.items():
            of = f"/{r['reachable']:<4}"
            print(f"{source:9} {name:10} {r['rejected']:>4}{of} {r['kept_answer']:>4}{of}"
                  f" {r['auroc']:6} {r['unjudged']:8} {r['calls']:5} {r['tokens']:7} {r['server_cpu_s']!s:>9}  "
                  f"{r['labels']}")  # fmt: skip
    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {"models": {}}
    entry = {**origin, "arms": dict(arms), "questions": {s: len(c) for s, c in cases.items()}, "sources": rows}
    results = {**results, **origin, "models": {**results["models"], args.model: entry}}
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
