"""What no choice of floor can fix: for each `selfcrag eval` results folder, the best the graph's decisions could
have done on those very records, had the floor been picked afterwards with the answers known. A ceiling, never a
choice: it reads out-of-domain records, so nothing here may set a floor, a cost or a rule (data discipline).

    .venv/bin/python benchmarks/floor_ceiling.py [FOLDER ...] [--out FILE]

With no folder, every `eval_*` folder under benchmarks/results that holds records.jsonl. For each, on the questions
both systems answered: plain RAG's right and wrong answers and Φ₁; what the graph showed; how many right answers its
drafts held (a draft is the one `finalize` shown or withheld; none when every draft failed a check), against plain's
right answers; and, over every floor on the graph's confidence (show a draft iff its confidence is at least the
floor), the best Φ₁ among the floors that keep issue 24's guards (right answers at least 0.8x plain's; unanswerable
questions answered at most 0.5x plain's, where the set has them), and whether that best reaches plain's Φ₁ + 0.10.

Two ways to miss the bar, then, and they call for different work:
- `right drafts` under 0.8x plain's right answers: the answers were lost before any decision (no draft, or every
  draft judged not grounded), so no calibration or floor can bring them back;
- enough right drafts but no floor meets the bar: the confidence does not rank right drafts far enough above wrong
  ones, so a better signal is needed, not another floor.
For the first, `lost` counts where plain's right answers went that no draft of the graph holds, from each record's
trace: a wrong draft; no draft, a draft having been judged not grounded by the rule checks (a name, number or
identifier the cited evidence lacks) or else by the model's verdict; no draft, an answer judged not useful; nothing
drafted at all. Counts only, to say which step to work on; never read the questions behind them to write a rule.
Prints a table, writes benchmarks/results/floor_ceiling.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_datasets import RESULTS, load_jsonl  # noqa: E402
from provenance import provenance  # noqa: E402

RIGHT_KEPT, UNANSWERABLE_KEPT, PHI_MARGIN = 0.8, 0.5, 0.10  # issue 24's bar


def counts(shown: list[tuple[bool, bool]]) -> tuple[int, int, int]:
    """(right, wrong, unanswerable answered) of (answerable and containing a gold answer, answerable) pairs shown."""
    right = sum(1 for good, _ in shown if good)
    return right, len(shown) - right, sum(1 for _, answerable in shown if not answerable)


RULE_FINDINGS = ("not in the evidence", "which the evidence does not have", "instructions to the assistant")


def lost_at(record: dict[str, Any]) -> str:
    """Where a question's right answer went when the graph kept no right draft (see the module's docstring)."""
    if record.get("draft"):
        return "wrong draft"
    trace = record.get("trace") or []
    checks = [t.get("reason", "") for t in trace if t.get("node") == "check_hallucination"
              and t.get("decision") == "not grounded"]  # fmt: skip
    if any(finding in reason for reason in checks for finding in RULE_FINDINGS):
        return "not grounded: rules"
    if checks:
        return "not grounded: model"
    if any(t.get("node") == "grade_answer" and t.get("decision") == "not useful" for t in trace):
        return "not useful"
    return "nothing drafted"


def ceiling(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures above for one folder's records."""
    from selfcrag.evaluation.questions import contains_gold

    graph = {r["id"]: r for r in records if r["system"] == "selfcrag"}
    plain = {r["id"]: r for r in records if r["system"] == "plain" and r["id"] in graph}
    n = len(plain)
    plain_right, plain_wrong, plain_unanswerable = counts(
        [(r["correct"], not r["is_impossible"]) for r in plain.values() if r["answered"]])
    plain_phi = (plain_right - plain_wrong) / n
    unanswerable = sum(1 for r in plain.values() if r["is_impossible"])
    drafts = [(r["confidence"], not r["is_impossible"] and contains_gold(r["draft"], r["answers"]),
               not r["is_impossible"]) for r in (graph[i] for i in plain) if r.get("draft")]  # fmt: skip
    shown_right, shown_wrong, _ = counts([(r["correct"], not r["is_impossible"])
                                          for r in (graph[i] for i in plain) if r["answered"]])  # fmt: skip
    best: dict[str, Any] | None = None
    for floor in sorted({confidence for confidence, _, _ in drafts}):
        right, wrong, answered_unanswerable = counts([(good, a) for c, good, a in drafts if c >= floor])
        guarded = right >= RIGHT_KEPT * plain_right and (
            not unanswerable or answered_unanswerable <= UNANSWERABLE_KEPT * plain_unanswerable)
        phi = (right - wrong) / n
        if guarded and (best is None or phi > best["phi_1"]):
            best = {"floor": round(floor, 4), "right": right, "wrong": wrong, "phi_1": round(phi, 3)}
    right_drafts = sum(1 for _, good, _ in drafts if good)
    lost = Counter(lost_at(graph[i]) for i, r in plain.items() if r["answered"] and r["correct"]
                   and not (not graph[i]["is_impossible"] and contains_gold(graph[i].get("draft") or "",
                                                                          graph[i]["answers"])))  # fmt: skip
    return {"questions": n, "plain": {"right": plain_right, "wrong": plain_wrong, "phi_1": round(plain_phi, 3)},
            "shown": {"right": shown_right, "wrong": shown_wrong, "phi_1": round((shown_right - shown_wrong) / n, 3)},
            "drafts": len(drafts), "right_drafts": right_drafts,
            "right_drafts_vs_plain": round(right_drafts / plain_right, 2) if plain_right else None,
            "lost": dict(sorted(lost.items())),
            "best_guarded_floor": best,
            "bar_reachable": bool(best and best["phi_1"] >= round(plain_phi + PHI_MARGIN, 3))}  # fmt: skip


