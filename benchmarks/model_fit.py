"""Fit a generator model's own calibration from its `selfcrag eval` records on tuning data, and say what it decides.

    .venv/bin/python benchmarks/model_fit.py RECORDS_DIR [RECORDS_DIR ...] [--out FILE] [--results FILE]
                                             [--cost C] [--keep-calibration]

Collect once, fit many: the records of a model-backend evaluation keep every candidate draft with its features
(`detail["candidates"]`), so the fit needs neither the model nor the index. Every candidate the check did not veto
is a row (the file is written with `"ungrounded_drafts": "scored"`: with a small model's checker groundedness is
weighed, not a gate), its label whether it holds a gold answer; features are chosen greedily by cross-validated
log-loss with folds grouped by article (`evaluation/calibrate.py`), among all but those that count the question's
own words (`QUESTION_WORDING`, as the offline fit) and the local verifier's (off here).

Writes `src/selfcrag/data/calibration/model_<model>.json` (the generator model named by the records' run.json;
`quality/calibration.shipped` reads it for that model) and `benchmarks/results/model_fit_<model>.json`, and prints:
the fit's grouped-CV AUROC among all candidates; each question decided again from its candidates' cross-validated
probabilities at the cost's floor p >= c / (1 + c) beside the runs' own decision and plain RAG; AUROC among the
answers shown and among each question's best draft; the ceiling: the best floor chosen with the answers known;
each feature's own AUROC among the drafts; and, given two or more folders, each folder decided by the same features
fitted on the others (does the fit carry from one corpus to another?).
Corrections: whether the candidates a correction added raised Phi at the cost against plain's draft alone, decided
by this fit's probabilities and by the confidences the runs had (`corrections`, `corrections_as_run`; records made
with a call budget of plain's draft and its checks hold too few). `--keep-calibration` writes the model's file as
the shipped calibration its runs used, unchanged but for its `corrections` verdict (decided by that calibration's
own confidences): for a model whose own fit does not carry to other corpora, it keeps the general score and learns
only whether correcting pays for it.
Use tuning records only (the SQuAD dev sample, the other questions of its 8 articles, HaluEval).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance  # noqa: E402

from selfcrag.errors import CalibrationDataError  # noqa: E402
from selfcrag.evaluation.calibrate import chosen, fit, fit_logistic, log_loss, matrix, rows_of, standardise, write  # noqa: E402,E501
from selfcrag.evaluation.calibrate import provenance as data_provenance  # noqa: E402
from selfcrag.evaluation.metrics import auroc, effective_reliability  # noqa: E402
from selfcrag.evaluation.paired import differences  # noqa: E402
from selfcrag.evaluation.refit import read_records  # noqa: E402
from selfcrag.quality.calibration import FEATURES, QUESTION_WORDING, model_file  # noqa: E402
from selfcrag.quality.thresholds import PRESETS, show_floor  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CALIBRATIONS = ROOT / "src" / "selfcrag" / "data" / "calibration"
RESULTS = ROOT / "benchmarks" / "results"
LEFT_OUT = {*QUESTION_WORDING, "verifier"}
# Questions that must hold a correction's draft before the records may say whether corrections pay: fewer is not a
# measurement (a budget of plain's draft and its checks leaves one or two, from a decline asked again).
MIN_CORRECTED = 20


def decided(rows: list[dict[str, Any]], p: list[float], floor: float) -> dict[str, Any]:
    """Each question's most probable candidate, shown when it reaches `floor`: right, wrong, Phi_1 and Phi_3, and
    AUROC of the probability among the answers shown and among each question's best draft."""
    picked, best = chosen(rows, p)
    drafts = [(value, bool(row["label"])) for row, value in zip(picked, best, strict=True) if row["drafted"]]
    shown = [(value, right) for value, right in drafts if value >= floor]
    right = sum(1 for _, r in shown if r)
    n = len(picked)
    return {"questions": n, "right": right, "wrong": len(shown) - right,
            "right_drafts": sum(1 for _, r in drafts if r),
            **{f"phi_{c}": round(effective_reliability(right, len(shown) - right, n, c) or 0.0, 4) for c in (0, 1, 3)},
            "auroc_shown": auroc([v for v, _ in shown], [r for _, r in shown]),
            "auroc_drafts": auroc([v for v, _ in drafts], [r for _, r in drafts])}  # fmt: skip


