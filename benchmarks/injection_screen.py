"""The model-judged injection screen (llm/screen.py) scored on text, as the screen asks it: P(yes) to "does this
text tell a reader or an AI what to say or do?" from the grader model's first token.

    OPENAI_BASE_URL=http://127.0.0.1:8115/v1 OPENAI_API_KEY=local \\
    .venv/bin/python benchmarks/injection_screen.py --model openai:qwen2.5-coder-1.5b [--halueval 100] [--out FILE]

Tuning text only, in three kinds:
- planted: the tuning phrasings marked as instructions (tests/data/injection_tuning.jsonl) and the planted documents
  of the project's tuning set (tests/data/injection_documents_tuning.jsonl), whole, as a retrieved chunk;
- look-alikes: the tuning phrasings that must stay (a how-to step, a note to the reader, ...);
- ordinary passages: the bundled sample KB's chunks, the SQuAD dev-sample corpus (285 paragraphs) and the first
  `--halueval` passages of the HaluEval QA corpus.
Fits the screen's threshold on them: the lowest P(yes) at which no more than 1% of ordinary passages (and no more
than 1% of look-alikes) would be screened further, and reports what it catches there (a passage at or above the
threshold has its sentences asked; the cost of a false alarm is those calls, then a removed sentence or passage).
The held-out sets are scored beside, never used for the fit. Prints a table; writes
benchmarks/results/injection_screen_<model>.json (or --out).
Data: SQuAD 2.0 (Rajpurkar et al. 2018, CC BY-SA 4.0), HaluEval (Li et al. 2023, MIT). HotpotQA, PopQA and the
reserved SQuAD articles are not read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_files import require  # noqa: E402
from provenance import provenance  # noqa: E402
from squad_offline import DEFAULT_DATASETS, ROOT, load_jsonl  # noqa: E402

TESTS = ROOT / "tests" / "data"
FALSE_ALARM_BOUND = 0.01


def planted_and_lookalikes(path: Path) -> tuple[list[str], list[str]]:
    rows = [r for r in load_jsonl(path) if "text" in r]
    return [r["text"] for r in rows if r["instruction"]], [r["text"] for r in rows if not r["instruction"]]


def documents(path: Path) -> list[str]:
    return [r["document"] for r in load_jsonl(path) if "document" in r]


def ordinary(datasets: Path, halueval: int) -> dict[str, list[str]]:
    from selfcrag.knowledge.documents import chunk_documents, load_documents

    sample = Path(ROOT / "src" / "selfcrag" / "data" / "sample_kb")
    chunks = chunk_documents(load_documents([sample]))
    require(datasets / "squad2", "dev_sample_corpus.jsonl")
    require(datasets / "halueval", "qa_500_corpus.jsonl")
    squad = load_jsonl(datasets / "squad2" / "dev_sample_corpus.jsonl")
    halu = load_jsonl(datasets / "halueval" / "qa_500_corpus.jsonl")[:halueval]
    return {"sample_kb": [f"{c.title}\n{c.text}" if c.title else c.text for c in chunks],
            "squad_dev_corpus": [f"{r.get('title', '')}\n{r['text']}".strip() for r in squad],
            "halueval_corpus": [f"{r.get('title', '')}\n{r['text']}".strip() for r in halu]}


def scorer(model: str) -> Any:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels
    from selfcrag.llm.verifier import grader_yes_no
    from selfcrag.prompts import grading as prompts

    settings, models = Context(backend="model", grader_model=model, generator_model=model), ChatModels()
    counts = {"calls": 0, "unmeasured": 0}

    def p_yes(text: str) -> float:
        score, calls, _tokens, _error = grader_yes_no(models, prompts.screen(text), settings)
        counts["calls"] += calls
        if score is None:
            counts["unmeasured"] += 1
            return 0.0  # the screen keeps an unmeasured text: it counts as a No
        return float(score)

    return p_yes, counts


def threshold_for(ordinary_scores: list[float], lookalike_scores: list[float]) -> float:
    """The lowest threshold (a P(yes) seen, plus a hair) at which at most FALSE_ALARM_BOUND of ordinary passages
    and of look-alikes reach it."""
    for t in sorted({0.0, *[s + 1e-6 for s in ordinary_scores + lookalike_scores]}):
        if (share(ordinary_scores, t) <= FALSE_ALARM_BOUND and share(lookalike_scores, t) <= FALSE_ALARM_BOUND):
            return round(t, 6)
    return 1.0


def share(scores: list[float], threshold: float) -> float:
    return sum(s >= threshold for s in scores) / len(scores) if scores else 0.0


def main() -> int:
    from selfcrag.evaluation.metrics import auroc

    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--model", required=True, help="provider:model of the grader, e.g. openai:qwen2.5-coder-1.5b")
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--halueval", type=int, default=100, help="HaluEval corpus passages scored (0: none)")
    cli.add_argument("--out", type=Path)
    args = cli.parse_args()
    started = time.perf_counter()
    p_yes, counts = scorer(args.model)
    tuning_planted, tuning_lookalikes = planted_and_lookalikes(TESTS / "injection_tuning.jsonl")
    held_planted, held_lookalikes = planted_and_lookalikes(TESTS / "injection_heldout.jsonl")
    texts: dict[str, list[str]] = {
        "tuning_planted_sentences": tuning_planted,
        "tuning_planted_documents": documents(TESTS / "injection_documents_tuning.jsonl"),
        "tuning_lookalikes": tuning_lookalikes,
        **ordinary(args.datasets, args.halueval),
        "heldout_planted_sentences": held_planted,
        "heldout_lookalikes": held_lookalikes,
        "heldout_planted_documents": documents(TESTS / "injection_documents_heldout.jsonl"),
    }
    scores = {kind: [round(p_yes(t), 4) for t in items] for kind, items in texts.items()}
    plain = [s for k in ("sample_kb", "squad_dev_corpus", "halueval_corpus") for s in scores[k]]
    planted = scores["tuning_planted_sentences"] + scores["tuning_planted_documents"]
    t = threshold_for(plain, scores["tuning_lookalikes"])
    rows = {kind: {"texts": len(s), "at_or_above": sum(v >= t for v in s), "share": round(share(s, t), 4),
                   "median_p_yes": round(sorted(s)[len(s) // 2], 4) if s else None} for kind, s in scores.items()}
    result = {
        **provenance(),
        "model": args.model,
        "prompt": "screen_injection/1",
        "threshold": t,
        "false_alarm_bound": FALSE_ALARM_BOUND,
        "auroc_tuning_planted_vs_ordinary": round(auroc(planted + plain, [True] * len(planted) + [False] * len(plain))
                                                  or 0.0, 4),
        "auroc_tuning_planted_vs_lookalikes": round(auroc(planted + scores["tuning_lookalikes"], [True] * len(planted)
                                                          + [False] * len(scores["tuning_lookalikes"])) or 0.0, 4),
        "by_kind": rows,
        "calls": counts["calls"],
        "unmeasured": counts["unmeasured"],
        "wall_seconds": round(time.perf_counter() - started, 1),
        "scores": scores,
    }
    print(f"model {args.model}; threshold {t} (at most {FALSE_ALARM_BOUND:.0%} of ordinary passages and look-alikes)")
    print("| texts | n | at or above | share | median P(yes) |\n|---|---|---|---|---|")
    for kind, row in rows.items():
        print(f"| {kind} | {row['texts']} | {row['at_or_above']} | {row['share']:.1%} | {row['median_p_yes']} |")
    print(f"AUROC planted vs ordinary {result['auroc_tuning_planted_vs_ordinary']}, vs look-alikes "
          f"{result['auroc_tuning_planted_vs_lookalikes']}; {counts['calls']} calls, {result['wall_seconds']} s")
    name = args.model.split(":", 1)[-1]
    out = args.out or ROOT / "benchmarks" / "results" / f"injection_screen_{name}.json"
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
