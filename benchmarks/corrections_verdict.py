"""Does correcting pay for a backend? Decided from its `selfcrag eval` records on tuning data, by the confidences the
runs had, and written into the calibration file they used.

    .venv/bin/python benchmarks/corrections_verdict.py RECORDS_DIR [RECORDS_DIR ...] [--cost C] [--write]
                                                       [--results FILE]

Each question is decided twice with the same probabilities: from plain's draft alone (the run as it would end with
corrections off) and from every candidate the corrections added; the paired bootstrap gives the difference in Phi
at the cost with its 95% interval (`model_fit.corrections`). Corrections pay when they raise Phi at the cost; where
they do not, a run ends once plain's draft is checked (routing.after_judge) and spends none of their CPU or calls.
Printed per folder and pooled over all folders (the verdict). `--write` puts the pooled verdict into the shipped
calibration every run used (they must all have used one), unchanged otherwise; `--results` (default
benchmarks/results/corrections_<calibration>.json) keeps every figure with the commit and command. For a model
backend's own fit, benchmarks/model_fit.py --keep-calibration does the same beside its fit.
Use tuning records only (the SQuAD dev sample, the other questions of its 8 articles, HaluEval), made with the full
call budget: a budget of plain's draft and its checks holds too few corrections to say anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_fit import CALIBRATIONS, RESULTS, corrections, keep, used_calibration  # noqa: E402
from provenance import provenance  # noqa: E402

from selfcrag.errors import CalibrationDataError  # noqa: E402
from selfcrag.evaluation.calibrate import provenance as data_provenance  # noqa: E402
from selfcrag.evaluation.refit import read_records  # noqa: E402
from selfcrag.quality.thresholds import PRESETS, show_floor  # noqa: E402

COSTS = (0.0, 1.0, 3.0)  # printed beside the cost decided at


def verdicts(folders: list[Path], costs: list[float]) -> tuple[Path | None, list[dict[str, Any]], dict[str, Any]]:
    """The calibration the runs used, their candidate rows, and the verdict at each of `costs`."""
    records = read_records(folders)
    used, rows = used_calibration(folders, records)
    before = [float(r["before"]) for r in rows]
    return used, rows, {f"{c:g}": corrections(rows, before, show_floor(c), c) for c in costs}


def line(name: str, found: dict[str, Any]) -> str:
    cells = []
    for cost, verdict in found.items():
        if verdict is None:
            cells.append(f"c={cost}: too few corrected")
            continue
        phi, every, alone = verdict["phi_difference"], verdict["all_candidates"], verdict["plain_draft_only"]
        cells.append(f"c={cost}: {every['right']}/{every['wrong']} vs {alone['right']}/{alone['wrong']}, "
                     f"dPhi {phi['difference']:+.3f} ({phi['low']:+.3f} to {phi['high']:+.3f})")  # fmt: skip
    return f"{name:<28}" + "; ".join(cells)


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("records", nargs="+", type=Path, help="`selfcrag eval` folders of one backend, tuning data")
    cli.add_argument("--cost", type=float, default=PRESETS["general"].cost, help="the cost decided at (general's)")
    cli.add_argument("--write", action="store_true", help="write the pooled verdict into the calibration used")
    cli.add_argument("--results", type=Path, default=None)
    args = cli.parse_args(argv)
    if unnamed := [str(p) for p in args.records if not (p / "records.jsonl").is_file()]:
        cli.error(f"not a `selfcrag eval` folder (no records.jsonl): {', '.join(unnamed)}")
    costs = sorted({*COSTS, args.cost})
    try:
        per_folder = {str(folder): verdicts([folder], costs)[2] for folder in args.records}
        used, rows, pooled = verdicts(args.records, costs)
    except CalibrationDataError as exc:
        cli.error(str(exc))
    if used is None:
        cli.error("the runs did not all use one shipped calibration file (run.json's calibration_sha256)")
    backends = {json.loads((p / "run.json").read_text(encoding="utf-8")).get("backend", "") for p in args.records}
    if len(backends) != 1 or not next(iter(backends)):
        cli.error(f"the runs must be of one backend (their run.json say {sorted(backends)})")
    backend = next(iter(backends))
    verdict = pooled[f"{args.cost:g}"]
    if verdict is None:
        cli.error(f"too few corrected questions to decide at cost {args.cost:g}; run the evals with the full budget")
    print("right/wrong shown: every candidate vs plain's draft alone; dPhi = every candidate - plain's draft alone")
    for name, found in per_folder.items():
        print(line(Path(name).name, found))
    print(line("pooled", pooled))
    print(f"verdict at c={args.cost:g}: corrections {'pay' if verdict['pay'] else 'do not pay'} for {used.name} "
          f"on the {backend} backend")
    command = str(provenance(argv)["command"])
    if args.write:
        files = [p / "records.jsonl" for p in args.records]
        # The verdict binds only runs of this backend (a model run borrowing this file still corrects).
        keep(used, used, {**verdict, "backend": backend}, data_provenance(files, rows, used.stem, command))
        print(f"wrote the verdict into {used.relative_to(CALIBRATIONS.parents[2])}")
    out = args.results or RESULTS / f"corrections_{used.stem}.json"
    out.write_text(json.dumps({**provenance(argv), "calibration": used.name, "backend": backend, "cost": args.cost,
                               "verdict": verdict,
                               "pooled": pooled, "per_folder": per_folder}, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