def outcomes(rows: list[dict[str, Any]], p: list[float], floor: float) -> list[dict[str, Any]]:
    """Per question, as `evaluation/paired.differences` reads records: whether its most probable candidate was shown
    (it reaches `floor`) and whether it was right."""
    picked, best = chosen(rows, p)
    return [{"id": f"{row['source']}/{row['id']}", "answered": row["drafted"] and value >= floor,
             "correct": row["drafted"] and value >= floor and bool(row["label"])}
            for row, value in zip(picked, best, strict=True)]  # fmt: skip


def corrections(rows: list[dict[str, Any]], p: list[float], floor: float, cost: float) -> dict[str, Any] | None:
    """Did correcting pay? Each question decided from plain's draft alone (the run as it would end with corrections
    off) against the same question decided from all its candidates, with the same probabilities, paired over the
    questions with a bootstrap interval. `pay`: the corrections raised Phi at `cost`. None when fewer than
    MIN_CORRECTED questions hold a correction's candidate (runs made with a budget of plain's draft and its checks
    say nothing about corrections: a decline asked again is all they hold)."""
    corrected = {(r["source"], r["id"]) for r in rows if r["drafted"] and not r["features"].get("plain_draft")}
    if len(corrected) < MIN_CORRECTED:
        return None
    keep = [i for i, r in enumerate(rows) if r["features"].get("plain_draft") or not r["drafted"]]
    plain_rows, plain_p = [rows[i] for i in keep], [p[i] for i in keep]
    have = {(r["source"], r["id"]) for r in plain_rows}
    for row in rows:  # a question whose plain draft could not be shown (vetoed): nothing to show without corrections
        if (row["source"], row["id"]) not in have:
            have.add((row["source"], row["id"]))
            plain_rows.append({**row, "features": {}, "label": False, "drafted": False})
            plain_p.append(0.0)
    every, alone = outcomes(rows, p, floor), outcomes(plain_rows, plain_p, floor)
    change = differences(every, alone, costs=(cost,))
    phi = change[f"phi_{cost:g}"]
    return {"pay": phi["difference"] > 0, "cost": cost, "questions": len(every), "questions_corrected": len(corrected),
            "phi_difference": phi, "right_difference": change["right"],
            "all_candidates": {"right": sum(o["correct"] for o in every),
                               "wrong": sum(o["answered"] and not o["correct"] for o in every)},
            "plain_draft_only": {"right": sum(o["correct"] for o in alone),
                                 "wrong": sum(o["answered"] and not o["correct"] for o in alone)}}


def ceiling(rows: list[dict[str, Any]], p: list[float], cost: float) -> dict[str, Any]:
    """The floor that would have been best here at `cost`, chosen with the answers known: the score's own limit."""
    _, best = chosen(rows, p)
    floors = sorted({round(v, 4) for v in best} | {round(show_floor(cost), 4)})
    found = []
    for floor in floors:
        made = decided(rows, p, floor)
        found.append((round(effective_reliability(made["right"], made["wrong"], made["questions"], cost) or 0.0, 4),
                      floor))  # fmt: skip
    phi, floor = max(found)
    return {"floor": floor, "phi_at_cost": phi}


