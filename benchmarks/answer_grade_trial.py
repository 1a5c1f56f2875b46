"""The model backend's answer grader, replayed on tuning answers: how well its score ranks right answers above wrong
ones (AUROC), how often a call fails (no verdict, or a verdict not taken), and its tokens per call. Tuning data
only: the answers come from a `calibration_fit.py --model ... --records` file (SQuAD dev sample and HaluEval), both
plain RAG's answer and selfcrag's draft of each finished question.

    OPENAI_BASE_URL=http://127.0.0.1:8099/v1 OPENAI_API_KEY=local \\
    .venv/bin/python benchmarks/answer_grade_trial.py benchmarks/results/calibration_fit_model_records.jsonl \\
        [--model openai:qwen2.5-coder-0.5b] [--limit 60] [--set answer_grading=yes_no]

Grades with the grader as the code stands (and the settings given), and writes its row under the grader prompt's
version in benchmarks/results/answer_grade_trial.json, followed by the model for any but the 0.5B, so a run before
and a run after a prompt change, or with another model, sit side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_datasets import RESULTS, load_jsonl, settings_given  # noqa: E402
from provenance import provenance  # noqa: E402

OUT = RESULTS / "answer_grade_trial.json"
DEFAULT_MODEL = "openai:qwen2.5-coder-0.5b"


def answers(path: Path) -> list[dict[str, Any]]:
    """(question, answer, right) for every finished question's plain answer and selfcrag draft, in file order;
    a draft identical to plain's answer is taken once."""
    from selfcrag.evaluation.questions import contains_gold
    from selfcrag.text.terms import strip_citations

    records = load_jsonl(path)
    finished = {r["id"] for r in records if r["system"] == "plain"}
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for r in records:
        text = r.get("draft") or (r["answer"] if r["system"] == "plain" else "")
        key = (r["id"], " ".join(strip_citations(text).split()))
        if r["id"] not in finished or not key[1] or key in seen:
            continue
        seen.add(key)
        rows.append({"id": r["id"], "system": r["system"], "question": r["question"], "answer": text,
                     "right": not r["is_impossible"] and contains_gold(text, r["answers"])})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    from selfcrag.context import Context
    from selfcrag.evaluation.metrics import auroc
    from selfcrag.llm.answer_grade import LLMAnswerGrader
    from selfcrag.llm.models import ChatModels
    from selfcrag.prompts import grading

    cli = argparse.ArgumentParser(description="The answer grader replayed on tuning answers: AUROC and failures.")
    cli.add_argument("records", type=Path, help="a calibration_fit.py --model ... --records file")
    cli.add_argument("--model", default=DEFAULT_MODEL, help="provider:model of the grader")
    cli.add_argument("--limit", type=int, default=60, help="grade the first N answers")
    cli.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a setting of the grader's runs (repeatable), e.g. --set answer_grading=yes_no")
    args = cli.parse_args(argv)
    chosen = settings_given(cli, args.set)
    rows = answers(args.records)[: args.limit]
    settings = Context(backend="model", generator_model=args.model, **chosen)
    grader = LLMAnswerGrader(ChatModels())
    graded = []
    started = time.perf_counter()
    for row in rows:
        grade = grader.grade(row["question"], row["answer"], settings)
        graded.append({**row, "score": grade.score, "useful": grade.useful, "error": grade.error,
                       "missing": grade.missing, "tokens": grade.tokens})  # fmt: skip
        print(f"{grade.score:.2f} {'R' if row['right'] else 'w'} {grade.error[:50]!s:50} {row['question'][:60]}")
    failed = sum(1 for g in graded if g["error"])
    prompt = grading.ANSWER_YES_NO if settings.answer_grading == "yes_no" else grading.ANSWER
    summary = {"prompt": prompt, "model": args.model, "settings": chosen, "answers": len(graded),
               "right": sum(g["right"] for g in graded),
               "auroc": round(auroc([g["score"] for g in graded], [g["right"] for g in graded]) or 0.0, 3),
               "failed_calls": failed, "failure_rate": round(failed / max(1, len(graded)), 3),
               "tokens_per_call": round(sum(g["tokens"] for g in graded) / max(1, len(graded)), 1),
               "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    print(json.dumps(summary))
    results = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {"trials": {}}
    origin = provenance(argv, __file__)
    # Each trial names what wrote it; the file as a whole, its latest writer.
    key = prompt if args.model == DEFAULT_MODEL else f"{prompt} {args.model}"
    results = {**results, **origin, "trials": {**results["trials"], key: {**summary, "graded": graded, **origin}}}
    OUT.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
