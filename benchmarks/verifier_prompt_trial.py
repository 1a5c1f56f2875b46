"""Two verifier prompts compared on the tuning questions both reached, from their calibration_fit.py records: how
well the verifier's score alone ranks right drafts above wrong ones (AUROC over the drafted questions, and per
source: SQuAD's single-hop questions, HaluEval's multi-hop ones), and how many
unanswerable questions' drafts it scores above 0.5. Tuning data only (SQuAD dev sample, HaluEval); no model call.

    .venv/bin/python benchmarks/verifier_prompt_trial.py benchmarks/results/calibration_fit_verifier_records.jsonl \\
        benchmarks/results/calibration_fit_verifier2_records.jsonl

Writes benchmarks/results/verifier/prompt_trial.json (or the name `--out` gives).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_datasets import RESULTS, load_jsonl  # noqa: E402
from provenance import provenance  # noqa: E402


def drafts(path: Path) -> dict[str, dict]:
    """Each finished question's drafted selfcrag record (plain's record ends a question), by id."""
    records = load_jsonl(path)
    finished = {r["id"] for r in records if r["system"] == "plain"}
    return {r["id"]: r for r in records if r["system"] == "selfcrag" and r["id"] in finished and r.get("draft")}


def main(argv: list[str] | None = None) -> int:
    from selfcrag.evaluation.metrics import auroc
    from selfcrag.evaluation.questions import contains_gold

    cli = argparse.ArgumentParser(description="Two verifier prompts compared from their calibration_fit.py records.")
    cli.add_argument("records", type=Path, nargs="+", help="calibration_fit.py --records files, one per prompt")
    cli.add_argument("--out", default="prompt_trial.json", help="the file's name in benchmarks/results/verifier/")
    args = cli.parse_args(argv)
    paths = args.records
    runs = [drafts(p) for p in paths]
    shared = set.intersection(*(set(run) for run in runs))
    prompts = []
    for path, run in zip(paths, runs, strict=True):
        rows = [run[i] for i in sorted(shared)]
        scores = [float(r["detail"]["confidence_explanation"]["features"]["verifier"]) for r in rows]
        right = [not r["is_impossible"] and contains_gold(r["draft"], r["answers"]) for r in rows]
        prompt = next((s.get("prompt") for r in rows for s in r.get("trace") or [] if s.get("node") == "verify"), "")
        unanswerable = [s for s, r in zip(scores, rows, strict=True) if r["is_impossible"]]
        by_source = {}
        for source in sorted({str(r.get("source")) for r in rows}):
            mine = [(s, k) for s, k, r in zip(scores, right, rows, strict=True) if str(r.get("source")) == source]
            by_source[source] = {"drafted": len(mine), "right": sum(k for _, k in mine),
                                 "verifier_auroc": round(auroc([s for s, _ in mine], [k for _, k in mine]) or 0.0, 3)}
        prompts.append({"records": path.name, "prompt": prompt, "drafted": len(rows), "right": sum(right),
                        "verifier_auroc": round(auroc(scores, right) or 0.0, 3), "by_source": by_source,
                        "unanswerable_drafts": len(unanswerable),
                        "unanswerable_scored_above_half": round(sum(s > 0.5 for s in unanswerable)
                                                                / max(1, len(unanswerable)), 2)})  # fmt: skip
        print(prompts[-1])
    out = RESULTS / "verifier" / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"questions": sorted(shared), "prompts": prompts, **provenance(argv, __file__)},
                              indent=2) + "\n", encoding="utf-8")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