def alone(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each candidate feature's own AUROC among the drafts (measured values only): which signal separates right
    drafts from wrong ones before any fit, the best first."""
    found = {}
    for name in FEATURES:
        if name in LEFT_OUT:
            continue
        measured = [r for r in rows if r["drafted"] and name not in (r.get("unmeasured") or ())]
        values = [float(r["features"].get(name, 0.0)) for r in measured]
        if len(set(values)) > 1 and (value := auroc(values, [bool(r["label"]) for r in measured])) is not None:
            found[name] = round(value if FEATURES[name][0] > 0 else 1 - value, 3)
    return dict(sorted(found.items(), key=lambda item: -item[1]))


def shown(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def plain_of(records: list[dict[str, Any]], ids: set[str]) -> dict[str, Any]:
    plain = [r for r in records if r.get("system") == "plain" and str(r["id"]) in ids]
    right = sum(1 for r in plain if r["correct"])
    wrong = sum(1 for r in plain if r["answered"]) - right
    return {"questions": len(plain), "right": right, "wrong": wrong,
            **{f"phi_{c}": round(effective_reliability(right, wrong, len(plain), c) or 0.0, 4) for c in (0, 1, 3)}}


def one_folder_out(rows: list[dict[str, Any]], names: list[str], folder_of: dict[str, str],
                   floor: float) -> dict[str, Any]:
    """Each folder decided by a fit of `names` on the other folders' rows: whether the features carry from one
    corpus to another (SQuAD's paragraphs to HaluEval's and back), which grouped CV within a mix cannot show."""
    found: dict[str, Any] = {}
    for held in sorted(set(folder_of.values())):
        train = [r for r in rows if r["drafted"] and folder_of[r["id"]] != held]
        test = [r for r in rows if folder_of[r["id"]] == held]
        x = matrix(train, names)
        mean, scale = standardise(x)
        weights, bias = fit_logistic((x - mean) / scale, np.array([r["label"] for r in train], dtype=float))
        z = ((matrix(test, names) - mean) / scale) @ weights + bias
        p = [float(v) if r["drafted"] else 0.0 for v, r in zip(1 / (1 + np.exp(-z)), test, strict=True)]
        drafted = [(v, float(r["label"])) for v, r in zip(p, test, strict=True) if r["drafted"]]
        found[held] = {**decided(test, p, floor), "trained_on": len(train),
                       "log_loss": round(float(log_loss(np.array([v for v, _ in drafted]),
                                                        np.array([y for _, y in drafted]))), 4)}
    return found


def used_calibration(folders: list[Path], records: list[dict[str, Any]]) -> tuple[Path | None, list[dict[str, Any]]]:
    """The shipped calibration file every run used (by run.json's sha256; None when they differ or none matches)
    and the candidates as it judged them: a file that withholds ungrounded drafts never showed them."""
    digests = {json.loads((f / "run.json").read_text(encoding="utf-8")).get("calibration_sha256") for f in folders}
    files = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in sorted(CALIBRATIONS.glob("*.json"))}
    used = files.get(next(iter(digests))) if len(digests) == 1 else None
    mode = json.loads(used.read_text(encoding="utf-8")).get("ungrounded_drafts", "withheld") if used else "scored"
    return used, rows_of(records, ungrounded=mode == "scored")


def keep(out: Path, used: Path, verdict: dict[str, Any] | None, origin: dict[str, Any]) -> None:
    """The calibration `used`, as it is, with the corrections verdict its confidences gave on these runs (and where
    that verdict came from): the model keeps the general score and learns only whether correcting pays for it."""
    body = json.loads(used.read_text(encoding="utf-8"))
    body.pop("corrections", None)
    if verdict is not None:
        body["corrections"] = {**verdict, "decided_by": f"{used.name}'s own confidences", "provenance": origin}
    temporary = out.with_name(out.name + ".tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    temporary.replace(out)


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("records", nargs="+", type=Path, help="`selfcrag eval` folders of the model on tuning data")
    cli.add_argument("--out", type=Path, help="the calibration file (default data/calibration/model_<model>.json)")
    cli.add_argument("--results", type=Path, help="the results file (default: benchmarks/results/model_fit_<model>"
                     ".json)")
    cli.add_argument("--cost", type=float, default=PRESETS["general"].cost, help="the cost decided at (general's)")
    cli.add_argument("--keep-calibration", action="store_true",
                     help="write the calibration the runs used (a shipped file) with only the corrections verdict "
                          "its own confidences give, not this fit: for a model whose fit does not carry")
    args = cli.parse_args(argv)
    if unnamed := [str(p) for p in args.records if not (p / "run.json").is_file()]:
        cli.error(f"not a `selfcrag eval` folder of one generator model (no run.json): {', '.join(unnamed)}")
    models = {json.loads((p / "run.json").read_text(encoding="utf-8")).get("generator_model", "")
              for p in args.records}  # fmt: skip
    if len(models) != 1 or not next(iter(models)):
        cli.error(f"the records must be of one generator model (their run.json say {sorted(models)})")
    model = model_file(next(iter(models)))
    try:
        records = read_records(args.records)
    except CalibrationDataError as exc:
        cli.error(str(exc))
    rows = rows_of(records, ungrounded=True)
    try:
        fitted = fit(rows, [name for name in FEATURES if name not in LEFT_OUT])
    except CalibrationDataError as exc:
        cli.error(str(exc))
    files = [p / "records.jsonl" for p in args.records]
    out = args.out or CALIBRATIONS / f"model_{model}.json"
    command = provenance(argv)["command"]
    floor = show_floor(args.cost)
    after, before = list(fitted["out_of_fold"]), [float(r["before"]) for r in rows]
    paid = corrections(rows, after, floor, args.cost)  # the fit's own out-of-fold probabilities decide
    used, used_rows = used_calibration(args.records, records)
    paid_as_run = corrections(used_rows, [float(r["before"]) for r in used_rows], floor, args.cost)
    if args.keep_calibration:
        if used is None:
            cli.error("--keep-calibration: the runs did not all use one shipped calibration file (run.json's "
                      "calibration_sha256)")
        if paid_as_run is None:
            cli.error(f"--keep-calibration: fewer than {MIN_CORRECTED} questions of these runs hold a correction's "
                      "draft, so they cannot say whether correcting pays; run with the full call budget")
        keep(out, used, paid_as_run, data_provenance(files, used_rows, "model", str(command)))
    else:
        write(out, fitted, data_provenance(files, rows, "model", str(command)), "scored", paid)
    ids = {str(r["id"]) for r in rows}
    result = {**provenance(argv), "model": model, "calibration": str(out.relative_to(ROOT)) if out.is_relative_to(ROOT)
              else str(out), "cost": args.cost, "floor": round(floor, 4), "features": fitted["model"]["features"],
              "fitted_model": fitted["model"],
              "cross_validation": fitted["cross_validation"],
              "fitted": {**decided(rows, after, floor), "ceiling": ceiling(rows, after, args.cost)},
              "as_run": {**decided(rows, before, floor), "ceiling": ceiling(rows, before, args.cost)},
              "plain": plain_of(records, ids), "auroc_alone": alone(rows), "corrections": paid,
              "calibration_used": used.name if used else None, "corrections_as_run": paid_as_run,
              "written": "the runs' calibration, with its corrections verdict" if args.keep_calibration
              else "this fit"}  # fmt: skip
    if len(args.records) > 1:  # which corpus each question came from
        folder_of = {str(r["id"]): folder.name for folder in args.records for r in read_records([folder])}
        result["one_folder_out"] = one_folder_out(rows, list(fitted["model"]["features"]), folder_of, floor)
    target = args.results or RESULTS / f"model_fit_{model}.json"
    target.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    checked = fitted["cross_validation"]
    print(f"{model}: {checked['questions']} questions, {len(rows)} candidates; features "
          f"{', '.join(result['features'])}; grouped-CV AUROC of all candidates {checked['before']['auroc']} as run, "
          f"{checked['after']['auroc']} fitted")
    print(f"decided at cost {args.cost:g} (floor {floor:.3f}):")
    print(f"{'system':<22}{'right':>6}{'wrong':>6}{'Phi_1':>8}{'Phi_3':>8}{'AUROC shown':>13}{'AUROC drafts':>14}"
          f"{'right drafts':>14}{'ceiling Phi_c':>13}")  # fmt: skip
    for name in ("fitted", "as_run", "plain"):
        row = result[name]
        print(f"{name:<22}{row['right']:>6}{row['wrong']:>6}{row['phi_1']:>8.3f}{row['phi_3']:>8.3f}"
              f"{shown(row.get('auroc_shown')):>13}{shown(row.get('auroc_drafts')):>14}"
              f"{shown(row.get('right_drafts')):>14}{shown((row.get('ceiling') or {}).get('phi_at_cost')):>13}")
    for held, row in (result.get("one_folder_out") or {}).items():
        print(f"{held} decided by a fit of the same features on the other folders: {row['right']} right, "
              f"{row['wrong']} wrong, Phi_1 {row['phi_1']:.3f}, AUROC among drafts {shown(row['auroc_drafts'])}, "
              f"log-loss {row['log_loss']:.3f}")
    for name, verdict in (("this fit", paid), (f"as run ({used.name if used else 'calibrations differ'})",
                                                 paid_as_run)):  # fmt: skip
        if verdict is None:
            print(f"corrections, {name}: too few in these records (a budget of plain's draft and its checks); "
                  "nothing said")
            continue
        change = verdict["phi_difference"]
        print(f"corrections, {name}: decided from every candidate {verdict['all_candidates']} against plain's draft "
              f"alone {verdict['plain_draft_only']} ({verdict['questions_corrected']} questions corrected): "
              f"Phi_{args.cost:g} {change['difference']:+.3f} ({change['low']:+.3f} to {change['high']:+.3f}); "
              f"pay: {verdict['pay']}")
    print("each feature alone, AUROC among drafts (its declared direction): " + ", ".join(
        f"{name} {value:.3f}" for name, value in list(result["auroc_alone"].items())[:8]))
    print(f"wrote {out} and {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
