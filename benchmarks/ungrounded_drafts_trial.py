"""Withheld or scored: the groundedness check as a gate, or as one feature of the calibration, judged on the same
tuning questions from the records of two `calibration_fit.py` runs (no graph runs here).

    .venv/bin/python benchmarks/ungrounded_drafts_trial.py [--arm NAME=RECORDS ...] [--out FILE]

By default two arms: `withheld` (benchmarks/results/calibration_fit_model_records.jsonl), runs whose calibration
withheld every draft the check did not pass, and `scored` (calibration_fit_model_scored_records.jsonl), runs of
`calibration_fit.py --ungrounded-drafts scored`, which kept them as candidates. `--arm` names other record files of
`calibration_fit.py` runs instead (e.g. a `--set` trial). Only the questions every file holds for both systems are
compared, and plain RAG's figures are each file's own (the same model and prompt). For each arm, per tuning source
(SQuAD dev sample, HaluEval):
- what the runs showed, with the calibration they ran with: right and wrong shown, effective reliability Phi_1,
  unanswerable questions answered (plain's beside it);
- a fit on that arm's runs (features chosen as `calibration_fit.py` chooses them), and at the general cost's floor,
  on its cross-validated probabilities: right and wrong shown, Phi_1, right answers and unanswerable questions
  answered against plain's (the issue's bar, on tuning data), and the fit's grouped-CV AUROC (an arm whose runs
  kept too few drafts for a fit reports its runs alone, and why);
- plain RAG's right answers the graph did not show, by why.
Prints a table, writes benchmarks/results/ungrounded_drafts_trial.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_fit import plain_counts, withheld_right  # noqa: E402
from eval_datasets import RESULTS, load_jsonl  # noqa: E402
from provenance import provenance  # noqa: E402

SYSTEMS = ("selfcrag", "plain")
DEFAULT_ARMS = {"withheld": str(RESULTS / "calibration_fit_model_records.jsonl"),
                "scored": str(RESULTS / "calibration_fit_model_scored_records.jsonl")}


def common(files: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """Each file's records of the questions every file holds for both systems."""
    loaded = {arm: load_jsonl(path) for arm, path in files.items()}
    held = [{(r["source"], r["id"]) for r in records if r["system"] == system}
            for records in loaded.values() for system in SYSTEMS]  # fmt: skip
    both = set.intersection(*held)
    return {arm: [r for r in records if (r["source"], r["id"]) in both] for arm, records in loaded.items()}


def shown(records: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """What the graph's runs showed, with the calibration they ran with."""
    runs = plain_counts(records, [source], system="selfcrag")[source]
    return {**runs, "phi_1": round((runs["right"] - runs["wrong"]) / runs["questions"], 3)}


def judged(records: list[dict[str, Any]]) -> dict[str, Any]:
    from selfcrag.errors import CalibrationDataError
    from selfcrag.evaluation.calibrate import chosen, cost_table, fit, keeps_at, rows_of
    from selfcrag.quality.calibration import FEATURES, QUESTION_WORDING
    from selfcrag.quality.thresholds import PRESETS, show_floor

    sources = sorted({r["source"] for r in records})
    plain = plain_counts(records, sources)
    rows = rows_of(records)
    cost = PRESETS["general"].cost
    runs = {"sources": {source: {"runs": shown(records, source), "plain": plain[source]} for source in sources},
            "plain_right_withheld": withheld_right(records)}  # fmt: skip
    try:
        fitted = fit(rows, [n for n in FEATURES if n not in QUESTION_WORDING], keeps=keeps_at(show_floor(cost)))
    except CalibrationDataError as error:  # an arm that kept too few drafts still reports what its runs showed
        return {**runs, "features": None, "cross_validation": None, "no_fit": str(error)}
    question_rows, question_p = chosen(rows, fitted["out_of_fold"])  # each question decided from its candidates
    at_floor = {row["source"]: row for row in cost_table(question_p, question_rows, plain, [cost])}
    for source, figures in runs["sources"].items():
        figures["fit_at_general_floor"] = at_floor[source]
    return {**runs, "features": fitted["model"]["features"], "cross_validation": fitted["cross_validation"]["after"]}


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--arm", action="append", default=[], metavar="NAME=RECORDS",
                     help="an arm and its records file (repeatable); default withheld and scored")
    cli.add_argument("--out", type=Path, default=RESULTS / "ungrounded_drafts_trial.json")
    args = cli.parse_args(argv)
    origin = provenance(argv, __file__)
    arms = dict(item.split("=", 1) for item in args.arm if "=" in item) or DEFAULT_ARMS
    if len(arms) < 2 or (args.arm and len(arms) != len(args.arm)):
        cli.error("--arm takes NAME=RECORDS, at least two of them")
    records = common({name: Path(path) for name, path in arms.items()})
    results = {arm: judged(found) for arm, found in records.items()}
    print(f"{'arm':<9}{'source':<10}{'n':>4} | runs: {'right':>5}{'wrong':>6}{'Phi1':>7}{'unans.':>7}{'plain':>6} | "
          "fit at the general floor: "
          f"{'right':>5}{'wrong':>6}{'Phi1':>7}{'plain':>7}{'right/plain':>12}{'unans./plain':>13} | {'AUROC':>5}")
    for arm, result in results.items():
        for source, figures in result["sources"].items():
            runs = figures["runs"]
            print(f"{arm:<9}{source:<10}{runs['questions']:>4} | {'':>6}{runs['right']:>5}{runs['wrong']:>6}"
                  f"{runs['phi_1']:>+7.3f}{runs['unanswerable']:>7}{figures['plain']['unanswerable']:>6} | ", end="")
            floor = figures.get("fit_at_general_floor")
            if floor is None:
                print(f"no fit: {result['no_fit']}")
                continue
            ratios = [("—" if floor[k] is None else f"{floor[k]:.2f}") for k in ("right_vs_plain",
                                                                              "unanswerable_vs_plain")]
            print(f"{'':>25}{floor['right']:>5}{floor['wrong']:>6}{floor['phi_1']:>+7.3f}"
                  f"{floor['plain_phi_1']:>+7.3f}{ratios[0]:>12}{ratios[1]:>13} | "
                  f"{result['cross_validation']['auroc']:>5.3f}")
        print(f"{arm}: features {', '.join(result['features'] or ['none'])}; plain's right answers not shown, by "
              f"why: {result['plain_right_withheld']}")
    out = args.out
    body = {**origin, "records": {name: Path(path).name for name, path in arms.items()},
            "questions": {arm: sum(1 for r in found if r["system"] == "selfcrag") for arm, found in records.items()},
            **results}  # fmt: skip
    out.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