def folders_under(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("**/eval_*/records.jsonl"))


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("folders", nargs="*", type=Path, help="selfcrag eval results folders (default: all committed)")
    cli.add_argument("--out", type=Path, default=RESULTS / "floor_ceiling.json")
    args = cli.parse_args(argv)
    folders = args.folders or folders_under(RESULTS)
    if not folders or any(not (f / "records.jsonl").is_file() for f in folders):
        cli.error("each folder must hold the records.jsonl of a `selfcrag eval` run")
    rows = {}
    print(f"{'run':<92}{'n':>4} | {'plain R/W':>9}{'Phi1':>7} | {'shown R/W':>9}{'Phi1':>7} | {'right drafts':>12} | "
          f"best guarded floor: {'R/W':>7}{'Phi1':>7}  bar")
    for folder in folders:
        name = str(folder.resolve().relative_to(RESULTS.resolve())) if folder.resolve().is_relative_to(
            RESULTS.resolve()) else str(folder)
        row = rows[name] = ceiling(load_jsonl(folder / "records.jsonl"))
        plain, shown, best = row["plain"], row["shown"], row["best_guarded_floor"]
        kept = "—" if row["right_drafts_vs_plain"] is None else f"{row['right_drafts_vs_plain']:.2f}x"
        floor = f"{best['right']:>3}/{best['wrong']:<3}{best['phi_1']:>+7.3f}" if best else f"{'none':>7}{'':>7}"
        print(f"{name:<92}{row['questions']:>4} | {plain['right']:>4}/{plain['wrong']:<4}{plain['phi_1']:>+7.3f} | "
              f"{shown['right']:>4}/{shown['wrong']:<4}{shown['phi_1']:>+7.3f} | "
              f"{row['right_drafts']:>5} ({kept:>5}) | {'':>20}{floor}  {'yes' if row['bar_reachable'] else 'no'}")
        if row["lost"]:
            print(f"{'':>4}plain's right answers with no right draft: "
                  + ", ".join(f"{where} {count}" for where, count in row["lost"].items()))
    args.out.write_text(json.dumps({**provenance(argv, __file__), "bar": {
        "right_kept": RIGHT_KEPT, "unanswerable_kept": UNANSWERABLE_KEPT, "phi_margin": PHI_MARGIN}, "runs": rows},
        indent=2) + "\n", encoding="utf-8")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
